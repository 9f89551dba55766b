/* A process whose syscalls ptrace cannot interrupt, beside one that stops at once: the child
 * prefaults 64 MiB with MADV_POPULATE_WRITE (a loop of faults inside one madvise, which only a
 * fatal signal ends) and drops it, ROUNDS times; the parent waits for it. Exits 0. */
#include "truth.h"

#include <sys/mman.h>
#include <sys/wait.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum { ROUNDS = 20, BYTES = 64 << 20 };

int main(void)
{
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        for (int i = 0; i < ROUNDS; i++) {
            char *p = mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED || madvise(p, BYTES, MADV_POPULATE_WRITE) != 0)
                _exit(2);
            munmap(p, BYTES);
        }
        _exit(0);
    }
    int status;
    if (waitpid(child, &status, 0) != child)
        return 3;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 4;
}
