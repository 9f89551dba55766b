/*
 * stress.c CASE THREADS SEED MILLIS - races the tracer's ordering cases on purpose. No truth
 * output: the tracer is checked against the kernel's page tables at its own checkpoints, so this
 * program only races hard, exits deterministically and never hangs.
 *   THREADS: worker threads, 1..256 (tests use 8..64). SEED: unsigned decimal; thread i draws
 *   sizes, offsets, pages and timing jitter (yields, short spins) from xorshift64* seeded with
 *   splitmix64(SEED ^ i) (main: i = THREADS). MILLIS: racing time; the threads start on a barrier
 *   and loop until their CLOCK_MONOTONIC deadline, checked every iteration; every thread does at
 *   least one iteration.
 * Cases ("role" = thread index mod N; with fewer threads than roles a thread rotates roles):
 *   reuse    : loop: mmap 1..16 pages (no hint), write all, then 1/2 of the time mremap it 1..16
 *              pages bigger with MREMAP_MAYMOVE (mostly moves: frees the old range for the others)
 *              and write the tail, 1/4 mmap(MAP_FIXED) a fresh subrange over it and write that;
 *              munmap.
 *   discard  : one 256-page region; even threads MADV_DONTNEED random 1..32-page subranges, odd
 *              threads write or read random single pages.
 *   layout   : 8 regions of 32 pages, each with a PROT_NONE spare; 1/4 of the threads (one at a
 *              time per region) replace a subrange (or all) with mmap(MAP_FIXED), MADV_DONTNEED
 *              it, or move it to the spare and back with MREMAP_MAYMOVE|MREMAP_FIXED (a hole
 *              meanwhile; the spare is re-reserved with MAP_FIXED_NOREPLACE); the others touch
 *              random pages, skipping (SIGSEGV + siglongjmp) those in a hole. A move spanning
 *              several VMAs fails with EFAULT when they are userfaultfd-armed (traced): tolerated,
 *              the region and its spare are then remapped whole.
 *   mremap   : 8 regions of 1..32 pages; 1/4 of the threads resize/move them: grow in place (no
 *              flags, ENOMEM tolerated), shrink, MAYMOVE grow, MAYMOVE|FIXED (resizing) onto a
 *              reserved PROT_NONE area, MAYMOVE|DONTUNMAP, MAYMOVE|FIXED|DONTUNMAP; the others
 *              touch the current range of a region or (1/4) its previous one, read as one atomic
 *              (base | pages) word, skipping faults (SIGSEGV) in holes and reserves.
 *   brk      : even threads, under a mutex, sbrk(+1..16 pages) and write the new part, or
 *              sbrk(-1..16 pages) (never below the break at the start); odd threads touch heap
 *              pages under the mutex, or without it up to 4 pages past the break they last saw
 *              (SIGSEGV skips). The break is put back at the end.
 *   fork     : workers write/read random pages of 4 regions of 64 pages (every 8th thread also
 *              MADV_DONTNEEDs 1..8 of them, so that touches keep faulting); main forks every
 *              1..4 ms; the child writes 8 and reads 4 pages of them, _exit(0); status checked.
 *   vfork    : same workers; main loops posix_spawn("/bin/true"), vfork()+execve("/bin/true"),
 *              clone(CLONE_VM|SIGCHLD) on a malloc'd stack writing 4 pages; all must exit 0.
 *   exec     : same workers; after MILLIS/2 worker 0 (not the leader) execve's /proc/self/exe
 *              exec-child THREADS SEED REMAINING_MILLIS.
 *   exec-child: THREADS/2 (at least 1) threads write/read pages of a fresh 256-page region (and
 *              MADV_DONTNEED 1..8 of them one time in 4).
 *   fixed    : one 64-page region; even threads mmap(MAP_FIXED) fresh 1..16-page subranges over
 *              it (it stays mapped: no SIGSEGV handler), odd threads write/read random pages.
 *   exits    : THREADS/2 long-lived threads work like fork's while main keeps THREADS -
 *              THREADS/2 short-lived threads going (each writes 1..32 pages of a shared region and
 *              of its own 1..32-page mmap, and returns, unmapping it half the time; main unmaps
 *              the others' later, keeping the last 64).
 *   kill     : a 4096-page region, 256 pages written, then fork: parent and child each run
 *              THREADS threads writing fresh 1..64-page mmaps and random pages of the region (and
 *              MADV_DONTNEED parts of it); the parent SIGKILLs the child after MILLIS/4 (its
 *              status must say SIGKILL) and at MILLIS raises SIGKILL while its workers fault.
 *   free     : one 256-page region; role 0 of 3 MADV_FREE, role 1 MADV_DONTNEED random 1..32-page
 *              subranges, role 2 writes/reads random pages.
 *   populate : loop: mmap(MAP_POPULATE) 1..64 pages, mmap(MAP_LOCKED) 1..4 pages (EAGAIN, ENOMEM,
 *              EPERM: skipped), touch a few pages of each, munmap; write pages of a populated
 *              256-page region; main forks a child every ~50 ms that writes 4 of them and 2 of a
 *              MAP_POPULATE mapping of its own, _exit(0).
 *   all      : every case above except kill and exec-child, in turn, MILLIS each, as
 *              /proc/self/exe children (each prints its own line); exit 0 if all exited 0.
 * Where main has work of its own (fork, vfork, exits, populate, kill) the workers run at nice 10.
 * THP is disabled (PR_SET_THP_DISABLE, inherited): no fault maps more than one page. Anonymous
 * memory only; a few MiB resident (kill: ~40 MiB at most across both processes).
 * Stdout: nothing. Stderr, at the end: "stress CASE: N iterations" (sum over threads, main's
 * forks/spawns/thread creations included; for all: the number of cases run), with
 * ", S skipped touches" appended for layout, mremap and brk (layout also counts its moves).
 * Exit: 0; kill: killed by SIGKILL; 1 on an unexpected failure (one line on stderr), a child
 * that did not exit 0 (kill: not killed by SIGKILL) or a bounded wait that ran out; 2 on bad
 * usage.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PG 4096UL
#define RW (PROT_READ | PROT_WRITE)
#define MAX_THREADS 256
#define THREAD_STACK (256 * 1024)
#define CHILD_TIMEOUT_MS 30000L /* a fork/spawn child must be reaped by then */
#define WAIT_TIMEOUT_MS 10000L  /* other bounded waits (threads' first iteration, exits) */

/* ------------------------------------------------------------------ */
/* configuration, errors, time, randomness                             */
/* ------------------------------------------------------------------ */

static const char *g_case = "?";
static int g_threads;
static unsigned long long g_seed;
static long g_millis;

/* One line "stress CASE: MSG[: errno N (TEXT)]" on stderr, then _exit(1) (whole process). */
__attribute__((format(printf, 2, 3))) static _Noreturn void die(int err, const char *fmt, ...)
{
    char msg[320], buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int k;
    if (err != 0)
        k = snprintf(buf, sizeof buf, "stress %s: %s: errno %d (%s)\n", g_case, msg, err,
                     strerror(err));
    else
        k = snprintf(buf, sizeof buf, "stress %s: %s\n", g_case, msg);
    if (k > 0)
        truth_write_all(2, buf, (size_t)k < sizeof buf ? (size_t)k : sizeof buf - 1);
    _exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t rng_init(uint64_t idx)
{
    uint64_t s = splitmix64((uint64_t)g_seed ^ idx);
    return s ? s : 0x2545f4914f6cdd1dULL;
}

/* xorshift64* */
static inline uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dULL;
}

