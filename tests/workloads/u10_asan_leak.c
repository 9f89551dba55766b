/*
 * u10_asan_leak.c - issue 10: an AddressSanitizer build that leaks.
 *
 * Build with `gcc -fsanitize=address -g -pthread`. main mallocs 4 KiB, touches it, drops the
 * only pointer and prints "leaked". With argument "threads", three threads keep allocating
 * while main exits, so they are alive when the leak check runs; with "busy", three threads map
 * and unmap memory in a loop (inside layout syscalls most of the time) while main runs three
 * leak checks, then exits. At exit LeakSanitizer checks
 * from a helper made with clone(CLONE_VM | CLONE_UNTRACED), which ptrace-attaches every thread;
 * it reports "detected memory leaks" on stderr and the process exits 1 (ASan's exitcode).
 * Before issue 10 the untraced helper's mmap got ENOSYS and the traced program spun until
 * killed; with the flag cleared, its attach got EPERM ("does not work under ptrace").
 */
#include <pthread.h>
#include <sanitizer/lsan_interface.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void *volatile sink; /* keeps the allocation from being optimised away */

/* Maps, writes and unmaps 64 KiB over and over: inside layout syscalls most of the time. */
static void *busy(void *arg)
{
    for (;;) {
        char *p = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            p[0] = 1;
            munmap(p, 1 << 16);
        }
    }
    return arg;
}

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
    int is_busy = argc > 1 && strcmp(argv[1], "busy") == 0;
    if (argc > 1 && (strcmp(argv[1], "threads") == 0 || is_busy)) {
        pthread_t t;
        for (int i = 0; i < 3; i++)
            if (pthread_create(&t, NULL, is_busy ? busy : churn, NULL) != 0)
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
    /* Checks while the threads run (each one stops them all), before the one at exit. */
    for (int i = 0; is_busy && i < 3; i++)
        __lsan_do_recoverable_leak_check();
    printf("leaked\n");
    fflush(stdout);
    exit(0);
}
