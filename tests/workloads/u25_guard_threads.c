/*
 * u25_guard_threads.c - issue 25 (item 6, with threads): guard regions installed and removed
 * over pages other threads are faulting in.
 *
 * `u25_guard_threads ROUNDS`: 3 writer threads loop over the pages of one 256-page region,
 * each from its own start, writing a byte to each page (a first touch wherever the page is
 * gone). The main thread meanwhile, ROUNDS times, makes a 32- or 48-page part of the region a
 * guard region (`MADV_GUARD_INSTALL`, Linux 6.13), spins a moment and removes it
 * (`MADV_GUARD_REMOVE`); every third round it also drops another part with `MADV_DONTNEED`.
 * A writer that meets a guard page gets SIGSEGV, and its handler jumps back past that page.
 * Then the writers stop, and the region is reported as it is (region "region"). Before each
 * removal the main thread counts the guarded pages it finds in memory (/proc/self/pagemap):
 * none, untraced, since an install drops every page and a fault on a marker gets SIGSEGV. It
 * prints "guarded present N of M" (pages in memory of those guarded, over all rounds) and
 * "writer segv K" (the SIGSEGVs its writers took). Prints "no guard regions" and exits 0 on a
 * kernel without them; exit 0 (1 on a failed call).
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>

#define GUARD_INSTALL 102
#define GUARD_REMOVE 103
#define PAGES 256
#define WRITERS 3

static char *region;
static atomic_int stop;
static __thread sigjmp_buf skip;
static atomic_long segvs;

static void on_segv(int sig)
{
    (void)sig;
    atomic_fetch_add_explicit(&segvs, 1, memory_order_relaxed);
    /* SA_NODEFER: SIGSEGV is not blocked here, so no mask needs restoring. */
    siglongjmp(skip, 1);
}

static void *writer(void *arg)
{
    long id = (long)arg;
    /* volatile: kept across the jump back from the handler. */
    volatile size_t page = (size_t)id * (PAGES / WRITERS);
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        if (sigsetjmp(skip, 0) == 0) {
            for (;;) {
                ((volatile char *)region)[page * TRUTH_PAGE] = (char)(id + 1);
                page = (page + 1) % PAGES;
                if (page % 64 == 0)
                    break;
            }
        } else {
            /* A guard page: go on past it. */
            page = (page + 1) % PAGES;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 2000;
    region = truth_mmap_anon(PAGES, PROT_READ | PROT_WRITE, 0);
    if (madvise(region, TRUTH_PAGE, GUARD_INSTALL)) {
        if (errno == EINVAL) {
            printf("no guard regions\n");
            return 0;
        }
        truth_die("guard install");
    }
    if (madvise(region, TRUTH_PAGE, GUARD_REMOVE))
        truth_die("guard remove");

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sa.sa_flags = SA_NODEFER;
    if (sigaction(SIGSEGV, &sa, NULL))
        truth_die("sigaction");

    int pm_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pm_fd < 0)
        truth_die("open(/proc/self/pagemap)");
    long guarded = 0, guarded_present = 0;

    pthread_t th[WRITERS];
    for (long i = 0; i < WRITERS; i++) {
        int e = pthread_create(&th[i], NULL, writer, (void *)i);
        if (e != 0) {
            errno = e;
            truth_die("pthread_create");
        }
    }
    for (int round = 0; round < rounds; round++) {
        /* Alternating parts: 32 pages at one of 8 places, or 48 pages straddling two. */
        size_t first = round % 2 ? (size_t)(round / 2 % 8) * 32 : (size_t)(round / 2 % 5) * 48 + 8;
        size_t len = round % 2 ? 32 : 48;
        char *at = region + first * TRUTH_PAGE;
        if (madvise(at, len * TRUTH_PAGE, GUARD_INSTALL))
            truth_die("guard install");
        for (volatile int spin = 0; spin < 2000 + (round % 7) * 1000; spin++)
            ;
        guarded += (long)len;
        guarded_present += truth_count_present(pm_fd, (uintptr_t)at, (uintptr_t)(at + len * TRUTH_PAGE));
        if (madvise(at, len * TRUTH_PAGE, GUARD_REMOVE))
            truth_die("guard remove");
        if (round % 3 == 0) {
            size_t drop = (first + 128) % PAGES;
            size_t n = drop + 24 <= PAGES ? 24 : PAGES - drop;
            if (madvise(region + drop * TRUTH_PAGE, n * TRUTH_PAGE, MADV_DONTNEED))
                truth_die("dontneed");
        }
    }
    atomic_store(&stop, 1);
    for (long i = 0; i < WRITERS; i++)
        pthread_join(th[i], NULL);
    close(pm_fd);
    printf("guarded present %ld of %ld\n", guarded_present, guarded);
    printf("writer segv %ld\n", atomic_load(&segvs));
    fflush(stdout);
    truth_region("region", region, PAGES);
    truth_finish(0);
}
