/* The contended read-modify-write measurement (csrc/contend.c): it finishes, every increment
 * happens (two players, strict turns), and the figure is a positive number of nanoseconds. */
#include "../contend.h"
#include "check.h"

#include <math.h>
#include <stdio.h>

int main(void) {
    tg_test_watchdog(sanitized() ? 600 : 120);
    CHECK(tg_contended_rmw_ns(0) < 0 && tg_contended_rmw_ns(-5) < 0, "rounds < 1 is refused");
    long rounds = sanitized() ? 2000 : 100000;
    double best = INFINITY;
    for (int i = 0; i < 3; i++) {
        double ns = tg_contended_rmw_ns(rounds);
        CHECK(ns > 0 && isfinite(ns), "measurement %d gave %f", i, ns);
        if (ns < best) best = ns;
    }
    printf("ok contended RMW: %.1f ns per increment (best of 3, %ld turns each)\n", best, rounds);
    printf("contend: 1 passed, 0 failed\n");
    return 0;
}
