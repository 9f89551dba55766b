/*
 * truth.h - header-only helpers for the mevi-actors test workloads.
 *
 * Every workload registers the regions it made (truth_region*), optionally
 * what it knows it made resident (truth_expect), then calls truth_finish(code)
 * which:
 *   1. touches ~256 KiB of stack and every static buffer used below,
 *   2. performs one complete "dry run" of the measurement and formatting
 *      (so lazy PLT binding, libc internals, stack and buffers are all warm
 *      and nothing new becomes resident during the real measurement),
 *   3. measures everything (regions, then all private anon mappings, then
 *      smaps_rollup),
 *   4. formats everything with snprintf into a static buffer,
 *   5. write(2)s it to stdout and calls _exit(code).
 *
 * Output (one JSON object per line, in this order):
 *   {"truth":"region","pid":P,"name":"NAME","start":S,"end":E,"present":N}
 *   {"truth":"expect","pid":P,"name":"NAME","pages":N}
 *   {"truth":"anon","pid":P,"present":N}
 *   {"truth":"rollup","pid":P,"rss_kb":A,"anon_kb":B}
 *
 * No malloc, no stdio FILE anywhere in this header.
 * Include it FIRST (it defines _GNU_SOURCE for mremap, MREMAP_*, MADV_*).
 */
#ifndef MEVI_TRUTH_H
#define MEVI_TRUTH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

/* every helper is static and may be unused in a given workload */
#define TRUTH_FN static __attribute__((unused))

#define TRUTH_PAGE 4096UL
#define TRUTH_MAX_REGIONS 32
#define TRUTH_MAX_EXPECTS 32
#define TRUTH_STACK_TOUCH (256 * 1024)
#define TRUTH_PM_ENTRIES 4096 /* pagemap entries per pread (32 KiB) */

struct truth_region_rec {
    const char *name;
    uintptr_t start, end;
    long present;
};

struct truth_expect_rec {
    const char *name;
    long pages;
};

static struct truth_region_rec truth_regions[TRUTH_MAX_REGIONS];
static int truth_nregions;
static struct truth_expect_rec truth_expects[TRUTH_MAX_EXPECTS];
static int truth_nexpects;

static char truth_out[64 * 1024];      /* final output */
static size_t truth_out_len;
static char truth_maps[512 * 1024];    /* /proc/self/maps */
static char truth_rollup_buf[8 * 1024]; /* /proc/self/smaps_rollup */
static uint64_t truth_pm[TRUTH_PM_ENTRIES];

static long truth_anon_present;
static long truth_rss_kb, truth_anon_kb;

/* ------------------------------------------------------------------ */
/* small utilities                                                     */
/* ------------------------------------------------------------------ */

TRUTH_FN inline uintptr_t truth_page_up(uintptr_t x)
{
    return (x + TRUTH_PAGE - 1) & ~(TRUTH_PAGE - 1);
}

TRUTH_FN inline uintptr_t truth_page_down(uintptr_t x)
{
    return x & ~(TRUTH_PAGE - 1);
}

TRUTH_FN void truth_write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

