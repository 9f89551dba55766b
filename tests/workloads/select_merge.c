/*
 * select_merge.c - issue 15: a mapping the kernel merges into one beside it.
 *
 * Maps 64 KiB at 0x200000000000, then 4 MiB right after it: the kernel makes them one mapping.
 * Writes both, grows the whole by mremap to 8 MiB (which fails with EFAULT if the two were
 * split apart), and prints how it went and how many mappings start there.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define AT 0x200000000000UL

int main(void)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE;
    char *a = mmap((void *)AT, 64 << 10, PROT_READ | PROT_WRITE, flags, -1, 0);
    char *b = mmap((void *)(AT + (64 << 10)), 4 << 20, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (a == MAP_FAILED || b == MAP_FAILED)
        return 1;
    memset(a, 1, 64 << 10);
    memset(b, 1, 4 << 20);
    char *c = mremap(a, (64 << 10) + (4 << 20), 8 << 20, MREMAP_MAYMOVE);
    printf("mremap %s\n", c == MAP_FAILED ? "failed" : "ok");
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strncmp(line, "200000", 6) == 0;
    printf("mappings at %lx: %d\n", AT, n);
    return 0;
}
