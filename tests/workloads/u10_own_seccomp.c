/*
 * u10_own_seccomp.c - issue 10: the program's own SECCOMP_RET_TRACE filter.
 *
 * Installs (NO_NEW_PRIVS + SECCOMP_SET_MODE_FILTER) a filter returning
 * SECCOMP_RET_TRACE for openat and ALLOW for everything else, then opens
 * /etc/hostname. With no tracer attached the kernel fails a RET_TRACE
 * syscall with ENOSYS: prints "openat ENOSYS", exit 0. Any other outcome
 * prints it ("openat ok" / the errno name) and exits 1.
 * Before issue 10 the tracer took the SECCOMP stop as its own and the open
 * succeeded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { .len = sizeof code / sizeof code[0], .filter = code };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) { perror("prctl"); return 1; }
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) { perror("seccomp"); return 1; }
    int fd = syscall(SYS_openat, AT_FDCWD, "/etc/hostname", O_RDONLY);
    if (fd >= 0) {
        printf("openat ok\n");
        return 1;
    }
    printf("openat %s\n", strerrorname_np(errno));
    return errno != ENOSYS;
}
