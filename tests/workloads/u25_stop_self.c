/*
 * u25_stop_self.c - issue 25: a stopped process keeps a fatal signal pending, as untraced.
 *
 * Stops itself (SIGSTOP); once continued, prints "continued" and exits 0. A SIGTERM that comes
 * while it is stopped stays pending until SIGCONT, then ends it (status 143).
 */
#include <signal.h>
#include <stdio.h>

int main(void)
{
    raise(SIGSTOP);
    printf("continued\n");
    return 0;
}
