/*
 * bench.c - the workloads `cargo bench` times, untraced and under each tracer.
 *
 *   bench touch THREADS MIB write|read   each thread first-touches its slice of one fresh
 *                                        MIB MiB private anonymous mapping, page by page
 *   bench churn THREADS ITERS            each thread: mmap 64 KiB, write every page,
 *                                        madvise(DONTNEED), write half again, munmap
 *   bench syscalls THREADS N             each thread makes N getppid() calls (no memory)
 *   bench forkexec N                     fork + exec /bin/true, N times, one after the other
 *   bench malloc THREADS ITERS           glibc malloc/memset/free, 16 B to 256 KiB, from
 *                                        each thread, up to 64 blocks live per thread
 *   bench retouch THREADS MIB ROUNDS     ROUNDS times: map MIB MiB, each thread first-touches
 *                                        its slice, unmap; prints "round MS TRACED" after
 *                                        each (TRACED: 1 while a tracer is attached, from
 *                                        /proc/self/status), for `attach` to be timed on
 *
 * The floor: when MEVI_BENCH_FLOOR_SOCK names a Unix socket, `touch` registers its mapping with
 * a userfaultfd of its own and hands the descriptor to the listener there (SCM_RIGHTS), which
 * resolves every first touch; the threads start once the listener has answered.
 *
 * The records floor: with MEVI_BENCH_RECORDS_FLOOR set, each `touch` thread records its own page
 * faults in a ring as `--faults records` has the kernel do (a per-thread software page-fault
 * event, every fault, pid/tid, time and address, 256 KiB, the reader woken every 1,024 records),
 * and one more thread reads the rings as they fill, every byte and nothing more: what the kernel's
 * records and the reading of them cost (the lines the kernel wrote go to the reader's CPU and back
 * to the writer's), with nothing of ours done with them.
 *
 * The seccomp floor: with MEVI_BENCH_SECCOMP set, the program first installs a filter that allows
 * every syscall. It runs no BPF per call (the kernel caches a constant answer), but every syscall
 * now takes the entry path that checks seccomp, as under mevi-actors' filter.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static long page;

/* Every worker waits here so that the threads start their timed work together. */
static pthread_barrier_t start;

struct slice {
    char *base;
    size_t len;
    int write;
    long iters;
    unsigned seed;
};

static void run_threads(int n, void *(*worker)(void *), struct slice *slices)
{
    pthread_t th[64];
    if (n < 1 || n > 64) {
        fprintf(stderr, "bench: 1 to 64 threads\n");
        exit(2);
    }
    pthread_barrier_init(&start, NULL, (unsigned)n);
    for (int i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, worker, &slices[i]))
            die("pthread_create");
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

/* The records floor's rings, and the epoll set its reader waits on. */
#define RECORD_BYTES 32
#define RING_BYTES (8192 * RECORD_BYTES)
static int records_floor = -1;
static volatile int records_floor_done;
static struct perf_event_mmap_page *floor_rings[64];
static int floor_ring_fds[64];
static int floor_ring_count;

/* This thread's faults, recorded from now on into a ring the floor's reader empties: those taken
 * inside system calls too where the kernel allows it, as under mevi-actors. */
static void record_own_faults(void)
{
    struct perf_event_attr attr = {
        .size = sizeof attr,
        .type = PERF_TYPE_SOFTWARE,
        .config = PERF_COUNT_SW_PAGE_FAULTS,
        .sample_period = 1,
        .sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR,
        .use_clockid = 1,
        .clockid = CLOCK_MONOTONIC,
        .comm = 1,
        .exclude_hv = 1,
        .watermark = 1,
        .wakeup_watermark = 1024 * RECORD_BYTES,
    };
    int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0 && (errno == EACCES || errno == EPERM)) {
        attr.exclude_kernel = 1;
        fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    }
    if (fd < 0)
        die("perf_event_open");
    void *ring = mmap(NULL, (size_t)page + RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ring == MAP_FAILED)
        die("mapping the records floor's ring");
    int slot = __atomic_fetch_add(&floor_ring_count, 1, __ATOMIC_SEQ_CST);
    floor_rings[slot] = ring;
    floor_ring_fds[slot] = fd;
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)slot};
    if (epoll_ctl(records_floor, EPOLL_CTL_ADD, fd, &ev))
        die("epoll_ctl");
}

/* The sum of the addresses read, so that reading them is not optimized away. */
static volatile __u64 records_floor_sum;

/* Reads every record's bytes a ring holds, as any reader must (the cache lines the kernel wrote
 * go to the reader's CPU and back), and nothing more. */
