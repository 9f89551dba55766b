/*
 * u10_user_notif.c - issue 10: a seccomp USER_NOTIF supervisor for mmap.
 *
 * A supervisor thread is started first; then the main thread (alone: no
 * TSYNC) installs a filter returning SECCOMP_RET_USER_NOTIF for mmap
 * (SECCOMP_FILTER_FLAG_NEW_LISTENER). The supervisor answers every
 * notification with SECCOMP_USER_NOTIF_FLAG_CONTINUE. The main thread maps
 * 8 pages, writes them, prints "ok 8" and exits 0 (1 on a failed call).
 * USER_NOTIF outranks the tracer's SECCOMP_RET_TRACE, so before issue 10 the
 * mapping was never seen (--verify exit 3).
 * "fork": then forks a child, which inherits the filter and maps and writes
 * 8 pages too (its parent's supervisor answers it); prints "child ok 8" after
 * it exits 0.
 * "name": the filter sends prctl to the supervisor too, and the main thread names itself
 * "notified" with prctl(PR_SET_NAME) after its mapping (no seccomp stop of the tracer's comes
 * for it); prints "named" after "ok 8".
 */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int listener = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready = PTHREAD_COND_INITIALIZER;

static void *supervise(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    while (listener < 0) pthread_cond_wait(&ready, &lock);
    pthread_mutex_unlock(&lock);
    for (;;) { /* ends with the process */
        struct seccomp_notif req;
        struct seccomp_notif_resp resp;
        memset(&req, 0, sizeof req);
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req)) continue;
        memset(&resp, 0, sizeof resp);
        resp.id = req.id;
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    }
    return NULL;
}

/* Maps 8 pages (through the supervisor) and writes them; how many were written. */
static int map_and_write(void)
{
    char *p = mmap(NULL, 8 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return -1; }
    int n = 0;
    for (int i = 0; i < 8; i++) n += (p[i * 4096] = 1);
    return n;
}

int main(int argc, char **argv)
{
    int fork_too = argc > 1 && !strcmp(argv[1], "fork");
    int name_too = argc > 1 && !strcmp(argv[1], "name");
    pthread_t t;
    if (pthread_create(&t, NULL, supervise, NULL)) { perror("pthread_create"); return 1; }
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, name_too ? SYS_prctl : SYS_mmap, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { .len = sizeof code / sizeof code[0], .filter = code };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) { perror("prctl"); return 1; }
    int fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (fd < 0) { perror("seccomp"); return 1; }
    pthread_mutex_lock(&lock);
    listener = fd;
    pthread_cond_signal(&ready);
    pthread_mutex_unlock(&lock);
    int n = map_and_write();
    if (n < 0) return 1;
    printf("ok %d\n", n);
    if (name_too) {
        if (prctl(PR_SET_NAME, "notified")) { perror("prctl(PR_SET_NAME)"); return 1; }
        printf("named\n");
    }
    if (fork_too) {
        fflush(stdout);
        pid_t child = fork();
        if (child < 0) { perror("fork"); return 1; }
        if (child == 0) _exit(map_and_write() == 8 ? 0 : 1);
        int status;
        if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status)) {
            printf("child failed\n");
            return 1;
        }
        printf("child ok 8\n");
    }
    return 0;
}
