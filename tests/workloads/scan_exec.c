/*
 * scan_exec.c - issue 14: the last pages of a space that execs.
 *
 * Maps and writes 1000 pages, prints "touched ADDR", and execs /bin/true at
 * once (no other syscall the tracer stops in between). Under --faults scan
 * with no timed scan in its life, the pages can only be found at the
 * execve's entry, before the old mm is gone.
 */
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#define PG 4096UL
#define PAGES 1000UL

int main(void)
{
    volatile char *p = mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    for (unsigned long i = 0; i < PAGES; i++) p[i * PG] = 1;
    printf("touched %lu\n", (unsigned long)p);
    fflush(stdout);
    execl("/bin/true", "true", (char *)NULL);
    perror("execl");
    return 1;
}