/* uniform in [0, n), n > 0 */
static inline size_t below(uint64_t *s, size_t n)
{
    return (size_t)(((rnd(s) >> 32) * (uint64_t)n) >> 32);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

/* ------------------------------------------------------------------ */
/* memory helpers                                                      */
/* ------------------------------------------------------------------ */

static char *map_anon(size_t pages, int prot, int extra)
{
    void *p = mmap(NULL, pages * PG, prot, MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0);
    if (p == MAP_FAILED)
        die(errno, "mmap(%zu pages, flags 0x%x)", pages, extra);
    return p;
}

static void unmap(void *p, size_t pages)
{
    if (munmap(p, pages * PG) != 0)
        die(errno, "munmap(%p, %zu pages)", p, pages);
}

static void map_fixed(char *at, size_t pages)
{
    void *r = mmap(at, pages * PG, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (r != at)
        die(r == MAP_FAILED ? errno : 0, "mmap(MAP_FIXED %p, %zu pages)", (void *)at, pages);
}

static void advise(char *p, size_t pages, int advice, const char *name)
{
    if (madvise(p, pages * PG, advice) != 0)
        die(errno, "madvise(%p, %zu pages, %s)", (void *)p, pages, name);
}

/* Write / read one byte of a page (offset varies with v). Plain accesses: must be mapped. */
static inline void put(char *base, size_t page, uint64_t v)
{
    ((volatile unsigned char *)base)[page * PG + ((v >> 20) & (PG - 1))] = (unsigned char)(v | 1);
}

static inline unsigned get(const char *base, size_t page)
{
    return ((const volatile unsigned char *)base)[page * PG];
}

static void write_pages(char *base, size_t first, size_t count, uint64_t v)
{
    for (size_t i = first; i < first + count; i++)
        put(base, i, v + i);
}

/* ---- touches that may hit a hole: SIGSEGV -> siglongjmp back, the page is skipped ---- */

static _Thread_local sigjmp_buf tl_jb;
static _Thread_local volatile sig_atomic_t tl_touching;
static struct sigaction g_dfl_action; /* zero: SIG_DFL */

static void segv_handler(int sig)
{
    if (tl_touching) {
        tl_touching = 0;
        siglongjmp(tl_jb, 1); /* SA_NODEFER: SIGSEGV was never blocked, no mask to restore */
    }
    /* a fault outside a skippable touch is a real bug: re-fault with the default action */
    sigaction(sig, &g_dfl_action, NULL);
}

static void install_skip_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = segv_handler;
    sa.sa_flags = SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0)
        die(errno, "sigaction(SIGSEGV)");
}

/* Returns 1 if the access happened, 0 if it faulted (page skipped). */
__attribute__((noinline)) static int touch(volatile unsigned char *p, int write, unsigned char v)
{
    if (sigsetjmp(tl_jb, 0) != 0)
        return 0;
    tl_touching = 1;
    if (write)
        *p = v;
    else
        (void)*p;
    tl_touching = 0;
    return 1;
}

/* ------------------------------------------------------------------ */
/* threads                                                             */
/* ------------------------------------------------------------------ */

struct wstate {
    pthread_t th;
    int idx;
    uint64_t rng;
    uint64_t deadline;
    long iters; /* __atomic relaxed: main reads it in `kill` and `exec` */
    long skips;
    void (*fn)(struct wstate *);
} __attribute__((aligned(64)));

static struct wstate g_ws[MAX_THREADS + 1]; /* [g_threads or n] = main */
static pthread_barrier_t g_barrier;
static uint64_t g_extra_ns; /* added to the workers' deadline (kill: they outlive main's) */
/* main runs it after creating the workers, before the barrier */
static void (*g_before_start)(void);
static int g_worker_nice; /* cases where main has work of its own: niced workers leave it CPU */

static uint64_t millis_ns(long ms)
{
    return (uint64_t)ms * 1000000ULL;
}

/* Count one iteration; 1 while the deadline has not passed. */
static int more(struct wstate *w)
{
    __atomic_store_n(&w->iters, w->iters + 1, __ATOMIC_RELAXED);
    return now_ns() < w->deadline;
}

static void jitter(struct wstate *w)
{
    uint64_t r = rnd(&w->rng);
    if ((r & 31) == 0) {
        sched_yield();
    } else if ((r & 7) == 0) {
        unsigned n = (unsigned)(r >> 40) & 511;
        for (unsigned i = 0; i < n; i++)
            cpu_relax();
    }
}

/* Which of `nroles` roles thread w plays in its current iteration. */
static unsigned role(const struct wstate *w, unsigned nroles, int nthreads)
{
    if (nthreads >= (int)nroles)
        return (unsigned)w->idx % nroles;
    return (unsigned)(w->idx + w->iters) % nroles;
}

static void barrier_wait(void)
{
    int e = pthread_barrier_wait(&g_barrier);
    if (e != 0 && e != PTHREAD_BARRIER_SERIAL_THREAD)
        die(e, "pthread_barrier_wait");
}

static void *thread_main(void *arg)
{
    struct wstate *w = arg;
    if (g_worker_nice)
        (void)setpriority(PRIO_PROCESS, (id_t)gettid(), g_worker_nice);
    barrier_wait();
    w->deadline = now_ns() + millis_ns(g_millis) + g_extra_ns;
    w->fn(w);
    return NULL;
}

static void attr_init(pthread_attr_t *attr)
{
    int e = pthread_attr_init(attr);
    if (e == 0)
        e = pthread_attr_setstacksize(attr, THREAD_STACK);
    if (e != 0)
        die(e, "pthread_attr");
}

/* Wait (bounded) until every worker in [0, n) has done an iteration. */
static void wait_first_iterations(int n)
{
    uint64_t end = now_ns() + millis_ns(WAIT_TIMEOUT_MS);
    for (int i = 0; i < n; i++) {
        while (__atomic_load_n(&g_ws[i].iters, __ATOMIC_RELAXED) == 0) {
            if (now_ns() > end)
                die(0, "thread %d did no iteration within %ld ms", i, WAIT_TIMEOUT_MS);
            sleep_ns(100000);
        }
    }
}

/*
 * Start n workers running fn, all released together by a barrier that main joins too; main then
 * runs mainfn (if any) as "thread" n, joins the workers and returns the summed iterations.
 */
