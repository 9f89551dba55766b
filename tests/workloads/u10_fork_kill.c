/*
 * u10_fork_kill.c - issue 10: children SIGKILLed right after fork.
 *
 * [N=100] times: fork; the child spins; the parent SIGKILLs it at once and
 * waits for it. Prints "done N killed K" (K children reported SIGKILL) and
 * exits 0 when K == N, else 1.
 * Before issue 10 18-55 of 100 children got no exit line, and replay kept
 * a copy of the parent's space for each of them.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100, killed = 0;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 1; }
        if (pid == 0)
            for (;;) __asm__ volatile("" ::: "memory");
        kill(pid, SIGKILL);
        int status;
        if (waitpid(pid, &status, 0) != pid) { perror("waitpid"); return 1; }
        killed += WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    }
    printf("done %d killed %d\n", n, killed);
    return killed != n;
}
