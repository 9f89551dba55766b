/*
 * select_edges.c - issue 15: mappings --min-size 1MiB leaves out, that later change.
 *
 * A: 512 KiB at 0x200000000000, advised MADV_HUGEPAGE, then written.
 * B: 512 KiB at 0x210000000000, grown in place by mremap to 2 MiB, then written whole.
 * C: two adjacent 512 KiB mappings at 0x220000000000 (the kernel makes them one); then a fork
 *    child writes all of C and exits, and the parent waits for it.
 * Prints "done" and exits 0.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define KIB 1024UL

static char *at(unsigned long addr, size_t len)
{
    char *p = mmap((void *)addr, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != (char *)addr) {
        perror("mmap");
        _exit(1);
    }
    return p;
}

int main(void)
{
    char *a = at(0x200000000000UL, 512 * KIB);
    madvise(a, 512 * KIB, MADV_HUGEPAGE);
    memset(a, 1, 512 * KIB);
    char *b = at(0x210000000000UL, 512 * KIB);
    if (mremap(b, 512 * KIB, 2048 * KIB, 0) != b) {
        perror("mremap");
        return 1;
    }
    memset(b, 1, 2048 * KIB);
    char *c = at(0x220000000000UL, 512 * KIB);
    at(0x220000000000UL + 512 * KIB, 512 * KIB);
    pid_t child = fork();
    if (child == 0) {
        memset(c, 2, 1024 * KIB);
        _exit(0);
    }
    int status;
    waitpid(child, &status, 0);
    printf("done\n");
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
