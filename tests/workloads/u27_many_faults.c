/*
 * u27_many_faults.c - one thread writes 4096 fresh pages (no huge pages) in one go, with no
 * system call between two of them: 4096 page faults back to back, more than a small ring of
 * fault records holds.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */

#define PAGES 4096

int main(void)
{
    char *region = truth_mmap_anon(PAGES, PROT_READ | PROT_WRITE, 0);
    truth_nohuge(region, PAGES * TRUTH_PAGE);
    truth_write_pages(region, 0, PAGES - 1);
    truth_region("region", region, PAGES);
    truth_expect("region", PAGES);
    truth_finish(0);
}