/* Print "workload: msg: errno" to stderr and _exit(111). No stdio. */
TRUTH_FN _Noreturn void truth_die(const char *msg)
{
    char buf[256];
    int e = errno;
    int n = snprintf(buf, sizeof buf, "workload error: %s (errno %d: %s)\n",
                     msg, e, strerror(e));
    if (n > 0)
        truth_write_all(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    _exit(111);
}

/* Start n threads (1..256), thread i running fn((void *)i), and wait for all of them. */
TRUTH_FN void truth_run_threads(long n, void *(*fn)(void *))
{
    pthread_t th[256];
    if (n < 1 || n > 256) {
        errno = EINVAL;
        truth_die("truth_run_threads: 1 to 256 threads");
    }
    for (long i = 0; i < n; i++) {
        int e = pthread_create(&th[i], NULL, fn, (void *)i);
        if (e != 0) {
            errno = e;
            truth_die("pthread_create");
        }
    }
    for (long i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

/* Disable (m)THP on a range so huge pages cannot make extra pages present. */
TRUTH_FN void truth_nohuge(void *p, size_t len)
{
    if (madvise(p, len, MADV_NOHUGEPAGE) != 0)
        truth_die("madvise(MADV_NOHUGEPAGE)");
}

/* mmap npages of private anonymous memory, then MADV_NOHUGEPAGE it. */
TRUTH_FN void *truth_mmap_anon(size_t npages, int prot, int extra_flags)
{
    void *p = mmap(NULL, npages * TRUTH_PAGE, prot,
                   MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
    if (p == MAP_FAILED)
        truth_die("mmap");
    truth_nohuge(p, npages * TRUTH_PAGE);
    return p;
}

/* Write one byte to each page in [first, last] (inclusive) of base. */
TRUTH_FN void truth_write_pages(void *base, size_t first, size_t last)
{
    volatile char *b = (volatile char *)base;
    for (size_t i = first; i <= last; i++)
        b[i * TRUTH_PAGE] = (char)(i + 1);
}

/* Read one byte from each page in [first, last] (inclusive) of base. */
TRUTH_FN unsigned truth_read_pages(const void *base, size_t first, size_t last)
{
    const volatile char *b = (const volatile char *)base;
    unsigned sum = 0;
    for (size_t i = first; i <= last; i++)
        sum += (unsigned char)b[i * TRUTH_PAGE];
    return sum;
}

/* ------------------------------------------------------------------ */
/* registration                                                        */
/* ------------------------------------------------------------------ */

TRUTH_FN void truth_region_range(const char *name, uintptr_t start, uintptr_t end)
{
    if (truth_nregions >= TRUTH_MAX_REGIONS) {
        errno = ENOSPC;
        truth_die("too many regions");
    }
    truth_regions[truth_nregions].name = name;
    truth_regions[truth_nregions].start = truth_page_down(start);
    truth_regions[truth_nregions].end = truth_page_up(end);
    truth_regions[truth_nregions].present = -1;
    truth_nregions++;
}

TRUTH_FN void truth_region(const char *name, const void *start, size_t npages)
{
    truth_region_range(name, (uintptr_t)start,
                       (uintptr_t)start + npages * TRUTH_PAGE);
}

TRUTH_FN void truth_expect(const char *name, long pages)
{
    if (truth_nexpects >= TRUTH_MAX_EXPECTS) {
        errno = ENOSPC;
        truth_die("too many expects");
    }
    truth_expects[truth_nexpects].name = name;
    truth_expects[truth_nexpects].pages = pages;
    truth_nexpects++;
}

/* ------------------------------------------------------------------ */
/* measurement (no malloc, no stdio FILE, static buffers only)         */
/* ------------------------------------------------------------------ */

/* Whether a pagemap entry is a page in memory: present (bit 63), or being moved by the kernel
 * (compaction, NUMA balancing): a migration entry for an instant, which pagemap calls swapped
 * (bit 62) with a swap type of the kernel's own (bits 0-4, 24 to 30; shown to root). Type 31
 * is a marker (a guard region's): no page. */
TRUTH_FN int truth_in_memory(uint64_t entry)
{
    unsigned type = entry & 0x1f;
    return (entry >> 63) || ((entry >> 62 & 1) && type >= 24 && type < 31);
}

/* Number of pages in [start,end) in memory (truth_in_memory). */
TRUTH_FN long truth_count_present(int pm_fd, uintptr_t start, uintptr_t end)
{
    long n = 0;
    uintptr_t vpn = start / TRUTH_PAGE, vpn_end = end / TRUTH_PAGE;
    while (vpn < vpn_end) {
        size_t want = vpn_end - vpn;
        if (want > TRUTH_PM_ENTRIES)
            want = TRUTH_PM_ENTRIES;
        ssize_t r = pread(pm_fd, truth_pm, want * 8, (off_t)(vpn * 8));
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            truth_die("pread(/proc/self/pagemap)");
        }
        size_t got = (size_t)r / 8;
        for (size_t i = 0; i < got; i++)
            if (truth_in_memory(truth_pm[i]))
                n++;
        vpn += got;
    }
    return n;
}

/* Read a whole /proc file into buf (NUL-terminated). Returns length. */
TRUTH_FN size_t truth_slurp(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        truth_die(path);
    size_t len = 0;
    for (;;) {
        if (len + 1 >= cap) {
            errno = EFBIG;
            truth_die("proc file too large for static buffer");
        }
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            truth_die(path);
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = 0;
    return len;
}

TRUTH_FN uintptr_t truth_parse_hex(const char **pp)
{
    const char *p = *pp;
    uintptr_t v = 0;
    for (;;) {
        char c = *p;
        if (c >= '0' && c <= '9')
            v = v * 16 + (uintptr_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v * 16 + (uintptr_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v = v * 16 + (uintptr_t)(c - 'A' + 10);
        else
            break;
        p++;
    }
    *pp = p;
    return v;
}

/* Is this maps path a private-anonymous kind we count? */
TRUTH_FN int truth_anon_path(const char *path, size_t len)
{
    if (len == 0)
        return 1;
    if (len == 6 && memcmp(path, "[heap]", 6) == 0)
        return 1;
    if (len == 7 && memcmp(path, "[stack]", 7) == 0)
        return 1;
    /* prctl(PR_SET_VMA_ANON_NAME) names: still private anonymous memory */
    if (len > 6 && memcmp(path, "[anon:", 6) == 0)
        return 1;
    return 0;
}

TRUTH_FN long truth_measure_anon(int pm_fd)
{
    truth_slurp("/proc/self/maps", truth_maps, sizeof truth_maps);
    long total = 0;
    const char *p = truth_maps;
    while (*p) {
        const char *line = p;
        const char *eol = strchr(line, '\n');
        if (!eol)
            eol = line + strlen(line);
        p = *eol ? eol + 1 : eol;

        const char *q = line;
        uintptr_t s = truth_parse_hex(&q);
        if (*q != '-')
            continue;
        q++;
        uintptr_t e = truth_parse_hex(&q);
        if (*q != ' ')
            continue;
        q++;
        /* perms: rwxp / rwxs */
        if (eol - q < 4)
            continue;
        char share = q[3];
        q += 4;
        /* skip offset, dev, inode */
        for (int f = 0; f < 3; f++) {
            while (q < eol && *q == ' ')
                q++;
            while (q < eol && *q != ' ')
                q++;
        }
        while (q < eol && *q == ' ')
            q++;
        size_t plen = (size_t)(eol - q);
        if (share != 'p' || !truth_anon_path(q, plen))
            continue;
        total += truth_count_present(pm_fd, s, e);
    }
    return total;
}

TRUTH_FN long truth_rollup_field(const char *key)
{
    size_t klen = strlen(key);
    const char *p = truth_rollup_buf;
    while (*p) {
        if (strncmp(p, key, klen) == 0) {
            p += klen;
            while (*p == ' ' || *p == '\t')
                p++;
            long v = 0;
            while (*p >= '0' && *p <= '9')
                v = v * 10 + (*p++ - '0');
            return v;
        }
        const char *nl = strchr(p, '\n');
        if (!nl)
            break;
        p = nl + 1;
    }
    return -1;
}

TRUTH_FN void truth_measure_all(void)
{
    int pm_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pm_fd < 0)
        truth_die("open(/proc/self/pagemap)");
    for (int i = 0; i < truth_nregions; i++)
        truth_regions[i].present = truth_count_present(
            pm_fd, truth_regions[i].start, truth_regions[i].end);
    truth_anon_present = truth_measure_anon(pm_fd);
    close(pm_fd);

    truth_slurp("/proc/self/smaps_rollup", truth_rollup_buf, sizeof truth_rollup_buf);
    truth_rss_kb = truth_rollup_field("Rss:");
    truth_anon_kb = truth_rollup_field("Anonymous:");
}

TRUTH_FN void truth_append(int n)
{
    if (n < 0 || truth_out_len + (size_t)n >= sizeof truth_out) {
        errno = ENOSPC;
        truth_die("truth output buffer overflow");
    }
    truth_out_len += (size_t)n;
}

TRUTH_FN void truth_format_all(long pid)
{
    truth_out_len = 0;
    for (int i = 0; i < truth_nregions; i++) {
        struct truth_region_rec *r = &truth_regions[i];
        truth_append(snprintf(truth_out + truth_out_len,
            sizeof truth_out - truth_out_len,
            "{\"truth\":\"region\",\"pid\":%ld,\"name\":\"%s\",\"start\":%lu,"
            "\"end\":%lu,\"present\":%ld}\n",
            pid, r->name, (unsigned long)r->start, (unsigned long)r->end,
            r->present));
    }
    for (int i = 0; i < truth_nexpects; i++) {
        truth_append(snprintf(truth_out + truth_out_len,
            sizeof truth_out - truth_out_len,
            "{\"truth\":\"expect\",\"pid\":%ld,\"name\":\"%s\",\"pages\":%ld}\n",
            pid, truth_expects[i].name, truth_expects[i].pages));
    }
    truth_append(snprintf(truth_out + truth_out_len,
        sizeof truth_out - truth_out_len,
        "{\"truth\":\"anon\",\"pid\":%ld,\"present\":%ld}\n",
        pid, truth_anon_present));
    truth_append(snprintf(truth_out + truth_out_len,
        sizeof truth_out - truth_out_len,
        "{\"truth\":\"rollup\",\"pid\":%ld,\"rss_kb\":%ld,\"anon_kb\":%ld}\n",
        pid, truth_rss_kb, truth_anon_kb));
}

/* ------------------------------------------------------------------ */
/* warm-up and finish                                                  */
/* ------------------------------------------------------------------ */

/* Touch ~256 KiB of stack below the caller so later calls cannot grow it. */
TRUTH_FN __attribute__((noinline)) void truth_touch_stack(void)
{
    volatile char buf[TRUTH_STACK_TOUCH];
    for (size_t i = 0; i < sizeof buf; i += 64)
        buf[i] = (char)i;
    __asm__ volatile("" : : "r"(buf) : "memory");
}

TRUTH_FN void truth_touch_static(void)
{
    memset(truth_out, ' ', sizeof truth_out);
    memset(truth_maps, ' ', sizeof truth_maps);
    memset(truth_rollup_buf, ' ', sizeof truth_rollup_buf);
    memset(truth_pm, 0, sizeof truth_pm);
}

/*
 * Measure and print; truth_finish then _exits. Must be called when this
 * process is single-threaded (or other threads are quiescent).
 */
TRUTH_FN __attribute__((noinline)) void truth_report(void)
{
    truth_touch_stack();
    truth_touch_static();
    long pid = (long)getpid();

    /* Dry run: resolves lazy PLT entries, warms libc (snprintf, strerror
     * is not used on success), and every buffer/stack page used below. */
    truth_measure_all();
    truth_format_all(pid);
    truth_touch_stack();

    /* Real measurement, then formatting, then a single write. */
    truth_measure_all();
    truth_format_all(pid);
    truth_write_all(1, truth_out, truth_out_len);
}

TRUTH_FN __attribute__((noinline, noreturn)) void truth_finish(int code)
{
    truth_report();
    _exit(code);
}

#endif /* MEVI_TRUTH_H */
