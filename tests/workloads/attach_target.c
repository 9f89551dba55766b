/*
 * attach_target.c - a process for `mevi-actors attach` to follow: started
 * untraced, it prints "pid P", then does one command a line from stdin and
 * answers each with lines ending in one that starts with "ok", so a test can
 * drive it in phases before, while and after it is attached:
 *
 *   thread           start a thread that blocks for good     -> ok thread
 *   worker           start a thread that waits for "work"    -> ok worker WI
 *   work W I F N     worker W writes pages F..F+N-1 of region
 *                    I, and says its tid                     -> tid T, ok work
 *   threads I F N    N new threads each write one page, the
 *                    K-th page F+K of region I, say their
 *                    tids, and exit; the parent joins them   -> tid T page P..., ok threads
 *   map N            mmap N pages (region rI, I from 0)      -> ok map rI
 *   fence I          mmap a page PROT_NONE just below region
 *                    I (unless something is there): no later
 *                    mapping joins the region from below     -> ok fence
 *   touch I F N      write pages F..F+N-1 of region I        -> ok touch
 *   discard I F N    MADV_DONTNEED them                      -> ok discard
 *   unmap I F N      munmap them (the region keeps its name) -> ok unmap
 *   fork I F N       a child writes those pages, prints its
 *                    truth and exits 0; the parent waits     -> ok fork status S
 *   spawn CODE       fork a child that execs `/bin/sh -c 'exit CODE'`;
 *                    the parent waits                        -> ok spawn status S
 *   truth            the truth of every region, anon, rollup -> ok truth
 *   exit CODE        _exit(CODE)
 *
 * Truth lines are truth.h's (README.md): measured after a dry run, so the
 * measurement leaves nothing new present. Every "ok" line is the same in
 * every run (no address, no pid): only "pid P" and the truth lines' pids and
 * addresses vary. End of stdin exits 99; a bad command exits 111.
 */
#include "truth.h"

#include <sys/wait.h>

static char *region_base[TRUTH_MAX_REGIONS];
static size_t region_pages[TRUTH_MAX_REGIONS];
static char region_name[TRUTH_MAX_REGIONS][16];
static int regions;

static char reply_buf[128];
static int thread_ready[2];

static void reply(const char *text)
{
    size_t n = strlen(text);
    memcpy(reply_buf, text, n);
    reply_buf[n] = '\n';
    truth_write_all(1, reply_buf, n + 1);
}

