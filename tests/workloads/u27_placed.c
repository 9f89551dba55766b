/*
 * u27_placed.c - a page's line at its fault's time, not at the read that finds it: a thread
 * writes the 16 pages of a fresh region and exits; then the main thread maps and unmaps 8 pages
 * eight times (each a line observed after those faults), and last unmaps the written region,
 * whose pages the read at that munmap's entry is the first to find. Prints "writer TID",
 * "written ADDR" and "after ADDR" (where the first of the eight mappings was), then its truth.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <pthread.h>

#define WRITTEN_PAGES 16
#define AFTER_PAGES 8

static char *written;
static pid_t writer;

static void *write_them(void *arg)
{
    (void)arg;
    truth_write_pages(written, 0, WRITTEN_PAGES - 1);
    writer = gettid();
    return NULL;
}

int main(void)
{
    written = truth_mmap_anon(WRITTEN_PAGES, PROT_READ | PROT_WRITE, 0);
    truth_nohuge(written, WRITTEN_PAGES * TRUTH_PAGE);
    pthread_t thread;
    if (pthread_create(&thread, NULL, write_them, NULL) != 0)
        truth_die("pthread_create");
    pthread_join(thread, NULL);
    char *first = NULL;
    for (int i = 0; i < 8; i++) {
        char *after = truth_mmap_anon(AFTER_PAGES, PROT_READ | PROT_WRITE, 0);
        if (first == NULL)
            first = after;
        if (munmap(after, AFTER_PAGES * TRUTH_PAGE) != 0)
            truth_die("munmap after");
    }
    if (munmap(written, WRITTEN_PAGES * TRUTH_PAGE) != 0)
        truth_die("munmap written");
    printf("writer %ld\nwritten %p\nafter %p\n", (long)writer, (void *)written, (void *)first);
    fflush(stdout);
    truth_finish(0);
}
