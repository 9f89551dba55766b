/*
 * u25_compaction.c - issue 25: pages moved by the kernel while they are checked.
 *
 * `u25_compaction MIB SECONDS`: writes MIB MiB of private anonymous memory, then reads it again
 * and again for SECONDS (compaction, run meanwhile by the test, migrates its pages: for an
 * instant each is a migration entry in the page tables, not a swap entry). Reports region
 * "held" (every page present). Exit 0.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <time.h>

int main(int argc, char **argv)
{
    if (argc < 3)
        truth_die("usage: u25_compaction MIB SECONDS");
    size_t pages = (size_t)atol(argv[1]) * 256;
    double seconds = atof(argv[2]);
    char *a = truth_mmap_anon(pages, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(a, 0, pages - 1);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    volatile unsigned long sum = 0;
    do {
        for (size_t i = 0; i < pages; i++)
            sum += a[i * TRUTH_PAGE];
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
    truth_region("held", a, pages);
    truth_expect("held", pages);
    truth_finish(0);
}
