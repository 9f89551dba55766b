/*
 * u26_zero_length.c - layout calls of length 0 inside a mapping whose pages are written: every
 * madvise advice the tracer stops for, and mprotect. The kernel does nothing for them; each
 * result is printed ("madvise ADVICE: RESULT"), then region "region" (256 pages, all present).
 */
#include "truth.h" /* first: defines _GNU_SOURCE */

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif
#ifndef MADV_GUARD_REMOVE
#define MADV_GUARD_REMOVE 103
#endif

int main(void) {
    char *a = truth_mmap_anon(256, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(a, 0, 255);
    char *inside = a + 2 * sysconf(_SC_PAGESIZE);
    int advice[] = {MADV_DONTNEED, MADV_FREE,     MADV_PAGEOUT,        MADV_COLD,
                    MADV_REMOVE,   MADV_HUGEPAGE, MADV_COLLAPSE,       MADV_POPULATE_WRITE,
                    MADV_GUARD_INSTALL, MADV_GUARD_REMOVE};
    for (unsigned i = 0; i < sizeof advice / sizeof *advice; i++)
        printf("madvise %d: %d\n", advice[i], madvise(inside, 0, advice[i]));
    printf("mprotect: %d\n", mprotect(inside, 0, PROT_READ));
    fflush(stdout);
    truth_region("region", a, 256);
    truth_expect("region", 256);
    truth_finish(0);
}
