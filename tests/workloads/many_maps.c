/*
 * many_maps.c - a space of many small mappings, as a JVM or a python process has them
 * (issue 25 item 13: the report's address-space view with more than 64 tracked mappings).
 *
 * Args: [N=1100] [K=8]. Maps N separate private anonymous mappings of K pages each, one free
 * page between neighbours (so that the kernel merges none), in address order; mapping i
 * writes its page i % K, and every third one also reads its last page (a zero page). Mapping
 * N * 2 / 3 ("chosen") writes its pages 1, 3 and 5 and reads none. Then one mapping of 16384
 * pages ("huge"), its first 1000 pages written. Each is made MADV_NOHUGEPAGE.
 *
 * Truth: regions "chosen" (expect 3) and "huge" (expect 1000), then exit 0; with N above 4000
 * the truth is left out (/proc/self/maps would not fit truth.h's buffer) and it prints
 * "done N".
 */
#include "truth.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1100, k = argc > 2 ? atol(argv[2]) : 8;
    if (n < 3 || k < 6)
        truth_die("usage: many_maps [N>=3] [K>=6]");
    long chosen = n * 2 / 3, stride = k + 1;
    /* Reserve the whole run first, so that the mappings lie in order one page apart. */
    char *base = mmap(NULL, (size_t)(n * stride) * TRUTH_PAGE, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        truth_die("mmap reservation");
    if (munmap(base, (size_t)(n * stride) * TRUTH_PAGE) != 0)
        truth_die("munmap reservation");
    for (long i = 0; i < n; i++) {
        char *p = mmap(base + i * stride * TRUTH_PAGE, (size_t)k * TRUTH_PAGE,
                       PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED)
            truth_die("mmap");
        truth_nohuge(p, (size_t)k * TRUTH_PAGE);
        if (i == chosen) {
            truth_write_pages(p, 1, 1);
            truth_write_pages(p, 3, 3);
            truth_write_pages(p, 5, 5);
            truth_region("chosen", p, (size_t)k);
            truth_expect("chosen", 3);
            continue;
        }
        truth_write_pages(p, (size_t)(i % k), (size_t)(i % k));
        if (i % 3 == 0)
            truth_read_pages(p, (size_t)(k - 1), (size_t)(k - 1));
    }
    char *huge = truth_mmap_anon(16384, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(huge, 0, 999);
    if (n > 4000) {
        printf("done %ld\n", n);
        return 0;
    }
    truth_region("huge", huge, 16384);
    truth_expect("huge", 1000);
    truth_finish(0);
}
