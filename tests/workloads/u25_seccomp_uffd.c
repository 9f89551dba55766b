/*
 * u25_seccomp_uffd.c - issue 25: a program that forbids userfaultfd(2) for itself.
 *
 * `u25_seccomp_uffd ACTION` installs a filter answering ACTION to userfaultfd and ALLOW to
 * everything else (ACTION: kill, trap, errno, errno0 (ERRNO with 0: a "success") or notif);
 * close0 answers ERRNO 0 to close(fd >= 3) instead, a close that does nothing, then forks a child that writes 10
 * pages of a fresh mapping and reports region "child", and execs itself as `ACTION exec`,
 * which writes 10 pages and reports region "exec". The program never calls userfaultfd
 * itself: untraced, every step succeeds.
 * trap: a SIGSYS handler counts signals; each process exits 1 ("sigsys N") if one came.
 * notif: a supervisor thread holds the listener (SECCOMP_FILTER_FLAG_NEW_LISTENER) and would
 * answer EPERM; it is started before the fork, as a sandbox's supervisor is.
 * Every process checks that its standard input is still open (a "descriptor 0" the filter
 * "returned" must not be closed for it) and that it holds no userfaultfd (one made in it and
 * never closed).
 * Exit 0 when the child and the exec'd program exited 0.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static volatile sig_atomic_t sigsys;

static void on_sigsys(int sig)
{
    (void)sig;
    sigsys++;
}

static int listener = -1;

static void *supervise(void *arg)
{
    (void)arg;
    for (;;) { /* ends with the process */
        struct seccomp_notif req;
        struct seccomp_notif_resp resp;
        memset(&req, 0, sizeof req);
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req))
            continue;
        memset(&resp, 0, sizeof resp);
        resp.id = req.id;
        resp.error = -EPERM;
        ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    }
    return NULL;
}

static void write_and_finish(const char *name)
{
    char *a = truth_mmap_anon(16, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(a, 0, 9);
    truth_region(name, a, 16);
    truth_expect(name, 10);
    if (sigsys) {
        fprintf(stderr, "sigsys %d\n", (int)sigsys);
        truth_finish(1);
    }
    if (fcntl(0, F_GETFD) < 0) {
        fprintf(stderr, "stdin closed\n");
        truth_finish(1);
    }
    for (int fd = 0; fd < 256; fd++) {
        char link[64], target[128];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0 && (target[n] = 0, strstr(target, "userfaultfd"))) {
            fprintf(stderr, "a userfaultfd left in it: %d\n", fd);
            truth_finish(1);
        }
    }
    truth_finish(0);
}

static int exited_0(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            truth_die("waitpid");
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        truth_die("usage: u25_seccomp_uffd kill|trap|errno|notif [exec]");
    const char *action = argv[1];
    signal(SIGSYS, on_sigsys);
    if (argc > 2) /* the exec'd program, under the filter it inherited */
        write_and_finish("exec");

    unsigned ret = SECCOMP_RET_ALLOW;
    if (!strcmp(action, "kill"))
        ret = SECCOMP_RET_KILL_PROCESS;
    else if (!strcmp(action, "trap"))
        ret = SECCOMP_RET_TRAP;
    else if (!strcmp(action, "errno"))
        ret = SECCOMP_RET_ERRNO | EPERM;
    else if (!strcmp(action, "errno0"))
        ret = SECCOMP_RET_ERRNO;
    else if (!strcmp(action, "notif"))
        ret = SECCOMP_RET_USER_NOTIF;
    else if (strcmp(action, "close0"))
        truth_die("unknown action");
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_userfaultfd, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, ret),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    /* close0: close of a descriptor from 3 on "succeeds" without closing it. */
    struct sock_filter closing[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_close, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 3, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    int close0 = !strcmp(action, "close0");
    struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
    if (close0) {
        prog.len = sizeof closing / sizeof closing[0];
        prog.filter = closing;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        truth_die("prctl");
    unsigned flags = ret == SECCOMP_RET_USER_NOTIF ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0;
    long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
    if (fd < 0)
        truth_die("seccomp");
    if (flags) {
        listener = fd;
        pthread_t t;
        if (pthread_create(&t, NULL, supervise, NULL))
            truth_die("pthread_create");
    }

    pid_t child = fork();
    if (child < 0)
        truth_die("fork");
    if (child == 0)
        write_and_finish("child");
    int ok = exited_0(child);

    pid_t exec = fork();
    if (exec < 0)
        truth_die("fork");
    if (exec == 0) {
        execl("/proc/self/exe", argv[0], action, "exec", (char *)NULL);
        truth_die("execl");
    }
    ok = exited_0(exec) && ok;
    if (sigsys)
        fprintf(stderr, "sigsys %d\n", (int)sigsys);
    truth_finish(ok && !sigsys ? 0 : 1);
}
