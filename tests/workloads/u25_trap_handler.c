/*
 * u25_trap_handler.c - issue 25: signal handlers a fork child inherits stay its own.
 *
 * Installs a SIGTRAP handler (debuggers, some runtimes' breakpoints) and ignores SIGSYS, then
 * forks: the child raises SIGTRAP, which its handler must take, and checks that SIGSYS is still
 * ignored; it execs itself (`exec`) with SIGTRAP ignored (kept across exec), where it checks
 * that SIGTRAP is still ignored. Prints "handled" and "ignored" and exits 0; anything else is
 * said and exits 1 (a handler reset to the default kills it instead).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t trapped;

static void on_trap(int sig)
{
    (void)sig;
    trapped = 1;
}

static int disposition_is(int sig, void (*handler)(int))
{
    struct sigaction now;
    return sigaction(sig, NULL, &now) == 0 && now.sa_handler == handler;
}

static int child_status(pid_t pid)
{
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        int ok = disposition_is(SIGTRAP, SIG_IGN);
        printf(ok ? "ignored\n" : "SIGTRAP no longer ignored after exec\n");
        return !ok;
    }
    signal(SIGTRAP, on_trap);
    signal(SIGSYS, SIG_IGN);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int kept = disposition_is(SIGTRAP, on_trap) && disposition_is(SIGSYS, SIG_IGN);
        raise(SIGTRAP);
        printf(kept && trapped ? "handled\n" : "handlers not kept\n");
        fflush(stdout);
        _exit(!(kept && trapped));
    }
    int forked = child_status(pid);
    fflush(stdout);
    signal(SIGTRAP, SIG_IGN);
    pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
        _exit(127);
    }
    int execed = child_status(pid);
    if (forked || execed)
        printf("fork: %d, exec: %d\n", forked, execed);
    return forked || execed;
}
