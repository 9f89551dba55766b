/*
 * masked_exec.c - runs a program with signals blocked, as a parent may leave them: a signal
 * mask is inherited across fork and exec.
 *
 * masked_exec N[,N...] PROGRAM ARGS...: blocks each signal N (1 to 64), then execvp's PROGRAM.
 * Exit 127 (and errno on stderr) if the exec fails.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: masked_exec N[,N...] PROGRAM ARGS...\n");
        return 2;
    }
    sigset_t blocked;
    sigemptyset(&blocked);
    for (char *n = strtok(argv[1], ","); n; n = strtok(NULL, ","))
        sigaddset(&blocked, atoi(n));
    /* Raw, so that glibc's own two (32, 33) are blocked too if asked. */
    if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &blocked, NULL, 8) != 0) {
        perror("rt_sigprocmask");
        return 1;
    }
    execvp(argv[2], argv + 2);
    perror("execvp");
    return 127;
}
