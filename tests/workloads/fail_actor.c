/*
 * fail_actor.c PID_FILE [SECONDS=0.2] - appends its pid to PID_FILE, forks a
 * child that appends its own pid and exits 0 at once, waits for it, then for
 * SECONDS maps 8 fresh pages, writes them and unmaps them, every millisecond.
 * So a tracer that fails at the first touch or at the first exit line does so
 * while the parent is still running. Exit 0 (1 if the child failed).
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <sys/wait.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void append_pid(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0)
        truth_die("open pid file");
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
    truth_write_all(fd, buf, (size_t)len);
    close(fd);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        errno = EINVAL;
        truth_die("usage: fail_actor PID_FILE [SECONDS]");
    }
    double seconds = argc > 2 ? atof(argv[2]) : 0.2;
    append_pid(argv[1]);
    pid_t child = fork();
    if (child < 0)
        truth_die("fork");
    if (child == 0) {
        append_pid(argv[1]);
        _exit(0);
    }
    int status;
    while (waitpid(child, &status, 0) < 0) {
        if (errno != EINTR)
            truth_die("waitpid");
    }
    double deadline = now() + seconds;
    while (now() < deadline) {
        char *a = truth_mmap_anon(8, PROT_READ | PROT_WRITE, 0);
        truth_write_pages(a, 0, 7);
        if (munmap(a, 8 * TRUTH_PAGE) != 0)
            truth_die("munmap");
        usleep(1000);
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
