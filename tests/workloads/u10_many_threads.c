/*
 * u10_many_threads.c - issue 10: checkpoints must not starve a program.
 *
 * Starts 1,000 threads that each allocate, write and free 64 KiB, joins them, prints "ok" and
 * exits 0 (1 if a thread cannot be created). 0.02 s untraced. Before issue 10, under
 * `--verify-every 5`, each checkpoint (which stops every thread) took longer than the interval,
 * the next began as soon as threads resumed, and the run was not done after 120 s.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { THREADS = 1000, BYTES = 65536 };

static void *work(void *arg)
{
    char *p = malloc(BYTES);
    if (p) {
        memset(p, 1, BYTES);
        free(p);
    }
    return arg;
}

int main(void)
{
    static pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, work, NULL) != 0)
            return 1;
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    puts("ok");
    return 0;
}
