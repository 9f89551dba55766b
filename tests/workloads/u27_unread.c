/*
 * u27_unread.c - pages made resident and dropped between two reads. A thread writes the pages
 * of a fresh region one by one; once it has written an eighth of them, the main thread unmaps
 * the region while the writer goes on (until its next write faults: SIGSEGV, caught), so that
 * the pages it writes between the tracer's read at the munmap's entry and the munmap are never
 * read.
 * Then the writer writes regions where every write faults, fails (SIGSEGV, caught) and is
 * recorded: one it may only read, one it may not touch that the main thread makes writable
 * after, one of guard pages (MADV_GUARD_INSTALL) made writable before, and one of guard pages
 * put there by process_madvise, which stops no tracer; the main thread then unmaps them all.
 * Prints "writer TID", "region ADDR", "before N" and "after N" (how many pages it had written
 * when the munmap began and when it returned), "denied ADDR", "opened ADDR", "guarded ADDR" and
 * "madvised ADDR" ("(nil)" where the kernel has no guard pages), then its truth.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

#define PAGES 32768
#define DENIED_PAGES 16

static char *region;
static char *denied;
static char *opened;
static char *refused[4]; /* denied, opened, guarded, madvised: NULL where none */
static atomic_long written;
static atomic_int writer;
static sigjmp_buf back;

static void on_segv(int sig)
{
    (void)sig;
    siglongjmp(back, 1);
}

static void *write_them(void *arg)
{
    (void)arg;
    atomic_store(&writer, (int)gettid());
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0)
        truth_die("sigaction");
    volatile char *b = region;
    /* Until the region is gone. */
    if (sigsetjmp(back, 1) == 0) {
        for (long i = 0; i < PAGES; i++) {
            b[i * TRUTH_PAGE] = 1;
            atomic_store(&written, i + 1);
        }
    }
    for (volatile int i = 0; i < 4 * DENIED_PAGES; i++) {
        char *base = refused[i / DENIED_PAGES];
        if (base == NULL)
            continue;
        if (sigsetjmp(back, 1) == 0)
            *(volatile char *)(base + (i % DENIED_PAGES) * TRUTH_PAGE) = 1;
    }
    signal(SIGSEGV, SIG_DFL);
    return NULL;
}

int main(void)
{
    region = truth_mmap_anon(PAGES, PROT_READ | PROT_WRITE, 0);
    denied = truth_mmap_anon(DENIED_PAGES, PROT_READ, 0);
    opened = truth_mmap_anon(DENIED_PAGES, PROT_NONE, 0);
    refused[0] = denied;
    refused[1] = opened;
    size_t len = DENIED_PAGES * TRUTH_PAGE;
    char *guarded = truth_mmap_anon(DENIED_PAGES, PROT_NONE, 0);
    if (madvise(guarded, len, MADV_GUARD_INSTALL) == 0) {
        if (mprotect(guarded, len, PROT_READ | PROT_WRITE) != 0)
            truth_die("mprotect guarded");
        refused[2] = guarded;
    }
    char *madvised = truth_mmap_anon(DENIED_PAGES, PROT_READ | PROT_WRITE, 0);
    int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    struct iovec whole = {madvised, len};
    if (pidfd >= 0 && syscall(SYS_process_madvise, pidfd, &whole, 1, MADV_GUARD_INSTALL, 0) >= 0)
        refused[3] = madvised;
    pthread_t thread;
    if (pthread_create(&thread, NULL, write_them, NULL) != 0)
        truth_die("pthread_create");
    struct timespec pause = {0, 50 * 1000};
    while (atomic_load(&written) < PAGES / 8)
        nanosleep(&pause, NULL);
    long before = atomic_load(&written);
    if (munmap(region, PAGES * TRUTH_PAGE) != 0)
        truth_die("munmap region");
    long after = atomic_load(&written);
    pthread_join(thread, NULL);
    if (munmap(denied, DENIED_PAGES * TRUTH_PAGE) != 0)
        truth_die("munmap denied");
    if (mprotect(opened, DENIED_PAGES * TRUTH_PAGE, PROT_READ | PROT_WRITE) != 0)
        truth_die("mprotect opened");
    if (munmap(opened, DENIED_PAGES * TRUTH_PAGE) != 0)
        truth_die("munmap opened");
    if (munmap(guarded, len) != 0 || munmap(madvised, len) != 0)
        truth_die("munmap guarded");
    printf("writer %d\nregion %p\nbefore %ld\nafter %ld\ndenied %p\nopened %p\nguarded %p\n"
           "madvised %p\n",
           atomic_load(&writer), (void *)region, before, after, (void *)denied, (void *)opened,
           (void *)refused[2], (void *)refused[3]);
    fflush(stdout);
    truth_finish(0);
}
