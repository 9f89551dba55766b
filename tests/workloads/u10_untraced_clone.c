/*
 * u10_untraced_clone.c - issue 10: a child made with CLONE_UNTRACED.
 *
 * No arg: raw clone(CLONE_UNTRACED|SIGCHLD) (fork-like, no new stack).
 * "clone3": the same through clone3 with flags CLONE_UNTRACED, exit_signal SIGCHLD; it also
 * prints its clone_args.flags as read back after the call (the tracer clears the flag in the
 * program's memory for the call, and must put it back).
 * The child maps 64 KiB, touches it, unmaps it and _exit(7)s (if mmap fails:
 * errno on stderr, _exit(1)). The parent waits and prints "child exited 7".  Exit 0 if the
 * child's status is 7, else 1.
 * Before issue 10 the child inherited the tracer's seccomp filter untraced and
 * its mmap got ENOSYS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void child(void)
{
    char *p = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        dprintf(2, "child mmap: %s\n", strerror(errno));
        _exit(1);
    }
    for (int i = 0; i < 65536; i += 4096) p[i] = 1;
    munmap(p, 65536);
    _exit(7);
}

int main(int argc, char **argv)
{
    long pid;
    /* The program's own struct: its flags must read back as written. */
    static struct clone_args args;
    int clone3 = argc > 1 && !strcmp(argv[1], "clone3");
    if (clone3) {
        args.flags = CLONE_UNTRACED;
        args.exit_signal = SIGCHLD;
        pid = syscall(SYS_clone3, &args, sizeof args);
    } else {
        /* x86_64 order: flags, stack, parent_tid, child_tid, tls */
        pid = syscall(SYS_clone, CLONE_UNTRACED | SIGCHLD, NULL, NULL, NULL, 0);
    }
    if (pid < 0) { perror("clone"); return 1; }
    if (pid == 0) child();
    int status;
    if (waitpid(pid, &status, 0) != pid) { perror("waitpid"); return 1; }
    if (clone3)
        printf("clone_args.flags %#llx\n", (unsigned long long)args.flags);
    if (WIFEXITED(status)) printf("child exited %d\n", WEXITSTATUS(status));
    else printf("child signal %d\n", WTERMSIG(status));
    return !(WIFEXITED(status) && WEXITSTATUS(status) == 7);
}
