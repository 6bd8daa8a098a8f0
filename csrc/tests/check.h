/* Shared by the C stress tests: a CHECK that fails loudly, the sanitizer switch, and a
 * watchdog that turns a hang into a failure. */
#ifndef TG_TEST_CHECK_H
#define TG_TEST_CHECK_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);                 \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, "\n");                                                            \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

/* Set by the Makefile for sanitizer runs: smaller sizes, longer time limits. */
static inline int sanitized(void) { return getenv("TASKGRAPH_SANITIZED") != NULL; }

static void tg_test_on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAILED: test timed out (hang)\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(2);
}

/* Fails the whole test program if it runs longer than `seconds`. */
static inline void tg_test_watchdog(unsigned seconds) {
    signal(SIGALRM, tg_test_on_alarm);
    alarm(seconds);
}

#endif
