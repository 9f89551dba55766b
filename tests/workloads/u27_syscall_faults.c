/*
 * u27_syscall_faults.c - 4 threads, each of which makes its own fresh region resident only
 * inside system calls: thread i read()s 32 pages of /dev/zero into region "zero<i>" and 16
 * pages from a pipe (filled by the main thread beforehand) into region "pipe<i>". No page of
 * them is touched by user code before the truth is read: every first touch is a fault the
 * kernel takes for the thread while copying to user memory.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <fcntl.h>
#include <pthread.h>

#define THREADS 4
#define ZERO_PAGES 32
#define PIPE_PAGES 16

static char *zero_region[THREADS];
static char *pipe_region[THREADS];
static int pipes[THREADS][2];

static void *worker(void *arg)
{
    long i = (long)arg;
    int fd = open("/dev/zero", O_RDONLY);
    if (fd < 0)
        truth_die("open /dev/zero");
    size_t want = ZERO_PAGES * TRUTH_PAGE;
    for (size_t got = 0; got < want;) {
        ssize_t n = read(fd, zero_region[i] + got, want - got);
        if (n <= 0)
            truth_die("read /dev/zero");
        got += (size_t)n;
    }
    close(fd);
    want = PIPE_PAGES * TRUTH_PAGE;
    for (size_t got = 0; got < want;) {
        ssize_t n = read(pipes[i][0], pipe_region[i] + got, want - got);
        if (n <= 0)
            truth_die("read pipe");
        got += (size_t)n;
    }
    return NULL;
}

int main(void)
{
    static char fill[PIPE_PAGES * TRUTH_PAGE];
    memset(fill, 'x', sizeof fill);
    for (long i = 0; i < THREADS; i++) {
        zero_region[i] = truth_mmap_anon(ZERO_PAGES, PROT_READ | PROT_WRITE, 0);
        pipe_region[i] = truth_mmap_anon(PIPE_PAGES, PROT_READ | PROT_WRITE, 0);
        truth_nohuge(zero_region[i], ZERO_PAGES * TRUTH_PAGE);
        truth_nohuge(pipe_region[i], PIPE_PAGES * TRUTH_PAGE);
        if (pipe(pipes[i]) != 0)
            truth_die("pipe");
        if (fcntl(pipes[i][1], F_SETPIPE_SZ, (int)sizeof fill) < (int)sizeof fill)
            truth_die("F_SETPIPE_SZ");
        truth_write_all(pipes[i][1], fill, sizeof fill);
    }
    truth_run_threads(THREADS, worker);
    /* The truth keeps the names, not copies. */
    static const char *zero_names[THREADS] = {"zero0", "zero1", "zero2", "zero3"};
    static const char *pipe_names[THREADS] = {"pipe0", "pipe1", "pipe2", "pipe3"};
    for (long i = 0; i < THREADS; i++) {
        truth_region(zero_names[i], zero_region[i], ZERO_PAGES);
        truth_expect(zero_names[i], ZERO_PAGES);
        truth_region(pipe_names[i], pipe_region[i], PIPE_PAGES);
        truth_expect(pipe_names[i], PIPE_PAGES);
    }
    truth_finish(0);
}
