/*
 * u25_no_ptrace.c - issue 25: a tracer that may trace, refused all the same.
 *
 * `u25_no_ptrace PROGRAM ARGS...` installs a seccomp filter that fails ptrace(2) with EPERM
 * (as a container's profile may), then execs PROGRAM: root with CAP_SYS_PTRACE, whose every
 * ptrace call is refused. Exit 127 if the exec fails.
 */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
  struct sock_filter code[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ptrace, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = 4, .filter = code};
  if (argc < 2)
    return 2;
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) { perror("seccomp"); return 1; }
  execvp(argv[1], argv + 1);
  return 127;
}
