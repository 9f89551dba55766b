/*
 * u10_i386_sys.h - a syscall through `int $0x80` for the 32-bit workloads (u10_i386*.c, built
 * with `cc -m32 -nostdlib -static`: no libc to call).
 */

static long sys6(long nr, long a, long b, long c, long d, long e, long f)
{
    long r;
    /* ebp carries the sixth argument; it is saved around the call. */
    __asm__ volatile("push %%ebp\n\tmov %7, %%ebp\n\tint $0x80\n\tpop %%ebp"
                     : "=a"(r)
                     : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d), "D"(e), "m"(f)
                     : "memory");
    return r;
}
