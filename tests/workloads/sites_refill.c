/*
 * sites_refill.c - a page first touched by one function, discarded, then made resident again
 * by a fault the kernel's perf event never samples (issue 13, `--touch-stacks`).
 *
 * For each of 256 pages: write_page reads then writes it (sampled faults), madvise(MADV_DONTNEED) drops
 * it, and refill_page makes it resident again with madvise(MADV_POPULATE_WRITE), whose faults
 * the kernel takes on the thread's behalf without a page-fault event. A refill must never be
 * given write_page's stack.
 *
 * Truth: the region "refill" (256 pages, all present at the end), as truth.h prints it.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum { PAGES = 256 };

/* A read first (a followed first touch: the zero page), then a write (copy-on-write of the
 * zero page, sampled, but no first touch: no lane ever looks at its sample). */
__attribute__((noinline)) void write_page(volatile char *p)
{
    (void)p[0];
    p[0] = 1;
}

__attribute__((noinline)) int refill_page(char *p, long page)
{
    return madvise(p, (size_t)page, MADV_POPULATE_WRITE);
}

int main(void)
{
    truth_touch_stack();
    truth_touch_static();
    long page = TRUTH_PAGE;
    char *region = mmap(NULL, PAGES * page, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED)
        truth_die("mmap");
    truth_nohuge(region, PAGES * page);
    for (int i = 0; i < PAGES; i++) {
        char *p = region + i * page;
        write_page(p);
        if (madvise(p, (size_t)page, MADV_DONTNEED) != 0)
            truth_die("madvise(MADV_DONTNEED)");
        if (refill_page(p, page) != 0)
            truth_die("madvise(MADV_POPULATE_WRITE)");
    }
    truth_region("refill", region, PAGES);
    truth_expect("refill", PAGES);
    truth_finish(0);
}
