/*
 * threads_region.c [N] - N threads (default 8) start together on a barrier
 * and fault one shared 1024-page region: thread i writes every page p < 768
 * with p % N == i, and every thread reads pages 1000..1007 (racing on the
 * same pages). Expected present: 768 + 8 = 776.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <pthread.h>

#define NPAGES 1024
#define WRITE_PAGES 768
#define READ_FIRST 1000
#define READ_LAST 1007
#define MAX_THREADS 256

static char *region;
static int nthreads;
static pthread_barrier_t barrier;

static void *worker(void *arg)
{
    long i = (long)arg;
    pthread_barrier_wait(&barrier);
    volatile char *r = (volatile char *)region;
    for (long p = i; p < WRITE_PAGES; p += nthreads)
        r[p * TRUTH_PAGE] = (char)(i + 1);
    if (truth_read_pages(region, READ_FIRST, READ_LAST) != 0)
        truth_die("read pages not zero");
    return NULL;
}

int main(int argc, char **argv)
{
    nthreads = argc > 1 ? atoi(argv[1]) : 8;
    if (nthreads < 1 || nthreads > MAX_THREADS) {
        errno = EINVAL;
        truth_die("thread count must be 1..256");
    }
    region = truth_mmap_anon(NPAGES, PROT_READ | PROT_WRITE, 0);

    if (pthread_barrier_init(&barrier, NULL, (unsigned)nthreads) != 0)
        truth_die("pthread_barrier_init");
    truth_run_threads(nthreads, worker);
    pthread_barrier_destroy(&barrier);

    truth_region("shared", region, NPAGES);
    truth_expect("shared", WRITE_PAGES + (READ_LAST - READ_FIRST + 1));
    truth_finish(0);
}