static __u64 read_ring(struct perf_event_mmap_page *meta)
{
    const unsigned char *data = (const unsigned char *)meta + meta->data_offset;
    __u64 head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    __u64 sum = 0;
    for (__u64 at = meta->data_tail; at < head; at += 8) {
        __u64 word;
        memcpy(&word, data + at % meta->data_size, sizeof word);
        sum += word;
    }
    __atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
    return sum;
}

/* Empties each ring that wakes it. A ring whose thread ended (it hangs up, and would keep the
 * set ready) is read a last time and taken out of the set; every ring is read once more at the
 * end. */
static void *records_floor_reader(void *arg)
{
    (void)arg;
    struct epoll_event events[64];
    __u64 sum = 0;
    while (!records_floor_done) {
        int n = epoll_wait(records_floor, events, 64, 1);
        for (int i = 0; i < n; i++) {
            int slot = (int)events[i].data.u32;
            sum += read_ring(floor_rings[slot]);
            if (events[i].events & (EPOLLHUP | EPOLLERR))
                epoll_ctl(records_floor, EPOLL_CTL_DEL, floor_ring_fds[slot], NULL);
        }
    }
    for (int slot = 0; slot < floor_ring_count; slot++)
        sum += read_ring(floor_rings[slot]);
    records_floor_sum = sum;
    return NULL;
}

static void *touch_worker(void *arg)
{
    struct slice *s = arg;
    if (records_floor >= 0)
        record_own_faults();
    pthread_barrier_wait(&start);
    unsigned sum = 0;
    for (size_t off = 0; off < s->len; off += (size_t)page) {
        if (s->write)
            s->base[off] = 1;
        else
            sum += *(volatile char *)(s->base + off);
    }
    return (void *)(uintptr_t)sum;
}

/* Registers [base, base+len) with a new userfaultfd and gives it to the bench's floor handler. */
static void hand_to_floor(const char *sock_path, char *base, size_t len)
{
    int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (uffd < 0)
        die("userfaultfd");
    struct uffdio_api api = {.api = UFFD_API, .features = 0};
    if (ioctl(uffd, UFFDIO_API, &api))
        die("UFFDIO_API");
    struct uffdio_register reg = {
        .range = {.start = (uintptr_t)base, .len = len},
        .mode = UFFDIO_REGISTER_MODE_MISSING,
    };
    if (ioctl(uffd, UFFDIO_REGISTER, &reg))
        die("UFFDIO_REGISTER");
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        die("socket");
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strncpy(addr.sun_path, sock_path, sizeof addr.sun_path - 1);
    if (connect(sock, (struct sockaddr *)&addr, sizeof addr))
        die("connect");
    char byte = 0;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr msg = {
        .msg_iov = &iov,
        .msg_iovlen = 1,
        .msg_control = control.buf,
        .msg_controllen = sizeof control.buf,
    };
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &uffd, sizeof(int));
    if (sendmsg(sock, &msg, 0) != 1)
        die("sendmsg");
    /* The handler answers once it is polling: no fault may wait for it to start. */
    if (read(sock, &byte, 1) != 1)
        die("waiting for the floor handler");
    close(sock);
    close(uffd);
}

/* Each of `threads` threads first-touches its slice of [base, base + len). */
static void touch_range(char *base, size_t len, int threads, int write)
{
    struct slice slices[64];
    size_t each = len / (size_t)threads / (size_t)page * (size_t)page;
    for (int i = 0; i < threads && i < 64; i++)
        slices[i] = (struct slice){.base = base + (size_t)i * each, .len = each, .write = write};
    run_threads(threads, touch_worker, slices);
}

static int touch(int threads, long mib, int write)
{
    size_t len = (size_t)mib << 20;
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        die("mmap");
    const char *floor_sock = getenv("MEVI_BENCH_FLOOR_SOCK");
    if (floor_sock)
        hand_to_floor(floor_sock, base, len);
    pthread_t reader;
    if (getenv("MEVI_BENCH_RECORDS_FLOOR")) {
        records_floor = epoll_create1(EPOLL_CLOEXEC);
        if (records_floor < 0 || pthread_create(&reader, NULL, records_floor_reader, NULL))
            die("starting the records floor's reader");
    }
    touch_range(base, len, threads, write);
    if (records_floor >= 0) {
        records_floor_done = 1;
        pthread_join(reader, NULL);
    }
    return 0;
}

static void *churn_worker(void *arg)
{
    struct slice *s = arg;
    const size_t len = 64 << 10;
    pthread_barrier_wait(&start);
    for (long i = 0; i < s->iters; i++) {
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            die("mmap");
        for (size_t off = 0; off < len; off += (size_t)page)
            p[off] = 1;
        if (madvise(p, len, MADV_DONTNEED))
            die("madvise");
        for (size_t off = 0; off < len / 2; off += (size_t)page)
            p[off] = 2;
        if (munmap(p, len))
            die("munmap");
    }
    return NULL;
}

