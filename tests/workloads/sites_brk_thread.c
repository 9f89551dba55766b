/*
 * sites_brk_thread.c - a thread grows the heap with sbrk from a named function, for
 * `run --stacks` (issue 13).
 *
 * The thread first moves the break to a page boundary (outside the named function, and only if
 * it is not on one), then calls grow_heap_here, which grows the heap by 96 pages with one sbrk
 * and writes 70 of them. Nothing moves the break afterwards: the growth is alive at exit.
 *
 * Truth (besides truth_finish's region "grow_heap_here", the growth, at exit):
 *   {"truth":"site","pid":P,"name":"grow_heap_here","call":"sbrk","file":"sites_brk_thread.c",
 *    "line":L,"start":S,"end":E,"present":N,"kept":1}
 * L: the line of the sbrk call; [S,E): the growth (page-aligned); N: its pages present in
 * /proc/self/pagemap at the end.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <pthread.h>

#define GROWTH_PAGES 96
#define WRITTEN_PAGES 70

static char *growth;
static int sbrk_line;

__attribute__((noinline)) void grow_heap_here(void)
{
    char *p = sbrk(GROWTH_PAGES * TRUTH_PAGE); sbrk_line = __LINE__;
    if (p == (void *)-1)
        truth_die("sbrk(+96 pages)");
    truth_nohuge(p, GROWTH_PAGES * TRUTH_PAGE);
    truth_write_pages(p, GROWTH_PAGES - WRITTEN_PAGES, GROWTH_PAGES - 1);
    growth = p;
}

static void *worker(void *arg)
{
    (void)arg;
    char *now = sbrk(0);
    if (now == (void *)-1)
        truth_die("sbrk(0)");
    uintptr_t misaligned = (uintptr_t)now % TRUTH_PAGE;
    if (misaligned != 0 && sbrk((intptr_t)(TRUTH_PAGE - misaligned)) == (void *)-1)
        truth_die("sbrk(to a page boundary)");
    grow_heap_here();
    return NULL;
}

int main(void)
{
    truth_touch_stack();
    truth_touch_static();
    pthread_t th;
    int e = pthread_create(&th, NULL, worker, NULL);
    if (e != 0) {
        errno = e;
        truth_die("pthread_create");
    }
    pthread_join(th, NULL);

    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pm < 0)
        truth_die("open(/proc/self/pagemap)");
    uintptr_t start = (uintptr_t)growth, end = start + GROWTH_PAGES * TRUTH_PAGE;
    long present = truth_count_present(pm, start, end);
    close(pm);
    char buf[512];
    int n = snprintf(buf, sizeof buf,
        "{\"truth\":\"site\",\"pid\":%ld,\"name\":\"grow_heap_here\",\"call\":\"sbrk\","
        "\"file\":\"sites_brk_thread.c\",\"line\":%d,\"start\":%lu,\"end\":%lu,"
        "\"present\":%ld,\"kept\":1}\n",
        (long)getpid(), sbrk_line, (unsigned long)start, (unsigned long)end, present);
    if (n < 0 || (size_t)n >= sizeof buf) {
        errno = ENOSPC;
        truth_die("site line too long");
    }
    truth_write_all(1, buf, (size_t)n);
    truth_region("grow_heap_here", growth, GROWTH_PAGES);
    truth_expect("grow_heap_here", WRITTEN_PAGES);
    truth_finish(0);
}
