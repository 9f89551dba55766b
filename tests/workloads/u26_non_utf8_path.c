/*
 * u26_non_utf8_path.c - a mapped file whose name is not UTF-8, then anonymous memory.
 *   Maps a file named "mevi-\xff\xfe-PID" (in the directory given, or /tmp), forks a child that
 *   names itself "mevi-\xff", writes 256 pages of an anonymous mapping and holds them 200 ms,
 *   then writes 256 pages itself once the child is gone; prints "done" and removes the file.
 * A line of /proc/PID/maps, and the child's /proc/PID/status and stat, are then not UTF-8: their
 * readers must not give up on the whole file.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>

int main(int argc, char **argv)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/mevi-\xff\xfe-%d", argc > 1 ? argv[1] : "/tmp", (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, TRUTH_PAGE))
        truth_die("the file");
    char *file = mmap(NULL, TRUTH_PAGE, PROT_READ, MAP_SHARED, fd, 0);
    if (file == MAP_FAILED)
        truth_die("mmap of the file");
    pid_t child = fork();
    if (child < 0)
        truth_die("fork");
    if (child == 0 && prctl(PR_SET_NAME, "mevi-\xff"))
        truth_die("prctl");
    char *p = truth_mmap_anon(256, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(p, 0, 255);
    if (child == 0) {
        usleep(200000);
        _exit(0);
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
        truth_die("the child");
    printf("done\n");
    fflush(stdout);
    unlink(path);
    return 0;
}
