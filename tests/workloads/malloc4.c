/*
 * malloc4.c - 4 threads x 20000 iterations of malloc(random 16 B .. 256 KiB)
 * + memset, keeping up to 64 live blocks per thread in a ring (the oldest is
 * freed). Exercises glibc arenas (brk main arena, mmap'd thread arenas with
 * mprotect growth, trimming via madvise/munmap, mmap'd chunks). Live blocks
 * are deliberately not freed at the end. Reports anon + rollup only.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <pthread.h>

#define NTHREADS 4
#define ITERS 20000
#define RING 64
#define MIN_SIZE 16
#define MAX_SIZE (256 * 1024)

static uint64_t lcg_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

/* log-uniform-ish size in [MIN_SIZE, MAX_SIZE] */
static size_t rand_size(uint64_t *s)
{
    unsigned e = 4 + (unsigned)(lcg_next(s) % 15); /* 2^4 .. 2^18 */
    size_t lo = (size_t)1 << e;
    size_t sz = lo + (size_t)(lcg_next(s) % lo);
    if (sz < MIN_SIZE)
        sz = MIN_SIZE;
    if (sz > MAX_SIZE)
        sz = MAX_SIZE;
    return sz;
}

static void *worker(void *arg)
{
    long idx = (long)arg;
    uint64_t seed = (uint64_t)idx + 1;
    void *ring[RING] = {0};
    for (int it = 0; it < ITERS; it++) {
        int slot = it % RING;
        free(ring[slot]); /* oldest live block */
        size_t sz = rand_size(&seed);
        char *p = malloc(sz);
        if (!p)
            truth_die("malloc");
        memset(p, (int)(it & 0xff) | 1, sz);
        ring[slot] = p;
    }
    /* keep the remaining live blocks (intentionally leaked) */
    volatile uintptr_t keep = (uintptr_t)ring[0];
    (void)keep;
    return NULL;
}

int main(void)
{
    truth_run_threads(NTHREADS, worker);
    truth_finish(0);
}
