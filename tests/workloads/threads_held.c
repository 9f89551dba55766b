/*
 * threads_held.c - many threads alive at once, for `run --touch-stacks` under a low
 * descriptor limit (issue 13): a sampler holds a descriptor per live thread.
 *
 * `threads_held N`: starts N threads; each writes one page of its own and waits at a barrier
 * until all have; main joins them, prints "ok" and exits 0 (1 if a thread cannot be made).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { MAX_THREADS = 1024, PAGE = 4096 };

static pthread_barrier_t all_written;
static char *pages;

static void *work(void *arg)
{
    size_t i = (size_t)arg;
    pages[i * PAGE] = 1;
    pthread_barrier_wait(&all_written);
    return NULL;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100;
    if (n == 0 || n > MAX_THREADS)
        return 2;
    pages = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED)
        return 1;
    static pthread_t t[MAX_THREADS];
    pthread_barrier_init(&all_written, NULL, (unsigned)n);
    for (size_t i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, work, (void *)i) != 0)
            return 1;
    for (size_t i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    puts("ok");
    return 0;
}
