/*
 * u26_latin1_map.c - PATH: a file whose name need not be UTF-8 (the test names it in Latin-1,
 * byte 0xe9), mapped beside anonymous memory that a process and its fork child write.
 *   Creates PATH, 4 pages long, maps it shared and read-only and reads every page; maps 64
 *   anonymous pages, writes 0..15 and forks:
 *   child : writes 16..31, reports region "region" (32 present: 0..15 inherited + 16..31), _exit(0).
 *   parent: writes 32..47, waits for the child, reports region "region" (32 present:
 *           0..15 + 32..47), exits with 0 if the child exited 0.
 * The file's line of /proc/PID/maps is then not UTF-8 in both processes. PATH is left in place
 * (a removed file's line would end in " (deleted)"): the test removes it.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <sys/wait.h>

int main(int argc, char **argv)
{
    if (argc != 2)
        truth_die("usage: u26_latin1_map PATH");
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, 4 * TRUTH_PAGE))
        truth_die("the file");
    char *file = mmap(NULL, 4 * TRUTH_PAGE, PROT_READ, MAP_SHARED, fd, 0);
    if (file == MAP_FAILED)
        truth_die("mmap of the file");
    if (truth_read_pages(file, 0, 3) != 0)
        truth_die("the file is not zeros");

    char *a = truth_mmap_anon(64, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(a, 0, 15);
    pid_t pid = fork();
    if (pid < 0)
        truth_die("fork");
    if (pid == 0) {
        truth_write_pages(a, 16, 31);
        truth_region("region", a, 64);
        truth_expect("region", 32);
        truth_finish(0);
    }

    truth_write_pages(a, 32, 47);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            truth_die("waitpid");
    }
    truth_region("region", a, 64);
    truth_expect("region", 32);
    truth_finish(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1);
}
