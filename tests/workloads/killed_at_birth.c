/*
 * killed_at_birth.c - argv[1] = how many children (default 20). Forks children that wait
 * forever and SIGKILLs each one at once, often before it has run at all (before its first
 * ptrace stop under the tracer). Prints "killed N": how many died by SIGKILL, as they all must.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int children = argc > 1 ? atoi(argv[1]) : 20;
    int killed = 0;
    for (int i = 0; i < children; i++) {
        pid_t child = fork();
        if (child < 0)
            return 1;
        if (child == 0)
            for (;;)
                pause();
        kill(child, SIGKILL);
        int status;
        if (waitpid(child, &status, 0) == child && WIFSIGNALED(status) &&
            WTERMSIG(status) == SIGKILL)
            killed++;
    }
    printf("killed %d\n", killed);
    return 0;
}
