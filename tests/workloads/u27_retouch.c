/*
 * u27_retouch.c - one thread maps 8 pages at one address, writes them and unmaps them, 256
 * times over (the kernel gives the same address back each time), so that the tracer's lane
 * may hold several rounds' faults of a page at once; the last round's mapping is kept.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */

#define PAGES 8
#define ROUNDS 256

int main(void)
{
    char *base = NULL;
    for (int round = 0; round < ROUNDS; round++) {
        int fixed = base ? MAP_FIXED : 0;
        char *p = mmap(base, PAGES * TRUTH_PAGE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | fixed, -1, 0);
        if (p == MAP_FAILED)
            truth_die("mmap");
        base = p;
        truth_write_pages(p, 0, PAGES - 1);
        if (round < ROUNDS - 1 && munmap(p, PAGES * TRUTH_PAGE) != 0)
            truth_die("munmap");
    }
    truth_region("round", base, PAGES);
    truth_expect("round", PAGES);
    truth_finish(0);
}
