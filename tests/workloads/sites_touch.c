/*
 * sites_touch.c - first touches made by two named functions, for `run --touch-stacks` (issue 13).
 *
 * main maps two regions; write_pages_here (in the main thread) writes every page of the first,
 * 512 pages, and write_pages_there (in a second thread) every page of the second, 256 pages,
 * each with its own loop, so that the faulting instruction is in that function.
 *
 * `sites_touch NOISE`: before each page of the first region, write_pages_here also writes
 * NOISE fresh pages of a shared anonymous mapping: faults no lane follows (shmem), between
 * every two followed ones, as a fork child's copy-on-write faults come.
 *
 * Truth (besides truth_finish's), one line per writing function:
 *   {"truth":"site","pid":P,"name":FUNCTION,"call":"write","file":"sites_touch.c",
 *    "line":L,"start":S,"end":E,"present":N,"kept":1}
 * L: the line of the write in the loop; [S,E): the region; N: its pages present in
 * /proc/self/pagemap after the writes.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */

#include <pthread.h>

#define HERE_PAGES 512
#define THERE_PAGES 256

static int here_line, there_line;

__attribute__((noinline)) void write_pages_here(volatile char *p, size_t pages,
                                                volatile char *noise, size_t per_page)
{
    for (size_t i = 0; i < pages; i++) {
        for (size_t j = 0; j < per_page; j++)
            noise[(i * per_page + j) * TRUTH_PAGE] = 3;
        here_line = __LINE__; p[i * TRUTH_PAGE] = 1;
    }
}

__attribute__((noinline)) void write_pages_there(volatile char *p, size_t pages)
{
    for (size_t i = 0; i < pages; i++) {
        there_line = __LINE__; p[i * TRUTH_PAGE] = 2;
    }
}

static void *thread_main(void *p)
{
    write_pages_there(p, THERE_PAGES);
    return NULL;
}

static void print_write(const char *function, int line, char *start, size_t pages, long present)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf,
        "{\"truth\":\"site\",\"pid\":%ld,\"name\":\"%s\",\"call\":\"write\","
        "\"file\":\"sites_touch.c\",\"line\":%d,\"start\":%lu,\"end\":%lu,"
        "\"present\":%ld,\"kept\":1}\n",
        (long)getpid(), function, line, (unsigned long)start,
        (unsigned long)(start + pages * TRUTH_PAGE), present);
    if (n < 0 || (size_t)n >= sizeof buf) {
        errno = ENOSPC;
        truth_die("site line too long");
    }
    truth_write_all(1, buf, (size_t)n);
}

static char *map_region(size_t pages)
{
    char *p = mmap(NULL, pages * TRUTH_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED)
        truth_die("mmap");
    truth_nohuge(p, pages * TRUTH_PAGE);
    return p;
}

int main(int argc, char **argv)
{
    truth_touch_stack();
    truth_touch_static();
    size_t per_page = argc > 1 ? strtoul(argv[1], NULL, 10) : 0;
    char *noise = NULL;
    if (per_page > 0) {
        noise = mmap(NULL, HERE_PAGES * per_page * TRUTH_PAGE, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (noise == MAP_FAILED)
            truth_die("mmap(MAP_SHARED)");
    }
    char *here = map_region(HERE_PAGES);
    char *there = map_region(THERE_PAGES);
    write_pages_here(here, HERE_PAGES, noise, per_page);
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, there) != 0)
        truth_die("pthread_create");
    pthread_join(t, NULL);
    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pm < 0)
        truth_die("open(/proc/self/pagemap)");
    long here_present = truth_count_present(pm, (uintptr_t)here, (uintptr_t)here + HERE_PAGES * TRUTH_PAGE);
    long there_present = truth_count_present(pm, (uintptr_t)there, (uintptr_t)there + THERE_PAGES * TRUTH_PAGE);
    close(pm);
    print_write("write_pages_here", here_line, here, HERE_PAGES, here_present);
    print_write("write_pages_there", there_line, there, THERE_PAGES, there_present);
    truth_region("here", here, HERE_PAGES);
    truth_expect("here", HERE_PAGES);
    truth_region("there", there, THERE_PAGES);
    truth_expect("there", THERE_PAGES);
    truth_finish(0);
}