static long run_workers(int n, void (*fn)(struct wstate *), void (*mainfn)(struct wstate *),
                        long *skips)
{
    pthread_attr_t attr;
    attr_init(&attr);
    int e = pthread_barrier_init(&g_barrier, NULL, (unsigned)n + 1);
    if (e != 0)
        die(e, "pthread_barrier_init");
    for (int i = 0; i < n; i++) {
        struct wstate *w = &g_ws[i];
        w->idx = i;
        w->rng = rng_init((uint64_t)i);
        w->fn = fn;
        e = pthread_create(&w->th, &attr, thread_main, w);
        if (e != 0)
            die(e, "pthread_create (thread %d)", i);
    }
    struct wstate *m = &g_ws[n];
    m->idx = n;
    m->rng = rng_init((uint64_t)n);
    if (g_before_start)
        g_before_start();
    barrier_wait();
    m->deadline = now_ns() + millis_ns(g_millis);
    if (mainfn)
        mainfn(m);
    long sum = 0, sk = 0;
    for (int i = 0; i < n; i++) {
        e = pthread_join(g_ws[i].th, NULL);
        if (e != 0)
            die(e, "pthread_join");
        if (g_ws[i].iters <= 0)
            die(0, "thread %d did no iteration", i);
        sum += g_ws[i].iters;
        sk += g_ws[i].skips;
    }
    sum += m->iters;
    sk += m->skips;
    pthread_barrier_destroy(&g_barrier);
    pthread_attr_destroy(&attr);
    if (skips)
        *skips = sk;
    return sum;
}

static void report(long iters, long skips, int with_skips, const char *extra)
{
    char buf[256];
    int k;
    if (with_skips)
        k = snprintf(buf, sizeof buf, "stress %s: %ld iterations, %ld skipped touches%s\n", g_case,
                     iters, skips, extra);
    else
        k = snprintf(buf, sizeof buf, "stress %s: %ld iterations%s\n", g_case, iters, extra);
    if (k > 0)
        truth_write_all(2, buf, (size_t)k < sizeof buf ? (size_t)k : sizeof buf - 1);
}

/* ---- children ---- */

/* waitpid with a time bound (polling); returns the status. On timeout: SIGKILL it, exit 1. */
static int wait_child(pid_t pid, int flags, long timeout_ms, const char *what)
{
    uint64_t end = now_ns() + millis_ns(timeout_ms);
    uint64_t nap = 20000;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG | flags);
        if (r == pid)
            return st;
        if (r < 0 && errno != EINTR)
            die(errno, "waitpid(%s %d)", what, (int)pid);
        if (now_ns() > end) {
            kill(pid, SIGKILL);
            die(0, "%s %d did not finish within %ld ms", what, (int)pid, timeout_ms);
        }
        sleep_ns(nap);
        if (nap < 1000000)
            nap *= 2;
    }
}

static void expect_exit0(int st, pid_t pid, const char *what)
{
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (WIFSIGNALED(st))
            die(0, "%s %d killed by signal %d", what, (int)pid, WTERMSIG(st));
        die(0, "%s %d exited with %d", what, (int)pid, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
}

/* Sleep lo..hi µs, but not past the deadline. */
static void nap_until(struct wstate *w, unsigned lo_us, unsigned hi_us)
{
    uint64_t d = (uint64_t)lo_us * 1000 + below(&w->rng, (size_t)(hi_us - lo_us + 1)) * 1000;
    uint64_t t = now_ns();
    if (t >= w->deadline)
        return;
    if (t + d > w->deadline)
        d = w->deadline - t;
    sleep_ns(d);
}

/* ------------------------------------------------------------------ */
/* shared regions used by several cases                                */
/* ------------------------------------------------------------------ */

#define NSREG 4
#define SREG_PAGES 64
static char *g_sreg[NSREG];

static char *g_region; /* discard, fixed, free, populate, exec-child, kill */
static size_t g_region_pages;

static void make_sregs(void)
{
    for (int i = 0; i < NSREG; i++) {
        g_sreg[i] = map_anon(SREG_PAGES, RW, 0);
        write_pages(g_sreg[i], 0, SREG_PAGES / 4, (uint64_t)i);
    }
}

/*
 * Write 6 and read 2 random pages of the shared regions. Every 8th thread, every other time, first
 * MADV_DONTNEED 1..8 pages of one, so that the touches keep faulting. (Not every thread: lock
 * holders preempted among 64 runnable threads would hold fork() up for tens of ms.)
 */
static void fault_sregs(struct wstate *w)
{
    if (w->idx % 8 == 0 && (rnd(&w->rng) & 1) == 0) {
        uint64_t r = rnd(&w->rng);
        size_t off = (size_t)(r >> 8) % SREG_PAGES, len = 1 + (size_t)(r >> 16) % 8;
        if (off + len > SREG_PAGES)
            len = SREG_PAGES - off;
        advise(g_sreg[r % NSREG] + off * PG, len, MADV_DONTNEED, "MADV_DONTNEED");
    }
    for (int i = 0; i < 8; i++) {
        uint64_t r = rnd(&w->rng);
        char *b = g_sreg[r % NSREG];
        size_t p = (size_t)(r >> 8) % SREG_PAGES;
        if (i < 6)
            put(b, p, r);
        else
            (void)get(b, p);
    }
}

static void w_sregs(struct wstate *w)
{
    do {
        fault_sregs(w);
        jitter(w);
    } while (more(w));
}

/* ------------------------------------------------------------------ */
/* 1. reuse                                                            */
/* ------------------------------------------------------------------ */

static void w_reuse(struct wstate *w)
{
    do {
        uint64_t r = rnd(&w->rng);
        size_t n = 1 + r % 16;
        char *p = map_anon(n, RW, 0);
        write_pages(p, 0, n, r);
        jitter(w);
        switch ((r >> 8) % 4) {
        case 0:
        case 1: { /* grow with MAYMOVE: usually moves, freeing [p, p+n) for the others */
            size_t m = n + 1 + (size_t)(r >> 12) % 16;
            char *q = mremap(p, n * PG, m * PG, MREMAP_MAYMOVE);
            if (q == MAP_FAILED)
                die(errno, "mremap(%zu -> %zu pages, MAYMOVE)", n, m);
            write_pages(q, n, m - n, r);
            put(q, 0, r);
            jitter(w);
            unmap(q, m);
            break;
        }
        case 2: { /* MAP_FIXED over a subrange of our own fresh mapping */
            size_t off = (size_t)(r >> 12) % n;
            size_t k = 1 + (size_t)(r >> 20) % (n - off);
            map_fixed(p + off * PG, k);
            write_pages(p, off, k, r);
            jitter(w);
            unmap(p, n);
            break;
        }
        default:
            unmap(p, n);
        }
    } while (more(w));
}

/* ------------------------------------------------------------------ */
/* 2. discard / 9. fixed / 12. free                                    */
/* ------------------------------------------------------------------ */

static void random_range(struct wstate *w, size_t total, size_t maxlen, size_t *off, size_t *len)
{
    *off = below(&w->rng, total);
    *len = 1 + below(&w->rng, maxlen);
    if (*off + *len > total)
        *len = total - *off;
}

/* 4 single-page writes or reads of g_region */
static void touch_region(struct wstate *w)
{
    for (int i = 0; i < 4; i++) {
        uint64_t r = rnd(&w->rng);
        size_t p = (size_t)(r >> 8) % g_region_pages;
        if (r & 1)
            put(g_region, p, r);
        else
            (void)get(g_region, p);
    }
}

static void w_discard(struct wstate *w)
{
    do {
        if (role(w, 2, g_threads) == 0) {
            size_t off, len;
            random_range(w, g_region_pages, 32, &off, &len);
            advise(g_region + off * PG, len, MADV_DONTNEED, "MADV_DONTNEED");
        } else {
            touch_region(w);
        }
        jitter(w);
    } while (more(w));
}

static void w_fixed(struct wstate *w)
{
    do {
        if (role(w, 2, g_threads) == 0) {
            size_t off, len;
            random_range(w, g_region_pages, 16, &off, &len);
            map_fixed(g_region + off * PG, len);
            if (rnd(&w->rng) & 1)
                put(g_region, off, w->rng);
        } else {
            touch_region(w);
        }
        jitter(w);
    } while (more(w));
}

static void w_free(struct wstate *w)
{
    do {
        unsigned ro = role(w, 3, g_threads);
        if (ro < 2) {
            size_t off, len;
            random_range(w, g_region_pages, 32, &off, &len);
            if (ro == 0)
                advise(g_region + off * PG, len, MADV_FREE, "MADV_FREE");
            else
                advise(g_region + off * PG, len, MADV_DONTNEED, "MADV_DONTNEED");
        } else {
            touch_region(w);
        }
        jitter(w);
    } while (more(w));
}

/* ------------------------------------------------------------------ */
/* 3. layout                                                           */
/* ------------------------------------------------------------------ */

#define LREGS 8
#define LPAGES 32

struct lreg {
    char *base;  /* constant: the region is always put back here */
    char *spare; /* LPAGES pages, PROT_NONE, only our moves use it */
    int lock;    /* changers' try-lock */
    int spare_lost;
};
static struct lreg g_lreg[LREGS];

static int try_lock(int *l)
{
    return __atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE) == 0;
}