/* One line from stdin into buf, without its newline; exits 99 at its end. */
static void read_line(char *buf, size_t cap)
{
    size_t len = 0;
    for (;;) {
        char c;
        ssize_t r = read(0, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            truth_die("read(stdin)");
        if (r == 0)
            _exit(99);
        if (c == '\n')
            break;
        if (len + 1 >= cap) {
            errno = E2BIG;
            truth_die("command too long");
        }
        buf[len++] = c;
    }
    buf[len] = 0;
}

static unsigned long next_number(char **p)
{
    char *end;
    errno = 0;
    unsigned long n = strtoul(*p, &end, 10);
    if (end == *p || errno != 0) {
        errno = EINVAL;
        truth_die("a number expected");
    }
    *p = end;
    return n;
}

/* Region I's pages F..F+N-1, from the rest of the command: their start and length. */
static char *pages_of(char **p, size_t *len)
{
    unsigned long i = next_number(p);
    unsigned long first = next_number(p);
    unsigned long n = next_number(p);
    if (i >= (unsigned long)regions || first + n > region_pages[i] || n == 0) {
        errno = ERANGE;
        truth_die("pages outside the region");
    }
    *len = n * TRUTH_PAGE;
    return region_base[i] + first * TRUTH_PAGE;
}

static void *blocked_thread(void *arg)
{
    (void)arg;
    char c = 1;
    truth_write_all(thread_ready[1], &c, 1);
    for (;;)
        pause();
    return NULL;
}

static void start_thread(void)
{
    pthread_t thread;
    int e = pthread_create(&thread, NULL, blocked_thread, NULL);
    if (e != 0) {
        errno = e;
        truth_die("pthread_create");
    }
    char c;
    while (read(thread_ready[0], &c, 1) != 1)
        if (errno != EINTR)
            truth_die("read(thread_ready)");
}

/* A worker: a thread that writes the pages it is given, on its pipe, and says its tid. */
#define MAX_WORKERS 8
static int worker_pipe[MAX_WORKERS][2];
static int worker_done[2];
static int workers;

struct work {
    char *start;
    size_t len;
};

static void *worker_thread(void *arg)
{
    int w = (int)(long)arg;
    for (;;) {
        struct work work;
        ssize_t r = read(worker_pipe[w][0], &work, sizeof work);
        if (r < 0 && errno == EINTR)
            continue;
        if (r != sizeof work)
            truth_die("read(worker_pipe)");
        truth_write_pages(work.start, 0, work.len / TRUTH_PAGE - 1);
        pid_t tid = gettid();
        truth_write_all(worker_done[1], (const char *)&tid, sizeof tid);
    }
    return NULL;
}

static void start_worker(void)
{
    if (workers >= MAX_WORKERS) {
        errno = ERANGE;
        truth_die("worker: no more workers");
    }
    if (pipe(worker_pipe[workers]) != 0)
        truth_die("pipe");
    pthread_t thread;
    int e = pthread_create(&thread, NULL, worker_thread, (void *)(long)workers);
    if (e != 0) {
        errno = e;
        truth_die("pthread_create");
    }
    workers++;
}

static pid_t give_work(unsigned long w, char *start, size_t len)
{
    if (w >= (unsigned long)workers) {
        errno = ERANGE;
        truth_die("work: no such worker");
    }
    struct work work = {start, len};
    truth_write_all(worker_pipe[w][1], (const char *)&work, sizeof work);
    pid_t tid;
    while (read(worker_done[0], &tid, sizeof tid) != sizeof tid)
        if (errno != EINTR)
            truth_die("read(worker_done)");
    return tid;
}

/* `threads`: each writes its page and keeps its tid. */
struct one_page {
    char *page;
    pid_t tid;
};

static void *page_thread(void *arg)
{
    struct one_page *mine = arg;
    truth_write_pages(mine->page, 0, 0);
    mine->tid = gettid();
    return NULL;
}

static void threads_each_writing_a_page(char *start, size_t len)
{
    static struct one_page pages[64];
    pthread_t threads[64];
    size_t n = len / TRUTH_PAGE;
    if (n > 64) {
        errno = ERANGE;
        truth_die("threads: at most 64");
    }
    for (size_t k = 0; k < n; k++) {
        pages[k].page = start + k * TRUTH_PAGE;
        int e = pthread_create(&threads[k], NULL, page_thread, &pages[k]);
        if (e != 0) {
            errno = e;
            truth_die("pthread_create");
        }
    }
    for (size_t k = 0; k < n; k++) {
        pthread_join(threads[k], NULL);
        char said[64];
        snprintf(said, sizeof said, "tid %ld page %p", (long)pages[k].tid, (void *)pages[k].page);
        reply(said);
    }
}

static void map_region(unsigned long npages)
{
    if (regions >= TRUTH_MAX_REGIONS || npages == 0) {
        errno = ERANGE;
        truth_die("map: no more regions, or 0 pages");
    }
    region_base[regions] = truth_mmap_anon(npages, PROT_READ | PROT_WRITE, 0);
    region_pages[regions] = npages;
    snprintf(region_name[regions], sizeof region_name[regions], "r%u",
             (unsigned)regions);
    truth_region(region_name[regions], region_base[regions], npages);
    regions++;
}

/* Waits for a child: its status as a shell gives it. */
static int status_of(pid_t child)
{
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR)
            truth_die("waitpid");
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int fork_and_touch(char *start, size_t len)
{
    pid_t child = fork();
    if (child < 0)
        truth_die("fork");
    if (child == 0) {
        truth_write_pages(start, 0, len / TRUTH_PAGE - 1);
        truth_report();
        _exit(0);
    }
    return status_of(child);
}

static int fork_and_exec(long code)
{
    char script[32];
    snprintf(script, sizeof script, "exit %ld", code);
    pid_t child = fork();
    if (child < 0)
        truth_die("fork");
    if (child == 0) {
        execl("/bin/sh", "sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    return status_of(child);
}

int main(void)
{
    static char line[256];
    if (pipe(thread_ready) != 0 || pipe(worker_done) != 0)
        truth_die("pipe");
    int n = snprintf(reply_buf, sizeof reply_buf, "pid %ld\n", (long)getpid());
    truth_write_all(1, reply_buf, (size_t)n);
    for (;;) {
        read_line(line, sizeof line);
        char *p = line;
        char *word = p;
        while (*p && *p != ' ')
            p++;
        if (*p)
            *p++ = 0;
        size_t len;
        if (strcmp(word, "thread") == 0) {
            start_thread();
            reply("ok thread");
        } else if (strcmp(word, "worker") == 0) {
            start_worker();
            snprintf(line, sizeof line, "ok worker %d", workers - 1);
            reply(line);
        } else if (strcmp(word, "work") == 0) {
            unsigned long w = next_number(&p);
            char *start = pages_of(&p, &len);
            snprintf(line, sizeof line, "tid %ld", (long)give_work(w, start, len));
            reply(line);
            reply("ok work");
        } else if (strcmp(word, "threads") == 0) {
            char *start = pages_of(&p, &len);
            threads_each_writing_a_page(start, len);
            reply("ok threads");
        } else if (strcmp(word, "fence") == 0) {
            unsigned long i = next_number(&p);
            if (i >= (unsigned long)regions)
                truth_die("fence: no such region");
            void *below = region_base[i] - TRUTH_PAGE;
            void *got = mmap(below, TRUTH_PAGE, PROT_NONE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (got == MAP_FAILED && errno != EEXIST)
                truth_die("mmap(fence)");
            reply("ok fence");
        } else if (strcmp(word, "map") == 0) {
            map_region(next_number(&p));
            snprintf(line, sizeof line, "ok map r%d", regions - 1);
            reply(line);
        } else if (strcmp(word, "touch") == 0) {
            char *start = pages_of(&p, &len);
            truth_write_pages(start, 0, len / TRUTH_PAGE - 1);
            reply("ok touch");
        } else if (strcmp(word, "discard") == 0) {
            char *start = pages_of(&p, &len);
            if (madvise(start, len, MADV_DONTNEED) != 0)
                truth_die("madvise(MADV_DONTNEED)");
            reply("ok discard");
        } else if (strcmp(word, "unmap") == 0) {
            char *start = pages_of(&p, &len);
            if (munmap(start, len) != 0)
                truth_die("munmap");
            reply("ok unmap");
        } else if (strcmp(word, "fork") == 0) {
            char *start = pages_of(&p, &len);
            int status = fork_and_touch(start, len);
            snprintf(line, sizeof line, "ok fork status %d", status);
            reply(line);
        } else if (strcmp(word, "spawn") == 0) {
            int status = fork_and_exec(next_number(&p));
            snprintf(line, sizeof line, "ok spawn status %d", status);
            reply(line);
        } else if (strcmp(word, "truth") == 0) {
            truth_report();
            reply("ok truth");
        } else if (strcmp(word, "exit") == 0) {
            _exit((int)next_number(&p));
        } else {
            errno = EINVAL;
            truth_die("unknown command");
        }
    }
}
