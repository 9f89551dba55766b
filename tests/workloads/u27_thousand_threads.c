/*
 * u27_thousand_threads.c - 1,000 threads, alive together (a barrier holds each until all have
 * started), each of which writes one page of a shared region: thread i page i, and no other
 * thread touches it. Expected present: 1,000.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <pthread.h>

#define THREADS 1000

static char *region;
static pthread_barrier_t barrier;

static void *worker(void *arg)
{
    long i = (long)arg;
    pthread_barrier_wait(&barrier);
    ((volatile char *)region)[i * TRUTH_PAGE] = 1;
    return NULL;
}

int main(void)
{
    region = truth_mmap_anon(THREADS, PROT_READ | PROT_WRITE, 0);
    truth_nohuge(region, THREADS * TRUTH_PAGE);
    if (pthread_barrier_init(&barrier, NULL, THREADS) != 0)
        truth_die("pthread_barrier_init");
    static pthread_t threads[THREADS];
    for (long i = 0; i < THREADS; i++) {
        /* Small stacks: 1,000 of them fit anywhere. */
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 64 * 1024);
        int e = pthread_create(&threads[i], &attr, worker, (void *)i);
        pthread_attr_destroy(&attr);
        if (e != 0) {
            errno = e;
            truth_die("pthread_create");
        }
    }
    for (long i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&barrier);
    truth_region("shared", region, THREADS);
    truth_expect("shared", THREADS);
    truth_finish(0);
}
