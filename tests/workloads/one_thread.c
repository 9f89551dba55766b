/*
 * one_thread.c - single-threaded tour of mmap/munmap/madvise/mremap/mprotect/
 * brk. Each step uses its own region, reported as a "region" truth line.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */

#define P TRUTH_PAGE

static void step_brk(void)
{
    /* First thing in main: no malloc/printf has run yet. */
    char *cur = sbrk(0);
    if (cur == (void *)-1)
        truth_die("sbrk(0)");
    char *old = sbrk((intptr_t)(64 * P));
    if (old == (void *)-1)
        truth_die("sbrk(+64 pages)");
    char *start = (char *)truth_page_up((uintptr_t)old);
    truth_nohuge(start, 48 * P);
    truth_write_pages(start, 0, 47);
    if (sbrk(-(intptr_t)(16 * P)) == (void *)-1)
        truth_die("sbrk(-16 pages)");
    truth_region("brk", start, 48);
    truth_expect("brk", 48);
}

int main(void)
{
    step_brk();

    /* touch: 64 pages, write pages 0..39 */
    {
        char *a = truth_mmap_anon(64, PROT_READ | PROT_WRITE, 0);
        truth_write_pages(a, 0, 39);
        truth_region("touch", a, 64);
        truth_expect("touch", 40);
    }

    /* read: 32 pages, read pages 0..15 (zero page mapped) */
    {
        char *a = truth_mmap_anon(32, PROT_READ | PROT_WRITE, 0);
        if (truth_read_pages(a, 0, 15) != 0)
            truth_die("read: fresh anon memory not zero");
        truth_region("read", a, 32);
        truth_expect("read", 16);
    }

    /* dontneed: 32 pages, write all, DONTNEED 0..15, write page 0 again */
    {
        char *a = truth_mmap_anon(32, PROT_READ | PROT_WRITE, 0);
        truth_write_pages(a, 0, 31);
        if (madvise(a, 16 * P, MADV_DONTNEED) != 0)
            truth_die("madvise(MADV_DONTNEED)");
        truth_write_pages(a, 0, 0);
        truth_region("dontneed", a, 32);
        truth_expect("dontneed", 17);
    }

    /* free: 16 pages, write all, MADV_FREE all (stay present until reclaim) */
    {
        char *a = truth_mmap_anon(16, PROT_READ | PROT_WRITE, 0);
        truth_write_pages(a, 0, 15);
        if (madvise(a, 16 * P, MADV_FREE) != 0)
            truth_die("madvise(MADV_FREE)");
        truth_region("free", a, 16);
        truth_expect("free", 16);
    }

    /* remap_grow: 8 pages, write all, mremap to 32 (MAYMOVE), write 20..23 */
    {
        char *a = truth_mmap_anon(8, PROT_READ | PROT_WRITE, 0);
        truth_write_pages(a, 0, 7);
        char *b = mremap(a, 8 * P, 32 * P, MREMAP_MAYMOVE);
        if (b == MAP_FAILED)
            truth_die("mremap grow");
        truth_write_pages(b, 20, 23);
        truth_region("remap_grow", b, 32);
        truth_expect("remap_grow", 12);
    }

    /* remap_fixed: 16 pages, write all, move onto a reserved PROT_NONE area */
    {
        char *a = truth_mmap_anon(16, PROT_READ | PROT_WRITE, 0);
        truth_write_pages(a, 0, 15);
        char *r = truth_mmap_anon(16, PROT_NONE, 0);
        char *b = mremap(a, 16 * P, 16 * P, MREMAP_MAYMOVE | MREMAP_FIXED, r);
        if (b == MAP_FAILED || b != r)
            truth_die("mremap fixed");
        truth_region("remap_fixed", b, 16);
        truth_expect("remap_fixed", 16);
    }

    /* dontunmap: 8 pages, write all, mremap DONTUNMAP -> old empty, new full */
    {
        char *a = truth_mmap_anon(8, PROT_READ | PROT_WRITE, 0);
        truth_write_pages(a, 0, 7);
        char *b = mremap(a, 8 * P, 8 * P, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, NULL);
        if (b == MAP_FAILED)
            truth_die("mremap dontunmap");
        truth_region("dontunmap_old", a, 8);
        truth_expect("dontunmap_old", 0);
        truth_region("dontunmap_new", b, 8);
        truth_expect("dontunmap_new", 8);
    }

    /* fixed: 16 pages, write all, MAP_FIXED a fresh 4-page mapping at +4 */
    {
        char *a = truth_mmap_anon(16, PROT_READ | PROT_WRITE, 0);
        truth_write_pages(a, 0, 15);
        char *m = mmap(a + 4 * P, 4 * P, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (m == MAP_FAILED || m != a + 4 * P)
            truth_die("mmap MAP_FIXED");
        truth_nohuge(m, 4 * P);
        truth_region("fixed", a, 16);
        truth_expect("fixed", 12);
    }

    /* populate: 16 pages MAP_POPULATE */
    {
        char *a = truth_mmap_anon(16, PROT_READ | PROT_WRITE, MAP_POPULATE);
        truth_region("populate", a, 16);
        truth_expect("populate", 16);
    }

    /* arena: 32 pages PROT_NONE, mprotect first 8 RW, write them */
    {
        char *a = truth_mmap_anon(32, PROT_NONE, MAP_NORESERVE);
        if (mprotect(a, 8 * P, PROT_READ | PROT_WRITE) != 0)
            truth_die("mprotect");
        truth_write_pages(a, 0, 7);
        truth_region("arena", a, 32);
        truth_expect("arena", 8);
    }

    /* unmap_part: 32 pages, write all, munmap pages 8..15.
     * Done LAST: any later mmap could be placed in the 8-page hole and make
     * the (whole 32-page) region line count pages that are not ours. */
    {
        char *a = truth_mmap_anon(32, PROT_READ | PROT_WRITE, 0);
        truth_write_pages(a, 0, 31);
        if (munmap(a + 8 * P, 8 * P) != 0)
            truth_die("munmap");
        truth_region("unmap_part", a, 32);
        truth_expect("unmap_part", 24);
    }

    truth_finish(0);
}