static void *syscall_worker(void *arg)
{
    struct slice *s = arg;
    pthread_barrier_wait(&start);
    for (long i = 0; i < s->iters; i++)
        syscall(SYS_getppid);
    return NULL;
}

static unsigned next_random(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 8;
}

static void *malloc_worker(void *arg)
{
    struct slice *s = arg;
    void *live[64] = {0};
    pthread_barrier_wait(&start);
    for (long i = 0; i < s->iters; i++) {
        int slot = (int)(i % 64);
        free(live[slot]);
        /* Sizes spread over 2^4 .. 2^18 bytes: tcache, arenas, and mmap'd chunks. */
        size_t lo = (size_t)1 << (4 + next_random(&s->seed) % 15);
        size_t size = lo + next_random(&s->seed) % lo;
        char *p = malloc(size);
        if (!p)
            die("malloc");
        memset(p, (int)(i & 0x7f) | 1, size);
        live[slot] = p;
    }
    for (int i = 0; i < 64; i++)
        free(live[i]);
    return NULL;
}

static int per_thread(int threads, long iters, void *(*worker)(void *))
{
    struct slice slices[64];
    for (int i = 0; i < threads && i < 64; i++)
        slices[i] = (struct slice){.iters = iters, .seed = (unsigned)i + 1};
    run_threads(threads, worker, slices);
    return 0;
}

static int forkexec(long n)
{
    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        int status;
        if (waitpid(pid, &status, 0) < 0)
            die("waitpid");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "bench: /bin/true failed (status %#x)\n", status);
            return 1;
        }
    }
    return 0;
}

/* Whether a tracer is attached to this process now (TracerPid in /proc/self/status). */
static int traced(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    const char *t = strstr(buf, "TracerPid:");
    return t && atoi(t + strlen("TracerPid:")) != 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int retouch(int threads, long mib, long rounds)
{
    size_t len = (size_t)mib << 20;
    for (long r = 0; r < rounds; r++) {
        double began = now_ms();
        char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED)
            die("mmap");
        touch_range(base, len, threads, 1);
        if (munmap(base, len))
            die("munmap");
        double took = now_ms() - began;
        printf("round %.3f %d\n", took, traced());
        fflush(stdout);
    }
    return 0;
}

/* N children that each sleep in read() on a pipe until the parent, once all are started,
 * closes it: N live address spaces at once, all idle. */
static int sleepers(long n)
{
    int fds[2];
    if (pipe(fds))
        die("pipe");
    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            char c;
            close(fds[1]);
            _exit(read(fds[0], &c, 1) == 0 ? 0 : 1);
        }
    }
    /* Long enough for every child to be set up and asleep before they go. */
    usleep(200000);
    close(fds[1]);
    int failed = 0, status;
    while (wait(&status) > 0)
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    return failed;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench touch THREADS MIB write|read | churn THREADS ITERS | "
                    "syscalls THREADS N | forkexec N | malloc THREADS ITERS | sleepers N | "
                    "retouch THREADS MIB ROUNDS\n");
    exit(2);
}

int main(int argc, char **argv)
{
    page = sysconf(_SC_PAGESIZE);
    if (argc < 3)
        usage();
    if (getenv("MEVI_BENCH_SECCOMP")) {
        struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
        struct sock_fprog prog = {.len = 1, .filter = allow};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
            die("installing the seccomp filter");
    }
    const char *mode = argv[1];
    if (!strcmp(mode, "touch") && argc == 5)
        return touch(atoi(argv[2]), atol(argv[3]), !strcmp(argv[4], "write"));
    if (!strcmp(mode, "churn") && argc == 4)
        return per_thread(atoi(argv[2]), atol(argv[3]), churn_worker);
    if (!strcmp(mode, "syscalls") && argc == 4)
        return per_thread(atoi(argv[2]), atol(argv[3]), syscall_worker);
    if (!strcmp(mode, "malloc") && argc == 4)
        return per_thread(atoi(argv[2]), atol(argv[3]), malloc_worker);
    if (!strcmp(mode, "forkexec") && argc == 3)
        return forkexec(atol(argv[2]));
    if (!strcmp(mode, "retouch") && argc == 5)
        return retouch(atoi(argv[2]), atol(argv[3]), atol(argv[4]));
    if (!strcmp(mode, "sleepers") && argc == 3)
        return sleepers(atol(argv[2]));
    usage();
    return 2;
}
