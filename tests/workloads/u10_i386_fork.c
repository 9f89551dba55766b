/*
 * u10_i386_fork.c - a 32-bit program that forks (built as u10_i386 is: `cc -m32 -nostdlib
 * -static`). The child maps 64 KiB with mmap2, touches every page, writes "child32" and exits
 * 3; the parent waits for it, writes "ok32" and exits 5. A fork child runs its parent's program:
 * it is no more followed than its parent, and nothing is injected into it.
 */

#include "u10_i386_sys.h"

enum { EXIT = 1, FORK = 2, WRITE = 4, WAITPID = 7, MMAP2 = 192, BYTES = 65536 };

void _start(void)
{
    long child = sys6(FORK, 0, 0, 0, 0, 0, 0);
    if (child < 0)
        sys6(EXIT, 1, 0, 0, 0, 0, 0);
    if (child == 0) {
        char *p = (char *)sys6(MMAP2, 0, BYTES, 3 /* rw */, 0x22 /* private|anon */, -1, 0);
        if ((unsigned long)p > -4096UL)
            sys6(EXIT, 1, 0, 0, 0, 0, 0);
        for (int i = 0; i < BYTES; i += 4096)
            p[i] = 1;
        sys6(WRITE, 1, (long)"child32\n", 8, 0, 0, 0);
        sys6(EXIT, 3, 0, 0, 0, 0, 0);
    }
    int status = 0;
    if (sys6(WAITPID, child, (long)&status, 0, 0, 0, 0) != child || status != 3 << 8)
        sys6(EXIT, 2, 0, 0, 0, 0, 0);
    sys6(WRITE, 1, (long)"ok32\n", 5, 0, 0, 0);
    sys6(EXIT, 5, 0, 0, 0, 0, 0);
}
