/*
 * u10_asan_leak.c - issue 10: an AddressSanitizer build that leaks.
 *
 * Build with `gcc -fsanitize=address -g -pthread`. main mallocs 4 KiB, touches it, drops the
 * only pointer and prints "leaked". With argument "threads", three threads keep allocating
 * while main exits, so they are alive when the leak check runs. At exit LeakSanitizer checks
 * from a helper made with clone(CLONE_VM | CLONE_UNTRACED), which ptrace-attaches every thread;
 * it reports "detected memory leaks" on stderr and the process exits 1 (ASan's exitcode).
 * Before issue 10 the untraced helper's mmap got ENOSYS and the traced program spun until
 * killed; with the flag cleared, its attach got EPERM ("does not work under ptrace").
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *volatile sink; /* keeps the allocation from being optimised away */

static void *churn(void *arg)
{
    for (;;) {
        sink = malloc(100);
        free(sink);
        usleep(1000);
    }
    return arg;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "threads") == 0) {
        pthread_t t;
        for (int i = 0; i < 3; i++)
            if (pthread_create(&t, NULL, churn, NULL) != 0)
                return 2;
        usleep(20000);
    }
    char *p = malloc(4096);
    if (!p)
        return 1;
    memset(p, 1, 4096);
    sink = p;
    sink = NULL; /* the only pointer is gone: a definite leak */
    p = NULL;
    printf("leaked\n");
    fflush(stdout);
    exit(0);
}
