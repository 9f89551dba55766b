/*
 * coalesce.c - first touches in the shapes `--coalesce-ms` gathers and breaks:
 * 4 threads start together on a barrier, each on a 512-page region of its own
 * made by main before the threads start (so that, with ASLR off, every run puts
 * everything at the same addresses):
 *   0: writes every page, ascending;
 *   1: writes every page, descending;
 *   2: reads every page, then writes every other page (no new first touch);
 *   3: writes every third page, drops pages 0..255 with MADV_DONTNEED, then
 *      writes every page.
 * Expected present: 512 per region.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <pthread.h>

#define NPAGES 512
#define NTHREADS 4

static char *regions[NTHREADS];
static pthread_barrier_t barrier;

static void *worker(void *arg)
{
    long i = (long)arg;
    volatile char *r = (volatile char *)regions[i];
    pthread_barrier_wait(&barrier);
    switch (i) {
    case 0:
        for (long p = 0; p < NPAGES; p++)
            r[p * TRUTH_PAGE] = 1;
        break;
    case 1:
        for (long p = NPAGES - 1; p >= 0; p--)
            r[p * TRUTH_PAGE] = 1;
        break;
    case 2:
        if (truth_read_pages(regions[i], 0, NPAGES - 1) != 0)
            truth_die("read pages not zero");
        for (long p = 0; p < NPAGES; p += 2)
            r[p * TRUTH_PAGE] = 1;
        break;
    default:
        for (long p = 0; p < NPAGES; p += 3)
            r[p * TRUTH_PAGE] = 1;
        if (madvise(regions[i], NPAGES / 2 * TRUTH_PAGE, MADV_DONTNEED) != 0)
            truth_die("madvise(MADV_DONTNEED)");
        for (long p = 0; p < NPAGES; p++)
            r[p * TRUTH_PAGE] = 2;
        break;
    }
    return NULL;
}

int main(void)
{
    static const char *names[NTHREADS] = {"ascending", "descending", "read", "dropped"};
    for (int i = 0; i < NTHREADS; i++) {
        regions[i] = truth_mmap_anon(NPAGES, PROT_READ | PROT_WRITE, 0);
        truth_region(names[i], regions[i], NPAGES);
        truth_expect(names[i], NPAGES);
    }
    if (pthread_barrier_init(&barrier, NULL, NTHREADS) != 0)
        truth_die("pthread_barrier_init");
    truth_run_threads(NTHREADS, worker);
    truth_finish(0);
}
