/*
 * spawn.c - posix_spawn("/bin/true") and posix_spawnp("sh", "-c", "exit 5")
 * (glibc uses clone(CLONE_VM|CLONE_VFORK) for these), waits for both and
 * checks their statuses (exit 0 and exit 5). The parent also mmaps and writes
 * 10 pages: region "parent" (expect 10). Exit 0 if both statuses were right,
 * else 1.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

static int wait_exit_code(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            truth_die("waitpid");
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + (status & 0x7f);
}

int main(void)
{
    char *a = truth_mmap_anon(10, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(a, 0, 9);

    pid_t p1, p2;
    char *argv1[] = {"/bin/true", NULL};
    int e = posix_spawn(&p1, "/bin/true", NULL, NULL, argv1, environ);
    if (e != 0) {
        errno = e;
        truth_die("posix_spawn /bin/true");
    }
    char *argv2[] = {"sh", "-c", "exit 5", NULL};
    e = posix_spawnp(&p2, "sh", NULL, NULL, argv2, environ);
    if (e != 0) {
        errno = e;
        truth_die("posix_spawnp sh");
    }
    int c1 = wait_exit_code(p1);
    int c2 = wait_exit_code(p2);
    int ok = (c1 == 0 && c2 == 5);
    if (!ok) {
        char msg[128];
        int n = snprintf(msg, sizeof msg,
                         "spawn: unexpected statuses: true=%d (want 0), sh=%d (want 5)\n",
                         c1, c2);
        truth_write_all(2, msg, (size_t)n);
    }

    truth_region("parent", a, 10);
    truth_expect("parent", 10);
    truth_finish(ok ? 0 : 1);
}
