/*
 * u25_min_size_merge.c - issue 25: a big buffer the kernel merges beside a small one.
 *
 * malloc(200000) then malloc(50000000) (python's bytearray(50_000_000) does the same): glibc
 * maps each, and the kernel places the second right below the first and makes them one
 * mapping. Writes the big one whole and reports it as region "big" (every page present).
 * Exit 0.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */

int main(void)
{
    char *small = malloc(200000);
    char *big = malloc(50000000);
    if (!small || !big)
        truth_die("malloc");
    memset(small, 1, 200000);
    memset(big, 1, 50000000);
    /* The whole pages of the buffer. */
    uintptr_t start = ((uintptr_t)big + TRUTH_PAGE - 1) & ~(TRUTH_PAGE - 1);
    uintptr_t end = ((uintptr_t)big + 50000000) & ~(TRUTH_PAGE - 1);
    truth_region_range("big", start, end);
    truth_expect("big", (long)((end - start) / TRUTH_PAGE));
    truth_finish(0);
}
