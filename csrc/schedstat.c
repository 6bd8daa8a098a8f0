/* A thread's scheduler statistics: see schedstat.h. */
#define _GNU_SOURCE /* O_CLOEXEC */
#include "schedstat.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int tg_schedstat_read(const char *path, int64_t *on_cpu, int64_t *queued) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[96];
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k <= 0) return 0;
    buf[k] = 0;
    long long a, b;
    if (sscanf(buf, "%lld %lld", &a, &b) != 2 || a < 0 || b < 0) return 0;
    *on_cpu = (int64_t)a;
    *queued = (int64_t)b;
    return 1;
}
