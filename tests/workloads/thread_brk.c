/*
 * thread_brk.c - a non-main thread grows the heap with brk:
 *   sbrk(+32 pages), write 20 of them (pages 0..19),
 *   sbrk(+16 pages), write 4 pages of that second part (pages 32..35).
 * Region "heap" = [page_up(brk0), +48 pages) where brk0 = sbrk(0) read in
 * the thread right before its first sbrk (pthread_create may have used
 * malloc, which may have moved the break). Expected present: 24.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <pthread.h>

#define P TRUTH_PAGE

static char *heap_start; /* page_up(sbrk(0)) as seen by the thread */

static void *worker(void *arg)
{
    (void)arg;
    char *brk0 = sbrk(0);
    if (brk0 == (void *)-1)
        truth_die("sbrk(0)");
    char *a = sbrk((intptr_t)(32 * P));
    if (a == (void *)-1)
        truth_die("sbrk(+32 pages)");
    if (a != brk0) {
        errno = EAGAIN;
        truth_die("break moved between sbrk(0) and sbrk(+32 pages)");
    }
    char *start = (char *)truth_page_up((uintptr_t)brk0);
    char *mid = (char *)truth_page_up((uintptr_t)(brk0 + 32 * P));
    truth_nohuge(start, (size_t)(mid - start));
    truth_write_pages(start, 0, 19);
    char *b = sbrk((intptr_t)(16 * P));
    if (b == (void *)-1)
        truth_die("sbrk(+16 pages)");
    if (b != brk0 + 32 * P) {
        errno = EAGAIN;
        truth_die("break moved between the two sbrk calls");
    }
    truth_nohuge(mid, truth_page_up((uintptr_t)(brk0 + 48 * P)) - (uintptr_t)mid);
    truth_write_pages(start, 32, 35);
    heap_start = start;
    return NULL;
}

int main(void)
{
    pthread_t th;
    int e = pthread_create(&th, NULL, worker, NULL);
    if (e != 0) {
        errno = e;
        truth_die("pthread_create");
    }
    pthread_join(th, NULL);

    truth_region("heap", heap_start, 48);
    truth_expect("heap", 24);
    truth_finish(0);
}
