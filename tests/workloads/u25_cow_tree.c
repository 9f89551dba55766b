/*
 * u25_cow_tree.c - frames shared by a fork, then half of them copied.
 *   The parent writes 8192 pages (32 MiB) and forks. While the child holds its copy untouched,
 *   the parent prints "frames KB": the kernel's count of the anonymous frames the two hold
 *   together (each one's Pss_Anon added: a frame mapped by both is half in each). The child then
 *   writes the first 4096 pages (copy-on-write gives it frames of its own), and the parent
 *   prints "frames KB" again. Each holds for 300 ms at each step (a sample period or more), and
 *   prints "own KB" (its RssAnon) at the end.
 * So the tree holds about 32 MiB after the fork and 48 MiB after the write, while each process's
 * own figure is 32 MiB throughout.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <stdio.h>
#include <sys/wait.h>

#define PAGES 8192

/* A field of /proc/PID/smaps_rollup or status, in kB. */
static long field_kb(const char *path, const char *key)
{
    static char buf[8192];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        truth_die("open");
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        truth_die("read");
    buf[n] = 0;
    char *at = strstr(buf, key);
    if (!at)
        truth_die(key);
    return strtol(at + strlen(key), NULL, 10);
}

static long frames_kb(pid_t child)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)child);
    return field_kb("/proc/self/smaps_rollup", "Pss_Anon:") + field_kb(path, "Pss_Anon:");
}

static void step(int fd)
{
    char c = 's';
    if (write(fd, &c, 1) != 1)
        truth_die("write");
}

static void await(int fd)
{
    char c;
    if (read(fd, &c, 1) != 1)
        truth_die("read");
}

int main(void)
{
    int to_child[2], to_parent[2];
    if (pipe(to_child) || pipe(to_parent))
        truth_die("pipe");
    char *p = truth_mmap_anon(PAGES, PROT_READ | PROT_WRITE, 0);
    truth_nohuge(p, PAGES * TRUTH_PAGE);
    truth_write_pages(p, 0, PAGES - 1);
    pid_t child = fork();
    if (child < 0)
        truth_die("fork");
    if (child == 0) {
        step(to_parent[1]);
        await(to_child[0]);
        truth_write_pages(p, 0, PAGES / 2 - 1);
        step(to_parent[1]);
        await(to_child[0]);
        printf("own %ld\n", field_kb("/proc/self/status", "RssAnon:"));
        fflush(stdout);
        _exit(0);
    }
    await(to_parent[0]);
    usleep(300000);
    printf("frames %ld\n", frames_kb(child));
    fflush(stdout);
    step(to_child[1]);
    await(to_parent[0]);
    usleep(300000);
    printf("frames %ld\n", frames_kb(child));
    fflush(stdout);
    step(to_child[1]);
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
        truth_die("child");
    printf("own %ld\n", field_kb("/proc/self/status", "RssAnon:"));
    return 0;
}