static void unlock(int *l)
{
    __atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

static void setup_layout(void)
{
    for (int i = 0; i < LREGS; i++) {
        g_lreg[i].base = map_anon(LPAGES, RW, 0);
        write_pages(g_lreg[i].base, 0, LPAGES, (uint64_t)i);
        g_lreg[i].spare = map_anon(LPAGES, PROT_NONE, MAP_NORESERVE);
    }
}

/* Give the touchers a window on the hole. */
static void hole_window(struct wstate *w)
{
    uint64_t r = rnd(&w->rng);
    if (r & 1) {
        sched_yield();
    } else {
        unsigned n = 64 + ((unsigned)(r >> 40) & 2047);
        for (unsigned i = 0; i < n; i++)
            cpu_relax();
    }
}

static long g_layout_moves, g_layout_refused; /* atomic */

/*
 * A move of several VMAs at once fails with EFAULT when one of them is userfaultfd-armed (a
 * tracer's): partial MAP_FIXED replacements split a region into VMAs that need not merge back.
 * Whatever part moved, put both sides back in shape, each one fresh VMA: the region mapped (its
 * data lost), the spare reserved.
 */
static void layout_refused(struct lreg *L)
{
    __atomic_add_fetch(&g_layout_refused, 1, __ATOMIC_RELAXED);
    map_fixed(L->base, LPAGES);
    void *q = mmap(L->spare, LPAGES * PG, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (q != L->spare)
        die(q == MAP_FAILED ? errno : 0, "mmap(MAP_FIXED) of the spare");
}

static void layout_change(struct wstate *w)
{
    uint64_t r = rnd(&w->rng);
    struct lreg *L = &g_lreg[r % LREGS];
    if (!try_lock(&L->lock))
        return;
    size_t off = 0, k = LPAGES;
    if ((r >> 8) % 4 != 0)
        random_range(w, LPAGES, LPAGES, &off, &k);
    char *src = L->base + off * PG;
    switch ((r >> 16) % 3) {
    case 0: /* replace with a fresh mapping of the same size */
        map_fixed(src, k);
        if (r & (1 << 24))
            write_pages(src, 0, k < 4 ? k : 4, r);
        break;
    case 1:
        advise(src, k, MADV_DONTNEED, "MADV_DONTNEED");
        break;
    default: { /* away to the spare and back: a hole at src meanwhile */
        if (L->spare_lost) {
            advise(src, k, MADV_DONTNEED, "MADV_DONTNEED");
            break;
        }
        char *dst = L->spare + off * PG;
        void *q = mremap(src, k * PG, k * PG, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
        if (q == MAP_FAILED && errno == EFAULT) {
            layout_refused(L);
            break;
        }
        if (q != dst)
            die(q == MAP_FAILED ? errno : 0, "mremap(%zu pages, MAYMOVE|FIXED) to the spare", k);
        put(dst, 0, r);
        hole_window(w);
        q = mremap(dst, k * PG, k * PG, MREMAP_MAYMOVE | MREMAP_FIXED, src);
        if (q == MAP_FAILED && errno == EFAULT) {
            layout_refused(L);
            break;
        }
        if (q != src)
            die(q == MAP_FAILED ? errno : 0, "mremap(%zu pages, MAYMOVE|FIXED) back", k);
        __atomic_add_fetch(&g_layout_moves, 1, __ATOMIC_RELAXED);
        /* re-reserve the spare part without clobbering anything that landed there */
        q = mmap(dst, k * PG, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (q == MAP_FAILED) {
            if (errno != EEXIST)
                die(errno, "mmap(MAP_FIXED_NOREPLACE) of the spare");
            L->spare_lost = 1;
        } else if (q != dst) {
            die(0, "mmap(MAP_FIXED_NOREPLACE) of the spare placed elsewhere");
        }
        break;
    }
    }
    unlock(&L->lock);
}

static void w_layout(struct wstate *w)
{
    do {
        if (role(w, 4, g_threads) == 0) {
            layout_change(w);
        } else {
            for (int i = 0; i < 4; i++) {
                uint64_t r = rnd(&w->rng);
                char *b = g_lreg[r % LREGS].base;
                size_t p = (size_t)(r >> 8) % LPAGES;
                if (!touch((volatile unsigned char *)b + p * PG, (int)(r >> 20) & 1,
                           (unsigned char)(r >> 32)))
                    w->skips++;
            }
        }
        jitter(w);
    } while (more(w));
}

/* ------------------------------------------------------------------ */
/* 4. mremap                                                           */
/* ------------------------------------------------------------------ */

#define MREGS 8
#define MPAGES 32 /* a region is 1..MPAGES pages */

/* (base | pages) in one word, so a toucher never pairs a base with another range's size */
static inline uint64_t pack(char *b, size_t n)
{
    return (uint64_t)(uintptr_t)b | (uint64_t)n;
}
static inline char *pk_base(uint64_t v)
{
    return (char *)(uintptr_t)(v & ~(uint64_t)(PG - 1));
}
static inline size_t pk_pages(uint64_t v)
{
    return (size_t)(v & (PG - 1));
}

struct mreg {
    uint64_t cur; /* packed, atomic: where the region is */
    uint64_t old; /* packed, atomic: where it was (0: nowhere) */
    int old_owned; /* old is still mapped by us (DONTUNMAP) and must be unmapped later */
    char *reserve; /* MPAGES pages PROT_NONE, a MREMAP_FIXED target only we use */
    int lock;
};
static struct mreg g_mreg[MREGS];

static void setup_mremap(void)
{
    uint64_t s = rng_init(~0ULL);
    for (int i = 0; i < MREGS; i++) {
        size_t n = 8 + below(&s, MPAGES - 8 + 1);
        char *b = map_anon(n, RW, 0);
        write_pages(b, 0, n, (uint64_t)i);
        g_mreg[i].cur = pack(b, n);
        g_mreg[i].reserve = map_anon(MPAGES, PROT_NONE, MAP_NORESERVE);
    }
}

static void set_old(struct mreg *M, char *b, size_t n, int owned)
{
    uint64_t prev = M->old;
    __atomic_store_n(&M->old, n ? pack(b, n) : 0, __ATOMIC_RELEASE);
    if (M->old_owned && prev)
        unmap(pk_base(prev), pk_pages(prev));
    M->old_owned = owned;
}

/* cur moved onto the reserve (m pages used): trim the rest, take a new reserve */
static void reserve_used(struct mreg *M, size_t m)
{
    if (m < MPAGES)
        unmap(M->reserve + m * PG, MPAGES - m);
    M->reserve = map_anon(MPAGES, PROT_NONE, MAP_NORESERVE);
}

static void mremap_change(struct wstate *w)
{
    uint64_t r = rnd(&w->rng);
    struct mreg *M = &g_mreg[r % MREGS];
    if (!try_lock(&M->lock))
        return;
    uint64_t cur = M->cur;
    char *b = pk_base(cur), *q;
    size_t n = pk_pages(cur), m;
    switch ((r >> 8) % 6) {
    case 0: /* grow in place, no flags */
        if (n == MPAGES)
            break;
        m = n + 1 + below(&w->rng, MPAGES - n);
        q = mremap(b, n * PG, m * PG, 0);
        if (q == MAP_FAILED) {
            if (errno != ENOMEM)
                die(errno, "mremap(%zu -> %zu pages, in place)", n, m);
            break;
        }
        if (q != b)
            die(0, "mremap without MAYMOVE moved the region");
        __atomic_store_n(&M->cur, pack(b, m), __ATOMIC_RELEASE);
        write_pages(b, n, m - n, r);
        break;
    case 1: /* shrink in place */
        if (n == 1)
            break;
        m = 1 + below(&w->rng, n - 1);
        q = mremap(b, n * PG, m * PG, 0);
        if (q != b)
            die(q == MAP_FAILED ? errno : 0, "mremap(%zu -> %zu pages, shrink)", n, m);
        __atomic_store_n(&M->cur, pack(b, m), __ATOMIC_RELEASE);
        set_old(M, b + m * PG, n - m, 0);
        break;
    case 2: /* grow, may move */
        m = n + below(&w->rng, MPAGES - n + 1);
        q = mremap(b, n * PG, m * PG, MREMAP_MAYMOVE);
        if (q == MAP_FAILED)
            die(errno, "mremap(%zu -> %zu pages, MAYMOVE)", n, m);
        __atomic_store_n(&M->cur, pack(q, m), __ATOMIC_RELEASE);
        if (q != b)
            set_old(M, b, n, 0);
        write_pages(q, n, m - n, r);
        put(q, 0, r);
        break;
    case 3: /* move (and resize) onto the reserve */
        m = 1 + below(&w->rng, MPAGES);
        q = mremap(b, n * PG, m * PG, MREMAP_MAYMOVE | MREMAP_FIXED, M->reserve);
        if (q != M->reserve)
            die(q == MAP_FAILED ? errno : 0, "mremap(%zu -> %zu pages, MAYMOVE|FIXED)", n, m);
        __atomic_store_n(&M->cur, pack(q, m), __ATOMIC_RELEASE);
        set_old(M, b, n, 0);
        reserve_used(M, m);
        if (m > n)
            write_pages(q, n, m - n, r);
        break;
    case 4: /* move, keeping the old range mapped (and empty) */
        q = mremap(b, n * PG, n * PG, MREMAP_MAYMOVE | MREMAP_DONTUNMAP);
        if (q == MAP_FAILED)
            die(errno, "mremap(%zu pages, MAYMOVE|DONTUNMAP)", n);
        __atomic_store_n(&M->cur, pack(q, n), __ATOMIC_RELEASE);
        set_old(M, b, n, 1);
        put(q, below(&w->rng, n), r);
        put(b, below(&w->rng, n), r); /* a fresh zero page in the old range */
        break;
    default: /* DONTUNMAP onto the reserve */
        q = mremap(b, n * PG, n * PG, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
                   M->reserve);
        if (q != M->reserve)
            die(q == MAP_FAILED ? errno : 0, "mremap(%zu pages, MAYMOVE|FIXED|DONTUNMAP)", n);
        __atomic_store_n(&M->cur, pack(q, n), __ATOMIC_RELEASE);
        set_old(M, b, n, 1);
        reserve_used(M, n);
        put(q, below(&w->rng, n), r);
        break;
    }
    unlock(&M->lock);
}

static void w_mremap(struct wstate *w)
{
    do {
        if (role(w, 4, g_threads) == 0) {
            mremap_change(w);
        } else {
            for (int i = 0; i < 4; i++) {
                uint64_t r = rnd(&w->rng);
                struct mreg *M = &g_mreg[r % MREGS];
                uint64_t v = __atomic_load_n((r >> 8) % 4 == 0 ? &M->old : &M->cur,
                                             __ATOMIC_ACQUIRE);
                size_t n = pk_pages(v);
                if (n == 0)
                    continue;
                size_t p = (size_t)(r >> 12) % n;
                if (!touch((volatile unsigned char *)pk_base(v) + p * PG, (int)(r >> 20) & 1,
                           (unsigned char)(r >> 32)))
                    w->skips++;
            }
        }
        jitter(w);
    } while (more(w));
}

/* ------------------------------------------------------------------ */
/* 5. brk                                                              */
/* ------------------------------------------------------------------ */

#define HEAP_INIT 64
#define HEAP_MAX 1024
static pthread_mutex_t g_brk_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_brk0;      /* break at the start */
static char *g_heap;      /* page_up(g_brk0): our pages start here */
static size_t g_heap_pages; /* atomic; changed under g_brk_mu */

/* After the threads exist (pthread_create may malloc), before they run. */
static void setup_brk(void)
{
    g_brk0 = sbrk(0);
    if (g_brk0 == (void *)-1)
        die(errno, "sbrk(0)");
    uintptr_t up = ((uintptr_t)g_brk0 + PG - 1) & ~(uintptr_t)(PG - 1);
    if (sbrk((intptr_t)(up - (uintptr_t)g_brk0 + HEAP_INIT * PG)) == (void *)-1)
        die(errno, "sbrk(+%d pages)", HEAP_INIT);
    g_heap = (char *)up;
    write_pages(g_heap, 0, HEAP_INIT, 7);
    g_heap_pages = HEAP_INIT;
}

static void brk_change(struct wstate *w)
{
    uint64_t r = rnd(&w->rng);
    size_t k = 1 + (size_t)(r >> 8) % 16;
    pthread_mutex_lock(&g_brk_mu);
    size_t cur = g_heap_pages;
    if ((r & 1) || cur == 0) {
        if (cur + k > HEAP_MAX)
            k = HEAP_MAX - cur;
        if (k > 0) {
            char *o = sbrk((intptr_t)(k * PG));
            if (o == (void *)-1) {
                if (errno != ENOMEM)
                    die(errno, "sbrk(+%zu pages)", k);
            } else {
                if (o != g_heap + cur * PG)
                    die(0, "the break moved behind our back (%p, expected %p)", (void *)o,
                        (void *)(g_heap + cur * PG));
                write_pages(g_heap, cur, k, r);
                __atomic_store_n(&g_heap_pages, cur + k, __ATOMIC_RELEASE);
            }
        }
    } else {
        if (k > cur)
            k = cur;
        __atomic_store_n(&g_heap_pages, cur - k, __ATOMIC_RELEASE);
        if (sbrk(-(intptr_t)(k * PG)) == (void *)-1)
            die(errno, "sbrk(-%zu pages)", k);
    }
    cur = g_heap_pages;
    for (int i = 0; i < 2 && cur > 0; i++)
        put(g_heap, below(&w->rng, cur), r);
    pthread_mutex_unlock(&g_brk_mu);
}

static void w_brk(struct wstate *w)
{
    do {
        if (role(w, 2, g_threads) == 0) {
            brk_change(w);
        } else if (rnd(&w->rng) & 1) {
            pthread_mutex_lock(&g_brk_mu);
            size_t n = g_heap_pages;
            for (int i = 0; i < 4 && n > 0; i++) {
                uint64_t r = rnd(&w->rng);
                if (r & 1)
                    put(g_heap, (size_t)(r >> 8) % n, r);
                else
                    (void)get(g_heap, (size_t)(r >> 8) % n);
            }
            pthread_mutex_unlock(&g_brk_mu);
        } else {
            for (int i = 0; i < 4; i++) {
                size_t n = __atomic_load_n(&g_heap_pages, __ATOMIC_ACQUIRE);
                uint64_t r = rnd(&w->rng);
                size_t p = (size_t)(r >> 8) % (n + 4); /* up to 4 pages past the break */
                if (!touch((volatile unsigned char *)g_heap + p * PG, (int)(r >> 20) & 1,
                           (unsigned char)(r >> 32)))
                    w->skips++;
            }
        }
        jitter(w);
    } while (more(w));
}

/* ------------------------------------------------------------------ */
/* 6. fork                                                             */
/* ------------------------------------------------------------------ */

static void m_fork(struct wstate *w)
{
    do {
        pid_t pid = fork();
        if (pid < 0)
            die(errno, "fork");
        if (pid == 0) { /* only memory accesses and _exit in the child */
            for (int i = 0; i < 12; i++) {
                uint64_t r = rnd(&w->rng);
                char *b = g_sreg[r % NSREG];
                size_t p = (size_t)(r >> 8) % SREG_PAGES;
                if (i < 8)
                    put(b, p, r);
                else
                    (void)get(b, p);
            }
            _exit(0);
        }
        expect_exit0(wait_child(pid, 0, CHILD_TIMEOUT_MS, "fork child"), pid, "fork child");
        nap_until(w, 1000, 4000);
    } while (more(w));
}

/* ------------------------------------------------------------------ */
/* 7. vfork                                                            */
/* ------------------------------------------------------------------ */

#define TRUE_PATH "/bin/true"
#define CLONE_STACK (64 * 1024)

struct clone_arg {
    char *region;
    uint64_t seed;
};

/* Runs on its own stack in our address space: memory accesses only. */
static int clone_child(void *arg)
{
    struct clone_arg *a = arg;
    uint64_t s = a->seed;
    for (int i = 0; i < 4; i++) {
        uint64_t r = rnd(&s);
        put(a->region, (size_t)(r >> 8) % SREG_PAGES, r);
    }
    return 0;
}

__attribute__((noinline)) static pid_t vfork_exec(char *const argv[])
{
    pid_t pid = vfork();
    if (pid == 0) {
        execve(TRUE_PATH, argv, environ);
        _exit(127);
    }
    return pid;
}

static char *g_clone_stack;

static void m_vfork(struct wstate *w)
{
    char *argv[] = {"true", NULL};
    do {
        pid_t pid;
        int e = posix_spawn(&pid, TRUE_PATH, NULL, NULL, argv, environ);
        if (e != 0)
            die(e, "posix_spawn(%s)", TRUE_PATH);
        expect_exit0(wait_child(pid, 0, CHILD_TIMEOUT_MS, "posix_spawn child"), pid,
                     "posix_spawn child");
        fault_sregs(w);

        pid = vfork_exec(argv);
        if (pid < 0)
            die(errno, "vfork");
        expect_exit0(wait_child(pid, 0, CHILD_TIMEOUT_MS, "vfork child"), pid, "vfork child");
        fault_sregs(w);

        uint64_t r = rnd(&w->rng);
        struct clone_arg ca = {g_sreg[r % NSREG], r};
        pid = clone(clone_child, g_clone_stack + CLONE_STACK, CLONE_VM | SIGCHLD, &ca);
        if (pid < 0)
            die(errno, "clone(CLONE_VM)");
        expect_exit0(wait_child(pid, __WALL, CHILD_TIMEOUT_MS, "clone(CLONE_VM) child"), pid,
                     "clone(CLONE_VM) child");
    } while (more(w));
}

/* ------------------------------------------------------------------ */
/* 8. exec / exec-child                                                */
/* ------------------------------------------------------------------ */

static void w_exec(struct wstate *w)
{
    if (w->idx != 0) {
        w_sregs(w);
        return;
    }
    uint64_t exec_at = w->deadline - millis_ns(g_millis - g_millis / 2);
    do {
        fault_sregs(w);
        jitter(w);
        __atomic_store_n(&w->iters, w->iters + 1, __ATOMIC_RELAXED);
    } while (now_ns() < exec_at);
    wait_first_iterations(g_threads);

    uint64_t t = now_ns();
    long remaining = t < w->deadline ? (long)((w->deadline - t) / 1000000ULL) : 0;
    static char threads_s[24], seed_s[24], millis_s[24];
    snprintf(threads_s, sizeof threads_s, "%d", g_threads);
    snprintf(seed_s, sizeof seed_s, "%llu", g_seed);
    snprintf(millis_s, sizeof millis_s, "%ld", remaining);
    char *argv[] = {"stress", "exec-child", threads_s, seed_s, millis_s, NULL};
    execve("/proc/self/exe", argv, environ);
    die(errno, "execve(/proc/self/exe exec-child) from thread %d", w->idx);
}

static void w_exec_child(struct wstate *w)
{
    do {
        if ((rnd(&w->rng) & 3) == 0) {
            size_t off, len;
            random_range(w, g_region_pages, 8, &off, &len);
            advise(g_region + off * PG, len, MADV_DONTNEED, "MADV_DONTNEED");
        }
        for (int i = 0; i < 8; i++) {
            uint64_t r = rnd(&w->rng);
            size_t p = (size_t)(r >> 8) % g_region_pages;
            if (i < 6)
                put(g_region, p, r);
            else
                (void)get(g_region, p);
        }
        jitter(w);
    } while (more(w));
}

/* ------------------------------------------------------------------ */
/* 10. exits                                                           */
/* ------------------------------------------------------------------ */

#define LEFTOVERS 64

struct shortslot {
    pthread_t th;
    int used;
    int done; /* atomic */
    uint64_t seed;
    char *left; /* the thread's mapping if it returned without unmapping it */
    size_t left_pages;
};

static void *short_thread(void *arg)
{
    struct shortslot *s = arg;
    uint64_t r = rnd(&s->seed);
    char *b = g_sreg[r % NSREG];
    size_t n = 1 + (size_t)(r >> 8) % 32;
    size_t off = (size_t)(r >> 16) % (SREG_PAGES - n + 1);
    write_pages(b, off, n, r);
    size_t m = 1 + (size_t)(r >> 24) % 32;
    char *p = map_anon(m, RW, 0);
    write_pages(p, 0, m, r);
    if (r & (1ULL << 40)) {
        unmap(p, m);
        s->left = NULL;
        s->left_pages = 0;
    } else {
        s->left = p;
        s->left_pages = m;
    }
    __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void m_exits(struct wstate *w)
{
    int nshort = g_threads - g_threads / 2;
    struct shortslot slots[MAX_THREADS];
    char *left[LEFTOVERS];
    size_t left_pages[LEFTOVERS];
    int nleft = 0, next_left = 0;
    memset(slots, 0, sizeof slots);
    memset(left, 0, sizeof left);
    memset(left_pages, 0, sizeof left_pages);
    pthread_attr_t attr;
    attr_init(&attr);
    uint64_t end_ns = 0;
    int stopping = 0;

    for (;;) {
        int busy = 0, progress = 0;
        for (int i = 0; i < nshort; i++) {
            struct shortslot *s = &slots[i];
            if (s->used && __atomic_load_n(&s->done, __ATOMIC_ACQUIRE)) {
                int e = pthread_join(s->th, NULL);
                if (e != 0)
                    die(e, "pthread_join (short-lived)");
                s->used = 0;
                progress = 1;
                if (s->left) { /* keep it alive a while after its thread is gone */
                    if (left[next_left])
                        unmap(left[next_left], left_pages[next_left]);
                    else
                        nleft++;
                    left[next_left] = s->left;
                    left_pages[next_left] = s->left_pages;
                    next_left = (next_left + 1) % LEFTOVERS;
                }
            }
            if (!s->used && !stopping) {
                s->done = 0;
                s->seed = rnd(&w->rng) | 1;
                int e = pthread_create(&s->th, &attr, short_thread, s);
                if (e == EAGAIN)
                    continue;
                if (e != 0)
                    die(e, "pthread_create (short-lived)");
                s->used = 1;
                progress = 1;
                __atomic_store_n(&w->iters, w->iters + 1, __ATOMIC_RELAXED);
            }
            busy += s->used;
        }
        if (!stopping && now_ns() >= w->deadline && w->iters > 0) {
            stopping = 1;
            end_ns = now_ns() + millis_ns(WAIT_TIMEOUT_MS);
        }
        if (stopping && busy == 0)
            break;
        if (stopping && now_ns() > end_ns)
            die(0, "short-lived threads still running %ld ms after the deadline", WAIT_TIMEOUT_MS);
        if (!progress)
            sleep_ns(20000);
    }
    for (int i = 0; i < LEFTOVERS; i++)
        if (left[i])
            unmap(left[i], left_pages[i]);
    (void)nleft;
    pthread_attr_destroy(&attr);
}

/* ------------------------------------------------------------------ */
/* 11. kill                                                            */
/* ------------------------------------------------------------------ */

#define KILL_PAGES 4096

static void w_kill(struct wstate *w)
{
    do {
        uint64_t r = rnd(&w->rng);
        size_t n = 1 + r % 64;
        char *p = map_anon(n, RW, 0);
        write_pages(p, 0, n, r);
        for (int i = 0; i < 16; i++) {
            uint64_t q = rnd(&w->rng);
            put(g_region, (size_t)(q >> 8) % KILL_PAGES, q);
        }
        if ((r >> 40) % 8 == 0) {
            size_t off, len;
            random_range(w, KILL_PAGES, 64, &off, &len);
            advise(g_region + off * PG, len, MADV_DONTNEED, "MADV_DONTNEED");
        }
        unmap(p, n);
    } while (more(w));
}

static pid_t g_kill_child;

static void m_kill(struct wstate *w)
{
    uint64_t start = w->deadline - millis_ns(g_millis);
    uint64_t t = now_ns(), at = start + millis_ns(g_millis / 4);
    if (t < at)
        sleep_ns(at - t);
    if (kill(g_kill_child, SIGKILL) != 0)
        die(errno, "kill(child %d, SIGKILL)", (int)g_kill_child);
    int st = wait_child(g_kill_child, 0, CHILD_TIMEOUT_MS, "kill child");
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
        die(0, "child %d: status 0x%x, not killed by SIGKILL", (int)g_kill_child, st);
    t = now_ns();
    if (t < w->deadline)
        sleep_ns(w->deadline - t);
    wait_first_iterations(g_threads);
    long sum = 0;
    for (int i = 0; i < g_threads; i++)
        sum += __atomic_load_n(&g_ws[i].iters, __ATOMIC_RELAXED);
    report(sum, 0, 0, "");
    raise(SIGKILL);
    die(0, "raise(SIGKILL) returned");
}

static void run_kill(void)
{
    g_region_pages = KILL_PAGES;
    g_region = map_anon(KILL_PAGES, RW, 0);
    write_pages(g_region, 0, 256, 11);
    g_extra_ns = millis_ns(g_millis) + millis_ns(WAIT_TIMEOUT_MS); /* workers outlive main */
    pid_t parent = getpid();
    pid_t pid = fork(); /* still single-threaded: the child may start threads */
    if (pid < 0)
        die(errno, "fork");
    if (pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
            die(errno, "prctl(PR_SET_PDEATHSIG)");
        if (getppid() != parent)
            _exit(0);
        g_case = "kill (child)";
        /* runs until SIGKILLed; if that never comes, its workers end and it exits 0 (which the
         * parent then reports as a failure) */
        run_workers(g_threads, w_kill, NULL, NULL);
        _exit(0);
    }
    g_kill_child = pid;
    run_workers(g_threads, w_kill, m_kill, NULL);
    die(0, "kill: main returned");
}

/* ------------------------------------------------------------------ */
/* 13. populate                                                        */
/* ------------------------------------------------------------------ */

static void w_populate(struct wstate *w)
{
    do {
        uint64_t r = rnd(&w->rng);
        size_t n = 1 + r % 64;
        char *p = map_anon(n, RW, MAP_POPULATE);
        for (int i = 0; i < 4; i++) {
            uint64_t q = rnd(&w->rng);
            if (q & 1)
                put(p, (size_t)(q >> 8) % n, q);
            else
                (void)get(p, (size_t)(q >> 8) % n);
        }
        jitter(w);
        unmap(p, n);

        size_t m = 1 + (size_t)(r >> 8) % 4;
        void *l = mmap(NULL, m * PG, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_LOCKED, -1, 0);
        if (l == MAP_FAILED) {
            if (errno != EAGAIN && errno != ENOMEM && errno != EPERM)
                die(errno, "mmap(%zu pages, MAP_LOCKED)", m);
        } else {
            put(l, (size_t)(r >> 16) % m, r);
            (void)get(l, (size_t)(r >> 24) % m);
            unmap(l, m);
        }
        for (int i = 0; i < 2; i++) {
            uint64_t q = rnd(&w->rng);
            put(g_region, (size_t)(q >> 8) % g_region_pages, q);
        }
    } while (more(w));
}

static void m_populate(struct wstate *w)
{
    do {
        pid_t pid = fork();
        if (pid < 0)
            die(errno, "fork");
        if (pid == 0) {
            for (int i = 0; i < 4; i++) {
                uint64_t r = rnd(&w->rng);
                put(g_region, (size_t)(r >> 8) % g_region_pages, r);
            }
            void *p = mmap(NULL, 4 * PG, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
            if (p == MAP_FAILED)
                _exit(3);
            put(p, 0, 1);
            put(p, 3, 2);
            _exit(0);
        }
        expect_exit0(wait_child(pid, 0, CHILD_TIMEOUT_MS, "populate child"), pid,
                     "populate child");
        nap_until(w, 45000, 55000);
    } while (more(w));
}

/* ------------------------------------------------------------------ */
/* all                                                                 */
/* ------------------------------------------------------------------ */

static const char *const all_cases[] = {"reuse", "discard", "layout", "mremap",
                                        "brk",   "fork",    "vfork",  "exec",
                                        "fixed", "exits",   "free",   "populate"};

static int run_all(void)
{
    char threads_s[24], seed_s[24], millis_s[24];
    snprintf(threads_s, sizeof threads_s, "%d", g_threads);
    snprintf(seed_s, sizeof seed_s, "%llu", g_seed);
    snprintf(millis_s, sizeof millis_s, "%ld", g_millis);
    int failed = 0, ran = 0;
    for (size_t i = 0; i < sizeof all_cases / sizeof all_cases[0]; i++) {
        char *argv[] = {"stress", (char *)all_cases[i], threads_s, seed_s, millis_s, NULL};
        pid_t pid = fork();
        if (pid < 0)
            die(errno, "fork");
        if (pid == 0) {
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        int st = wait_child(pid, 0, 3 * g_millis + 60000, all_cases[i]);
        ran++;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            char buf[160];
            int k = snprintf(buf, sizeof buf, "stress all: case %s failed (%s %d)\n",
                             all_cases[i], WIFEXITED(st) ? "exit" : "signal",
                             WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            if (k > 0)
                truth_write_all(2, buf, (size_t)k < sizeof buf ? (size_t)k : sizeof buf - 1);
            failed++;
        }
    }
    report(ran, 0, 0, " (cases run)");
    return failed ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* main                                                                */
/* ------------------------------------------------------------------ */

static _Noreturn void usage(void)
{
    static const char msg[] =
        "usage: stress CASE THREADS SEED MILLIS\n"
        "  CASE: reuse discard layout mremap brk fork vfork exec exec-child fixed exits kill\n"
        "        free populate all\n";
    truth_write_all(2, msg, sizeof msg - 1);
    _exit(2);
}

static int parse_ull(const char *s, unsigned long long *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return 0;
    errno = 0;
    *out = strtoull(s, &end, 10);
    return errno == 0 && *end == 0;
}

int main(int argc, char **argv)
{
    unsigned long long t, m;
    if (argc != 5 || !parse_ull(argv[2], &t) || !parse_ull(argv[3], &g_seed) ||
        !parse_ull(argv[4], &m) || t < 1 || t > MAX_THREADS || m > 86400000ULL)
        usage();
    g_case = argv[1];
    g_threads = (int)t;
    g_millis = (long)m;
    /* no (m)THP: one fault, one page */
    (void)prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);

    long iters = 0, skips = 0;
    int with_skips = 0;
    const char *c = g_case;
    if (strcmp(c, "all") == 0)
        return run_all();
    if (strcmp(c, "reuse") == 0) {
        iters = run_workers(g_threads, w_reuse, NULL, NULL);
    } else if (strcmp(c, "discard") == 0 || strcmp(c, "fixed") == 0 || strcmp(c, "free") == 0) {
        int fixed = strcmp(c, "fixed") == 0;
        g_region_pages = fixed ? 64 : 256;
        g_region = map_anon(g_region_pages, RW, 0);
        write_pages(g_region, 0, g_region_pages, 3);
        iters = run_workers(g_threads, fixed ? w_fixed : c[0] == 'd' ? w_discard : w_free, NULL,
                            NULL);
    } else if (strcmp(c, "layout") == 0) {
        install_skip_handler();
        setup_layout();
        iters = run_workers(g_threads, w_layout, NULL, &skips);
        with_skips = 1;
    } else if (strcmp(c, "mremap") == 0) {
        install_skip_handler();
        setup_mremap();
        iters = run_workers(g_threads, w_mremap, NULL, &skips);
        with_skips = 1;
    } else if (strcmp(c, "brk") == 0) {
        install_skip_handler();
        g_before_start = setup_brk; /* once the threads exist: pthread_create may malloc */
        iters = run_workers(g_threads, w_brk, NULL, &skips);
        if (brk(g_brk0) != 0)
            die(errno, "brk(back to the start)");
        with_skips = 1;
    } else if (strcmp(c, "fork") == 0) {
        g_worker_nice = 10;
        make_sregs();
        iters = run_workers(g_threads, w_sregs, m_fork, NULL);
    } else if (strcmp(c, "vfork") == 0) {
        g_worker_nice = 10;
        if (access(TRUE_PATH, X_OK) != 0)
            die(errno, "%s", TRUE_PATH);
        make_sregs();
        g_clone_stack = malloc(CLONE_STACK);
        if (!g_clone_stack)
            die(errno, "malloc(clone stack)");
        iters = run_workers(g_threads, w_sregs, m_vfork, NULL);
        free(g_clone_stack);
    } else if (strcmp(c, "exec") == 0) {
        make_sregs();
        run_workers(g_threads, w_exec, NULL, NULL);
        die(0, "exec: the exec thread returned");
    } else if (strcmp(c, "exec-child") == 0) {
        g_region_pages = 256;
        g_region = map_anon(g_region_pages, RW, 0);
        iters = run_workers(g_threads / 2 > 0 ? g_threads / 2 : 1, w_exec_child, NULL, NULL);
    } else if (strcmp(c, "exits") == 0) {
        g_worker_nice = 10;
        make_sregs();
        iters = run_workers(g_threads / 2, w_sregs, m_exits, NULL);
    } else if (strcmp(c, "kill") == 0) {
        g_worker_nice = 10;
        run_kill();
    } else if (strcmp(c, "populate") == 0) {
        g_worker_nice = 10;
        g_region_pages = 256;
        g_region = map_anon(g_region_pages, RW, MAP_POPULATE);
        iters = run_workers(g_threads, w_populate, m_populate, NULL);
    } else {
        usage();
    }
    char extra[96] = "";
    if (strcmp(c, "layout") == 0)
        snprintf(extra, sizeof extra, ", %ld moves and back, %ld refused (EFAULT)", g_layout_moves,
                 g_layout_refused);
    report(iters, skips, with_skips, extra);
    return 0;
}
