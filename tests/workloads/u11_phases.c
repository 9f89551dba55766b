/*
 * u11_phases.c - three phases, the first two each ended by a look at the kernel's page tables
 * and a pause, for `replay --at` and `--timeline`:
 *   1. region a: 2048 pages, all written; region z: 32 pages, 0..15 read (the zero page).
 *   2. a: MADV_DONTNEED of 0..2039 (8 pages stay); a thread maps region c (16 pages) and
 *      writes 0..9; z is grown to 64 pages by mremap (it may move, its pages with it).
 *   3. a is unmapped; region d: 64 pages, 0..31 written; truth_finish.
 * Each look prints, for phase N, {"truth":"phase_region","name":"N:a",...} per region and
 * {"truth":"phase_anon","name":"N","present":...} (every private anonymous page, as "anon"),
 * measured after a dry run (as truth_finish does) so that nothing becomes resident after the
 * measurement. Then it maps a marker of 7 pages, PROT_READ, never touched (a `map` line the test
 * finds), and sleeps 300 ms: every line of the phase comes before the marker's, none during the
 * pause. The thread's tid comes as {"truth":"made_by","name":"c","tid":T}.
 * At the end, truth_finish reports z, c and d.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <sys/syscall.h>
#include <time.h>

#define MARK_PAGES 7

struct part {
    const char *name;
    char *p;
    size_t pages;
};

/* Measures the parts and every private anonymous page, and prints them if `print`. */
static void look(const char *phase, const struct part *parts, int n, int print)
{
    long present[8];
    truth_touch_stack();
    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pm < 0)
        truth_die("open(/proc/self/pagemap)");
    for (int i = 0; i < n; i++)
        present[i] = truth_count_present(pm, (uintptr_t)parts[i].p,
                                         (uintptr_t)parts[i].p + parts[i].pages * TRUTH_PAGE);
    long anon = truth_measure_anon(pm);
    close(pm);
    long pid = (long)getpid();
    truth_out_len = 0;
    for (int i = 0; i < n; i++)
        truth_append(snprintf(truth_out + truth_out_len, sizeof truth_out - truth_out_len,
            "{\"truth\":\"phase_region\",\"pid\":%ld,\"name\":\"%s:%s\",\"start\":%lu,"
            "\"end\":%lu,\"present\":%ld}\n",
            pid, phase, parts[i].name, (unsigned long)parts[i].p,
            (unsigned long)(parts[i].p + parts[i].pages * TRUTH_PAGE), present[i]));
    truth_append(snprintf(truth_out + truth_out_len, sizeof truth_out - truth_out_len,
        "{\"truth\":\"phase_anon\",\"pid\":%ld,\"name\":\"%s\",\"present\":%ld}\n",
        pid, phase, anon));
    if (print)
        truth_write_all(1, truth_out, truth_out_len);
}

/* Ends a phase: its look (after a dry run), the marker, the pause. */
static void end_phase(const char *phase, const struct part *parts, int n)
{
    look(phase, parts, n, 0);
    look(phase, parts, n, 1);
    if (mmap(NULL, MARK_PAGES * TRUTH_PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) ==
        MAP_FAILED)
        truth_die("mmap(marker)");
    struct timespec pause = {0, 300 * 1000 * 1000};
    while (nanosleep(&pause, &pause) != 0)
        if (errno != EINTR)
            truth_die("nanosleep");
}

static char *c;
static long c_tid;

static void *make_c(void *arg)
{
    (void)arg;
    c_tid = syscall(SYS_gettid);
    c = truth_mmap_anon(16, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(c, 0, 9);
    return NULL;
}

int main(void)
{
    truth_touch_static();
    char *a = truth_mmap_anon(2048, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(a, 0, 2047);
    char *z = truth_mmap_anon(32, PROT_READ | PROT_WRITE, 0);
    if (truth_read_pages(z, 0, 15) != 0)
        truth_die("z is not zero");
    struct part one[] = {{"a", a, 2048}, {"z", z, 32}};
    end_phase("1", one, 2);

    if (madvise(a, 2040 * TRUTH_PAGE, MADV_DONTNEED) != 0)
        truth_die("madvise(MADV_DONTNEED)");
    truth_run_threads(1, make_c);
    z = mremap(z, 32 * TRUTH_PAGE, 64 * TRUTH_PAGE, MREMAP_MAYMOVE);
    if (z == MAP_FAILED)
        truth_die("mremap");
    char made_by[128];
    int len = snprintf(made_by, sizeof made_by,
                       "{\"truth\":\"made_by\",\"pid\":%ld,\"name\":\"c\",\"tid\":%ld}\n",
                       (long)getpid(), c_tid);
    truth_write_all(1, made_by, (size_t)len);
    struct part two[] = {{"a", a, 2048}, {"z", z, 64}, {"c", c, 16}};
    end_phase("2", two, 3);

    if (munmap(a, 2048 * TRUTH_PAGE) != 0)
        truth_die("munmap");
    char *d = truth_mmap_anon(64, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(d, 0, 31);
    truth_region("z", z, 64);
    truth_region("c", c, 16);
    truth_region("d", d, 64);
    truth_expect("z", 16);
    truth_expect("c", 10);
    truth_expect("d", 32);
    truth_finish(0);
}
