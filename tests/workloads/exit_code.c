/*
 * exit_code.c ARG - terminate in a chosen way (no truth output):
 *   N      : _exit(N)           (decimal number, 0..255)
 *   segv   : store through a NULL pointer -> SIGSEGV
 *   kill   : raise(SIGKILL)
 *   abort  : abort()            -> SIGABRT
 *   (none) : _exit(0)
 * Anything else: message on stderr, _exit(2).
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <signal.h>

int main(int argc, char **argv)
{
    if (argc < 2)
        _exit(0);
    const char *arg = argv[1];

    if (arg[0] >= '0' && arg[0] <= '9') {
        char *end;
        long n = strtol(arg, &end, 10);
        if (*end == 0)
            _exit((int)(n & 0xff));
    } else if (strcmp(arg, "segv") == 0) {
        /* volatile pointer and pointee: the compiler can neither drop the
         * store nor turn it into a trap (ud2 -> SIGILL) */
        volatile int *volatile p = NULL;
        *p = 42;
        _exit(3); /* not reached */
    } else if (strcmp(arg, "kill") == 0) {
        raise(SIGKILL);
        _exit(3); /* not reached */
    } else if (strcmp(arg, "abort") == 0) {
        abort();
    }
    static const char msg[] = "usage: exit_code N|segv|kill|abort\n";
    truth_write_all(2, msg, sizeof msg - 1);
    _exit(2);
}
