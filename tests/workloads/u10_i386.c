/*
 * u10_i386.c - issue 10: a 32-bit program (built with `cc -m32 -nostdlib -static`, which needs
 * no 32-bit libc). It maps 64 KiB with the i386 mmap2 syscall through `int $0x80`, touches
 * every page, writes "ok32" and exits 5. Before issue 10 the tracer's seccomp filter killed
 * any 32-bit process with SIGSYS, and the tracer injected 64-bit syscalls into it.
 */

#include "u10_i386_sys.h"

enum { MMAP2 = 192, WRITE = 4, EXIT = 1, BYTES = 65536 };

void _start(void)
{
    char *p = (char *)sys6(MMAP2, 0, BYTES, 3 /* rw */, 0x22 /* private|anon */, -1, 0);
    if ((unsigned long)p > -4096UL)
        sys6(EXIT, 1, 0, 0, 0, 0, 0);
    for (int i = 0; i < BYTES; i += 4096)
        p[i] = 1;
    sys6(WRITE, 1, (long)"ok32\n", 5, 0, 0, 0);
    sys6(EXIT, 5, 0, 0, 0, 0, 0);
}
