/*
 * export_sites.c - two call sites that map and write anonymous memory, for `export` (issue 28).
 *
 * map_steady maps and writes 256 pages; map_growing maps and writes argv[1] pages (256 by
 * default). A second run with a larger argv[1] grows one site and no other: what
 * `go tool pprof -diff_base` of the two runs' profiles must show.
 *
 * Both regions are kept to the exit, and everything truth_finish touches is touched first, so
 * the process's resident peak holds both regions whole. Truth: truth_finish's regions
 * "steady" and "growing", with the pages the kernel has present in each.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */

#define STEADY_PAGES 256

/* The mmap call written out in each function (a macro, not a helper that would be inlined and
 * named as a frame of its own): the function is its stack's innermost user frame. */
#define MAP_ANON_PAGES(pages) \
    mmap(NULL, (pages) * TRUTH_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)

/* noipa: neither inlined nor folded into the other; they stay two call sites. */
__attribute__((noipa)) char *map_steady(void)
{
    char *p = MAP_ANON_PAGES(STEADY_PAGES);
    if (p == MAP_FAILED)
        truth_die("mmap steady");
    truth_nohuge(p, STEADY_PAGES * TRUTH_PAGE);
    truth_write_pages(p, 0, STEADY_PAGES - 1);
    return p;
}

__attribute__((noipa)) char *map_growing(size_t pages)
{
    char *p = MAP_ANON_PAGES(pages);
    if (p == MAP_FAILED)
        truth_die("mmap growing");
    truth_nohuge(p, pages * TRUTH_PAGE);
    truth_write_pages(p, 0, pages - 1);
    return p;
}

int main(int argc, char **argv)
{
    truth_touch_stack();
    truth_touch_static();
    size_t growing_pages = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
    if (growing_pages == 0 || growing_pages > 65536) {
        errno = EINVAL;
        truth_die("pages of map_growing: 1 to 65536");
    }
    char *steady = map_steady();
    char *growing = map_growing(growing_pages);
    truth_region("steady", steady, STEADY_PAGES);
    truth_expect("steady", STEADY_PAGES);
    truth_region("growing", growing, growing_pages);
    truth_expect("growing", growing_pages);
    truth_finish(0);
}
