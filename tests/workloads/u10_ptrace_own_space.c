/*
 * u10_ptrace_own_space.c - issue 10: ptrace calls inside one address space.
 *
 * 1. A thread PTRACE_ATTACHes a sibling of its own thread group: the kernel says EPERM, and the
 *    sibling then maps and writes 1 MiB.
 * 2. A helper process sharing the memory (clone(CLONE_VM)), as LeakSanitizer's is, first asks
 *    PTRACE_SEIZE with invalid options (refused), then PTRACE_ATTACHes the main thread, waits for
 *    its stop, PTRACE_DETACHes it and exits; the main thread then maps and writes 1 MiB.
 * Prints one line per step and exits 0. Before issue 10's review, step 1 left the sibling
 * detached from the tracer (its mmap got ENOSYS) and a refused attach did the same.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int sibling_tid, go;
static int main_tid;

static int map_and_write(const char *who)
{
    char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        printf("%s mmap: %s\n", who, strerror(errno));
        return 1;
    }
    memset(p, 1, 1 << 20);
    printf("%s mmap ok\n", who);
    return 0;
}

static void *sibling(void *arg)
{
    sibling_tid = syscall(SYS_gettid);
    while (!go)
        usleep(1000);
    map_and_write("sibling");
    return arg;
}

static int helper(void *arg)
{
    (void)arg;
    /* An option bit that does not exist: the kernel refuses the seize (EIO). */
    long bad = ptrace(PTRACE_SEIZE, main_tid, 0, (void *)0x80000000UL);
    long attached = ptrace(PTRACE_ATTACH, main_tid, 0, 0);
    int status = 0;
    if (attached == 0)
        waitpid(main_tid, &status, __WALL);
    long detached = attached == 0 ? ptrace(PTRACE_DETACH, main_tid, 0, 0) : -1;
    /* The main thread prints once this helper is gone. */
    return (bad == -1 ? 0 : 1) | (attached == 0 ? 0 : 2) |
           (detached == 0 ? 0 : 4);
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, sibling, NULL) != 0)
        return 1;
    while (!sibling_tid)
        usleep(1000);
    long r = ptrace(PTRACE_ATTACH, sibling_tid, 0, 0);
    printf("attach sibling: %s\n", r == 0 ? "ok" : (errno == EPERM ? "EPERM" : strerror(errno)));
    go = 1;
    pthread_join(t, NULL);

    main_tid = syscall(SYS_gettid);
    static char stack[64 << 10];
    int pid = clone(helper, stack + sizeof stack, CLONE_VM | SIGCHLD, NULL);
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return 1;
    printf("helper: %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return map_and_write("main");
}
