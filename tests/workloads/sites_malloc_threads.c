/*
 * sites_malloc_threads.c - glibc malloc of large blocks from two named functions in two
 * threads, for `run --stacks` (issue 13).
 *
 * Thread one calls grow_in_thread_one, which mallocs 1.5 MiB and 2 MiB; thread two calls
 * grow_in_thread_two, which mallocs 4 MiB and 1 MiB. Each block is written whole and kept to
 * the end. M_MMAP_THRESHOLD is set to 128 KiB (which also stops glibc from raising it), so every
 * block is an mmap of its own; each thread first mallocs and frees a small block outside the
 * named function, so the thread's arena (its own mmap, munmap and mprotect) is made there and
 * the named functions' only layout calls are their blocks' mmaps. Neither thread ends before
 * both have written their blocks.
 *
 * Truth (besides truth_finish's), one line per block, printed once both threads are joined:
 *   {"truth":"site","pid":P,"name":FUNCTION,"call":"malloc","file":"sites_malloc_threads.c",
 *    "line":L,"first_line":F,"last_line":Z,"start":S,"end":E,"present":N,"kept":1}
 * L: the line of the malloc call; [F,Z]: the function's lines; [S,E): the block's mapping
 * (its chunk header included); N: its pages present in /proc/self/pagemap at the end.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <malloc.h>
#include <pthread.h>

#define MIB (1024UL * 1024)

struct block {
    const char *function;
    int line;
    char *start, *end;
};

static struct block blocks[4];

/* The chunk glibc mmapped for `p`: its 16-byte header, then malloc_usable_size(p) bytes. */
static void record(int slot, const char *function, int line, char *p)
{
    if (!p)
        truth_die("malloc");
    char *start = p - 2 * sizeof(size_t);
    char *end = p + malloc_usable_size(p);
    if ((uintptr_t)start % TRUTH_PAGE != 0 || (uintptr_t)end % TRUTH_PAGE != 0) {
        errno = EINVAL;
        truth_die("a large block that is not a chunk of its own");
    }
    truth_nohuge(start, (size_t)(end - start));
    memset(p, 0x5a, malloc_usable_size(p));
    blocks[slot] = (struct block){function, line, start, end};
}

static const int one_first_line = __LINE__ + 1;
__attribute__((noinline)) void grow_in_thread_one(void)
{
    char *p = malloc(3 * MIB / 2); int line = __LINE__;
    record(0, "grow_in_thread_one", line, p);
    char *q = malloc(2 * MIB); line = __LINE__;
    record(1, "grow_in_thread_one", line, q);
}
static const int one_last_line = __LINE__ - 1;

static const int two_first_line = __LINE__ + 1;
__attribute__((noinline)) void grow_in_thread_two(void)
{
    char *p = malloc(4 * MIB); int line = __LINE__;
    record(2, "grow_in_thread_two", line, p);
    char *q = malloc(1 * MIB); line = __LINE__;
    record(3, "grow_in_thread_two", line, q);
}
static const int two_last_line = __LINE__ - 1;

static void make_arena(void)
{
    /* volatile: gcc drops a malloc whose block is only freed. */
    void *volatile small = malloc(64);
    free(small);
}

/* Both threads' blocks are written before either thread ends (glibc drops the unused part of
 * an ending thread's stack): from then on every block is resident, at the process's peak too. */
static pthread_barrier_t written;

static void *thread_one(void *arg)
{
    (void)arg;
    make_arena();
    grow_in_thread_one();
    pthread_barrier_wait(&written);
    return NULL;
}

static void *thread_two(void *arg)
{
    (void)arg;
    make_arena();
    grow_in_thread_two();
    pthread_barrier_wait(&written);
    return NULL;
}

int main(void)
{
    if (mallopt(M_MMAP_THRESHOLD, 128 * 1024) != 1)
        truth_die("mallopt(M_MMAP_THRESHOLD)");
    pthread_barrier_init(&written, NULL, 2);
    pthread_t one, two;
    int e = pthread_create(&one, NULL, thread_one, NULL);
    if (e == 0)
        e = pthread_create(&two, NULL, thread_two, NULL);
    if (e != 0) {
        errno = e;
        truth_die("pthread_create");
    }
    pthread_join(one, NULL);
    pthread_join(two, NULL);

    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pm < 0)
        truth_die("open(/proc/self/pagemap)");
    for (int i = 0; i < 4; i++) {
        const struct block *b = &blocks[i];
        int first = i < 2 ? one_first_line : two_first_line;
        int last = i < 2 ? one_last_line : two_last_line;
        long present = truth_count_present(pm, (uintptr_t)b->start, (uintptr_t)b->end);
        char buf[512];
        int n = snprintf(buf, sizeof buf,
            "{\"truth\":\"site\",\"pid\":%ld,\"name\":\"%s\",\"call\":\"malloc\","
            "\"file\":\"sites_malloc_threads.c\",\"line\":%d,\"first_line\":%d,"
            "\"last_line\":%d,\"start\":%lu,\"end\":%lu,\"present\":%ld,\"kept\":1}\n",
            (long)getpid(), b->function, b->line, first, last,
            (unsigned long)b->start, (unsigned long)b->end, present);
        if (n < 0 || (size_t)n >= sizeof buf) {
            errno = ENOSPC;
            truth_die("site line too long");
        }
        truth_write_all(1, buf, (size_t)n);
        truth_region(b->function, b->start, (size_t)(b->end - b->start) / TRUTH_PAGE);
    }
    close(pm);
    truth_finish(0);
}
