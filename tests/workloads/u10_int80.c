/*
 * u10_int80.c - issue 10: a 64-bit program making a 32-bit system call.
 *
 * Calls getpid through `int $0x80` (i386 number 20) and compares it with
 * getpid(). Prints "ok" and exits 0 when they agree, "mismatch" and exits 1
 * otherwise. Before issue 10 the tracer's seccomp filter saw a non-native
 * architecture (AUDIT_ARCH_I386) and killed the process with SIGSYS.
 */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    long ret = 20; /* __NR_getpid on i386 */
    __asm__ volatile("int $0x80" : "+a"(ret) : : "memory", "cc");
    if (ret != (long)getpid()) {
        printf("mismatch %ld\n", ret);
        return 1;
    }
    printf("ok\n");
    return 0;
}
