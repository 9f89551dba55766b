/*
 * u27_clone_vm.c - 64 processes made by clone(CLONE_VM) without CLONE_THREAD, sharing the
 * parent's space: each writes its own 16 pages of a shared buffer and 256 pages of a mapping
 * of its own, then exits, while others still run. Every other one is waited for at once, the
 * rest at the end. Prints the sum of the buffer's first bytes (1,024).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define CHILDREN 64
#define OWN 16

static volatile char *buffer;

static int child(void *arg)
{
    long i = (long)arg;
    for (int k = 0; k < OWN; k++)
        buffer[(i * OWN + k) * 4096L] = 1;
    volatile char *own = mmap(0, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (own == MAP_FAILED)
        return 1;
    for (int k = 0; k < 256; k++)
        own[k * 4096L] = 1;
    munmap((void *)own, 1 << 16);
    return 3;
}

int main(void)
{
    buffer = mmap(0, CHILDREN * OWN * 4096L, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buffer == MAP_FAILED)
        return 2;
    for (long i = 0; i < CHILDREN; i++) {
        char *stack = malloc(65536);
        pid_t c = clone(child, stack + 65536, CLONE_VM | SIGCHLD, (void *)i);
        if (c < 0) {
            perror("clone");
            return 2;
        }
        if (i % 2) {
            int status;
            if (waitpid(c, &status, 0) != c || WEXITSTATUS(status) != 3)
                return 4;
        }
    }
    int status;
    while (wait(&status) > 0)
        if (WEXITSTATUS(status) != 3)
            return 4;
    long sum = 0;
    for (long j = 0; j < CHILDREN * OWN; j++)
        sum += buffer[j * 4096L];
    printf("sum %ld\n", sum);
    return 0;
}
