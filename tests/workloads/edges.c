/*
 * edges.c - syscalls at the edges of what the tracer parses.
 *   "hole": 3 written pages, the middle one unmapped, then madvise(MADV_DONTNEED) over all 3:
 *           the kernel drops the two mapped pages and returns ENOMEM. Region "hole": 0 present.
 *   Before it, mremap of shared memory with old_size (size_t)-1 (PAGE_ALIGN wraps it to 0: a second
 *           mapping of the same pages) and with old_size 0. Exit 1 if either fails.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */

int main(void)
{
    char *shared = mmap(NULL, TRUTH_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
        truth_die("mmap shared");
    shared[0] = 1;
    if (mremap(shared, (size_t)-1, TRUTH_PAGE, MREMAP_MAYMOVE) == MAP_FAILED)
        truth_die("mremap old_size -1");
    if (mremap(shared, 0, TRUTH_PAGE, MREMAP_MAYMOVE) == MAP_FAILED)
        truth_die("mremap old_size 0");

    /* Last, so that no later mapping can land in the hole. */
    char *hole = truth_mmap_anon(3, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(hole, 0, 2);
    if (munmap(hole + TRUTH_PAGE, TRUTH_PAGE) != 0)
        truth_die("munmap");
    if (madvise(hole, 3 * TRUTH_PAGE, MADV_DONTNEED) == 0 || errno != ENOMEM)
        truth_die("madvise over a hole should fail with ENOMEM");

    truth_region("hole", hole, 3);
    truth_expect("hole", 0);
    truth_finish(0);
}
