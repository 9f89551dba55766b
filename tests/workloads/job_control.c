/*
 * job_control.c - argv[1] = microseconds (default 0). 40 times: fork a busy child, stop it with
 * SIGSTOP, wait that long, continue it with SIGCONT, and wait for it to exit. Under a tracer the
 * SIGSTOP can land while the tracer is setting the child up; the child must still finish.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int delay = argc > 1 ? atoi(argv[1]) : 0;
    for (int i = 0; i < 40; i++) {
        pid_t child = fork();
        if (child < 0)
            return 1;
        if (child == 0) {
            volatile long x = 0;
            for (long k = 0; k < 3000000; k++)
                x += k;
            _exit(0);
        }
        kill(child, SIGSTOP);
        usleep(delay);
        kill(child, SIGCONT);
        int status;
        if (waitpid(child, &status, 0) != child || !WIFEXITED(status))
            return 1;
    }
    return 0;
}
