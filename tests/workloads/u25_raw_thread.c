/*
 * u25_raw_thread.c - issue 25: LTP clone10's shape, a raw thread with a TLS of its own.
 *
 * Usage: u25_raw_thread [ITERATIONS]   (default 1, as clone10's -i)
 *
 * As LTP's library runs a test: this process (the "library" one) catches SIGALRM (kills the
 * test's group) and SIGUSR1 (a heartbeat that re-arms the alarm), arms a 30 s alarm and forks
 * the test process, then waits for it. The test process puts its handlers back to the
 * default, makes its own process group, sends a heartbeat, and sets up as clone10 does: a
 * 1 MiB malloc'd stack (malloc maps a chunk that large by mmap, 16 bytes of header first, so
 * the stack's top is 16 bytes into the mapping's last page) and a zeroed, aligned_alloc'd TLS
 * area whose second half starts with a minimal thread control block (tcb, self, a
 * multiple-threads flag).
 *
 * Each iteration sets a __thread variable to 100 and a flag to 0, then clone()s a thread
 * (CLONE_THREAD|CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_SETTLS, no parent or child
 * tid) on that stack with that TLS. The thread writes 101 to its own copy of the variable, sets
 * the flag, and leaves by the raw exit syscall (libc's syscall(), so a call, whose push may be
 * the first touch of the stack's next page). The test process polls the flag with usleep(10)
 * (it does not wait for the thread's exit: neither does clone10), writes
 * "iteration N: tls 100" (its own copy untouched), and sends a heartbeat.
 *
 * Then its cleanup, in clone10's order: free the stack (munmap: the thread may not have
 * reached its exit yet, which is clone10's own race), sleep 10 ms, free the TLS area, exit 0.
 * The library process prints "passed N" and exits 0 when the test process exited 0; if it was
 * killed, it prints "test killed by signal S" and exits 2 (LTP's TBROK); if it exited with
 * another status, "test exited S" and 2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define STACK_SIZE (1024 * 1024)
#define TLS_BLOCK 4096
/* Room below the control block for the static TLS (tls_var lives at a negative %fs offset). */
#define BELOW_TCB 4096

struct tcb {
    void *tcb;
    void *dtv;
    void *self;
    int multiple_threads;
    char padding[64];
};

static __thread int tls_var;
static atomic_int thread_done;
static pid_t test_pid;

static int in_thread(void *arg)
{
    (void)arg;
    tls_var = 101;
    atomic_store(&thread_done, 1);
    syscall(SYS_exit, 0);
    return 0;
}

static void say(const char *s)
{
    if (write(1, s, strlen(s)) < 0)
        _exit(3);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test timed out, killing it\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
    }
    kill(-test_pid, SIGKILL);
}

static void on_heartbeat(int sig)
{
    (void)sig;
    alarm(30);
}

static void heartbeat(void)
{
    kill(getppid(), SIGUSR1);
}

static int test_process(int iterations)
{
    signal(SIGALRM, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
    setpgid(0, 0);
    heartbeat();
    /* LTP's library checks its pid by the raw syscall (tst_getpid) before the test's setup:
     * syscall()'s PLT entry is bound before the thread calls it. */
    if (syscall(SYS_getpid) != getpid())
        return 1;

    char *stack = malloc(STACK_SIZE);
    char *area = aligned_alloc(16, BELOW_TCB + TLS_BLOCK);
    if (!stack || !area) {
        perror("malloc");
        return 1;
    }
    memset(area, 0, BELOW_TCB + TLS_BLOCK);
    struct tcb *tcb = (struct tcb *)(area + BELOW_TCB);
    tcb->tcb = tcb;
    tcb->self = tcb;
    tcb->multiple_threads = 1;

    int flags = CLONE_THREAD | CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_SETTLS;
    for (int i = 1; i <= iterations; i++) {
        tls_var = 100;
        atomic_store(&thread_done, 0);
        if (clone(in_thread, stack + STACK_SIZE, flags, NULL, NULL, tcb, NULL) == -1) {
            perror("clone");
            return 1;
        }
        while (atomic_load(&thread_done) == 0)
            usleep(10);
        char line[64];
        snprintf(line, sizeof line, "iteration %d: tls %d\n", i, tls_var);
        say(line);
        heartbeat();
    }

    free(stack);
    usleep(10000);
    free(area);
    return 0;
}

int main(int argc, char **argv)
{
    int iterations = argc > 1 ? atoi(argv[1]) : 1;
    signal(SIGALRM, on_alarm);
    signal(SIGUSR1, on_heartbeat);
    alarm(30);
    test_pid = fork();
    if (test_pid < 0) {
        perror("fork");
        return 1;
    }
    if (test_pid == 0)
        _exit(test_process(iterations));
    int status;
    while (waitpid(test_pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("waitpid");
            return 1;
        }
    }
    alarm(0);
    char line[64];
    if (WIFSIGNALED(status)) {
        snprintf(line, sizeof line, "test killed by signal %d\n", WTERMSIG(status));
        say(line);
        return 2;
    }
    if (WEXITSTATUS(status) != 0) {
        snprintf(line, sizeof line, "test exited %d\n", WEXITSTATUS(status));
        say(line);
        return 2;
    }
    snprintf(line, sizeof line, "passed %d\n", iterations);
    say(line);
    return 0;
}
