/*
 * race.c [SECONDS] - stress (default 1 s): 4 threads start together and loop
 * until the time is up:
 *   mmap 16 pages, write all, MADV_DONTNEED pages 0..7, write pages 0..1
 *   again, mremap grow to 24 pages (MREMAP_MAYMOVE), write the tail (pages
 *   16..23), munmap.
 * Every loop leaves nothing behind, so the end state is just the process
 * baseline. Reports anon + rollup. Exit 0 (1 if a thread did no iteration).
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <pthread.h>
#include <time.h>

#define NTHREADS 4
#define P TRUTH_PAGE

static double seconds = 1.0;
static pthread_barrier_t barrier;
static long iterations[NTHREADS];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *worker(void *arg)
{
    long idx = (long)arg;
    pthread_barrier_wait(&barrier);
    double deadline = now() + seconds;
    long n = 0;
    do {
        char *a = truth_mmap_anon(16, PROT_READ | PROT_WRITE, 0);
        truth_write_pages(a, 0, 15);
        if (madvise(a, 8 * P, MADV_DONTNEED) != 0)
            truth_die("madvise(MADV_DONTNEED)");
        truth_write_pages(a, 0, 1);
        char *b = mremap(a, 16 * P, 24 * P, MREMAP_MAYMOVE);
        if (b == MAP_FAILED)
            truth_die("mremap");
        truth_write_pages(b, 16, 23);
        if (munmap(b, 24 * P) != 0)
            truth_die("munmap");
        n++;
    } while (now() < deadline);
    iterations[idx] = n;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        seconds = strtod(argv[1], NULL);
    if (!(seconds >= 0))
        seconds = 1.0;
    if (pthread_barrier_init(&barrier, NULL, NTHREADS) != 0)
        truth_die("pthread_barrier_init");
    truth_run_threads(NTHREADS, worker);
    int ok = 1;
    for (int i = 0; i < NTHREADS; i++)
        if (iterations[i] <= 0)
            ok = 0;
    pthread_barrier_destroy(&barrier);
    truth_finish(ok ? 0 : 1);
}
