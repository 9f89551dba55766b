/*
 * sites_arena.c - two arenas mapped by two named functions, for `run --stacks` (issue 13).
 *
 * alloc_arena_a maps 3 MiB (768 pages) and writes 600 of its pages; alloc_arena_b maps
 * 5 MiB (1280 pages) and writes 1100. Both are written before main unmaps arena a, so each
 * arena's resident figure is also its largest, and the process's peak holds both. Arena b is
 * kept to the end (alive at exit), arena a is not.
 *
 * Built twice by the tests: with frame pointers (-fno-omit-frame-pointer) and without
 * (-fomit-frame-pointer: the unwinder needs DWARF CFI).
 *
 * Truth (besides truth_finish's), one line per layout call made at a known place:
 *   {"truth":"site","pid":P,"name":FUNCTION,"call":"mmap"|"munmap","file":"sites_arena.c",
 *    "line":L,"start":S,"end":E,"present":N,"kept":K}
 * L: the source line of the call (__LINE__ on the call's own line); [S,E): the range;
 * N: its pages present in /proc/self/pagemap just before the munmap (for arena b: at the
 * same moment; truth_finish's region "alloc_arena_b" gives it again at exit); K: 1 when the
 * range is still mapped at exit.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */

#define ARENA_A_PAGES 768
#define ARENA_A_WRITTEN 600
#define ARENA_B_PAGES 1280
#define ARENA_B_WRITTEN 1100

struct call {
    const char *function, *call;
    int line;
    char *start;
    size_t pages;
    long present;
    int kept;
};

static struct call arena_a, arena_b, unmap_a;

/* The whole call and __LINE__ on one line: the call instruction's line is the macro's. */
#define MAP_ANON_HERE(bytes, linep) \
    (*(linep) = __LINE__, mmap(NULL, (bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))

__attribute__((noinline)) char *alloc_arena_a(void)
{
    int line;
    char *p = MAP_ANON_HERE(ARENA_A_PAGES * TRUTH_PAGE, &line);
    if (p == MAP_FAILED)
        truth_die("mmap arena a");
    truth_nohuge(p, ARENA_A_PAGES * TRUTH_PAGE);
    truth_write_pages(p, 0, ARENA_A_WRITTEN - 1);
    arena_a = (struct call){"alloc_arena_a", "mmap", line, p, ARENA_A_PAGES, -1, 0};
    return p;
}

__attribute__((noinline)) char *alloc_arena_b(void)
{
    int line;
    char *p = MAP_ANON_HERE(ARENA_B_PAGES * TRUTH_PAGE, &line);
    if (p == MAP_FAILED)
        truth_die("mmap arena b");
    truth_nohuge(p, ARENA_B_PAGES * TRUTH_PAGE);
    /* Skip the first pages: written pages need not start a mapping. */
    truth_write_pages(p, ARENA_B_PAGES - ARENA_B_WRITTEN, ARENA_B_PAGES - 1);
    arena_b = (struct call){"alloc_arena_b", "mmap", line, p, ARENA_B_PAGES, -1, 1};
    return p;
}

static void print_call(const struct call *c)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf,
        "{\"truth\":\"site\",\"pid\":%ld,\"name\":\"%s\",\"call\":\"%s\","
        "\"file\":\"sites_arena.c\",\"line\":%d,\"start\":%lu,\"end\":%lu,"
        "\"present\":%ld,\"kept\":%d}\n",
        (long)getpid(), c->function, c->call, c->line, (unsigned long)c->start,
        (unsigned long)(c->start + c->pages * TRUTH_PAGE), c->present, c->kept);
    if (n < 0 || (size_t)n >= sizeof buf) {
        errno = ENOSPC;
        truth_die("site line too long");
    }
    truth_write_all(1, buf, (size_t)n);
}

int main(void)
{
    /* What truth_finish will touch, touched first: nothing later outgrows the two arenas. */
    truth_touch_stack();
    truth_touch_static();

    char *a = alloc_arena_a();
    char *b = alloc_arena_b();

    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pm < 0)
        truth_die("open(/proc/self/pagemap)");
    arena_a.present = truth_count_present(pm, (uintptr_t)a, (uintptr_t)a + ARENA_A_PAGES * TRUTH_PAGE);
    arena_b.present = truth_count_present(pm, (uintptr_t)b, (uintptr_t)b + ARENA_B_PAGES * TRUTH_PAGE);
    close(pm);

    unmap_a = (struct call){"main", "munmap", __LINE__ + 1, a, ARENA_A_PAGES, 0, 0};
    if (munmap(a, ARENA_A_PAGES * TRUTH_PAGE) != 0)
        truth_die("munmap arena a");

    print_call(&arena_a);
    print_call(&arena_b);
    print_call(&unmap_a);
    truth_region("alloc_arena_b", b, ARENA_B_PAGES);
    truth_expect("alloc_arena_b", ARENA_B_WRITTEN);
    truth_finish(0);
}
