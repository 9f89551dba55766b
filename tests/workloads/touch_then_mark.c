/*
 * touch_then_mark.c PAGES MARKER [STATUS] - write PAGES pages of a fresh mapping one by one
 * (a `resident` line each under --coalesce-ms 0), then create the file MARKER, the sign that
 * the program reached its end, and exit with STATUS (default 0).
 */
#include "truth.h" /* first: defines _GNU_SOURCE */

int main(int argc, char **argv)
{
    if (argc < 3)
        truth_die("usage: touch_then_mark PAGES MARKER [STATUS]");
    size_t pages = strtoul(argv[1], NULL, 10);
    char *p = truth_mmap_anon(pages, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(p, 0, pages - 1);
    int fd = open(argv[2], O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        truth_die("creating the marker");
    close(fd);
    return argc > 3 ? atoi(argv[3]) : 0;
}
