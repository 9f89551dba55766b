/*
 * orphans.c - argv[1] = microseconds (default 30000). A child forks in a loop (its children exit
 * at once) until the parent SIGKILLs it: some grandchild is created after the tracer last heard
 * of its parent, whose fork event then dies with it. Every grandchild must still run and exit.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int delay = argc > 1 ? atoi(argv[1]) : 30000;
    pid_t forker = fork();
    if (forker < 0)
        return 1;
    if (forker == 0) {
        for (;;) {
            pid_t c = fork();
            if (c == 0)
                _exit(0);
            if (c > 0)
                waitpid(c, 0, WNOHANG);
        }
    }
    usleep(delay);
    kill(forker, SIGKILL);
    int status;
    if (waitpid(forker, &status, 0) != forker || !WIFSIGNALED(status))
        return 1;
    return 0;
}
