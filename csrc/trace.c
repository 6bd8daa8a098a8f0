/* Execution-trace buffers: see trace.h. */
#define _POSIX_C_SOURCE 200809L
#include "trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHUNK 4096     /* records per chunk (256 KiB): appends never move a record */
#define SPARE_MAX 64   /* chunks kept for the next trace (16 MiB): no fresh pages to fault in */

_Static_assert(sizeof(tg_trace_rec) == 64, "tg_trace_rec must match tg_trace_rec_format()");

struct tg_tracebuf {
    tg_tracebuf_head head;   /* first: tg_tracebuf_append reads it through a cast */
    tg_trace_rec **chunks;
    int64_t nchunks, capchunks;
    int64_t dropped; /* records lost to out-of-memory */
    uint64_t *ids;
    int64_t nids, capids;
};

/* Chunks of freed buffers, reused by later ones: tracing the same workload again touches
 * memory that is already mapped. Taken and given back once per 4096 records. */
static pthread_mutex_t spare_mu = PTHREAD_MUTEX_INITIALIZER;
static tg_trace_rec *spare[SPARE_MAX];
static int nspare;

static tg_trace_rec *chunk_new(void) {
    tg_trace_rec *c = NULL;
    pthread_mutex_lock(&spare_mu);
    if (nspare) c = spare[--nspare];
    pthread_mutex_unlock(&spare_mu);
    return c ? c : malloc(sizeof(tg_trace_rec) * CHUNK);
}

static void chunk_free(tg_trace_rec *c) {
    pthread_mutex_lock(&spare_mu);
    if (nspare < SPARE_MAX) {
        spare[nspare++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&spare_mu);
    free(c);
}

tg_tracebuf *tg_tracebuf_new(void) { return calloc(1, sizeof(tg_tracebuf)); }

void tg_tracebuf_free(tg_tracebuf *b) {
    if (!b) return;
    for (int64_t i = 0; i < b->nchunks; i++) chunk_free(b->chunks[i]);
    free(b->chunks);
    free(b->ids);
    free(b);
}

/* Records appended: the full chunks and the used part of the current one. */
static int64_t count_of(const tg_tracebuf *b) {
    if (!b->nchunks) return 0;
    return (b->nchunks - 1) * CHUNK + (b->head.next - b->chunks[b->nchunks - 1]);
}

tg_trace_rec *tg_tracebuf_append_slow(tg_tracebuf *b) {
    if (b->nchunks == b->capchunks) {
        int64_t cap = b->capchunks ? b->capchunks * 2 : 16;
        tg_trace_rec **nc = realloc(b->chunks, sizeof(*nc) * (size_t)cap);
        if (!nc) { b->dropped++; return NULL; }
        b->chunks = nc;
        b->capchunks = cap;
    }
    tg_trace_rec *c = chunk_new();
    if (!c) { b->dropped++; return NULL; }
    b->chunks[b->nchunks++] = c;
    b->head.next = c + 1;
    b->head.end = c + CHUNK;
    return c;
}

int tg_tracebuf_add_ids(tg_tracebuf *b, const uint64_t *ids, uint32_t n, uint32_t *off) {
    if (b->nids + n > UINT32_MAX) return -1;
    if (b->nids + n > b->capids) {
        int64_t cap = b->capids ? b->capids * 2 : 1024;
        while (cap < b->nids + n) cap *= 2;
        uint64_t *ni = realloc(b->ids, sizeof(uint64_t) * (size_t)cap);
        if (!ni) return -1;
        b->ids = ni;
        b->capids = cap;
    }
    memcpy(b->ids + b->nids, ids, sizeof(uint64_t) * n);
    *off = (uint32_t)b->nids;
    b->nids += n;
    return 0;
}

int64_t tg_tracebuf_count(const tg_tracebuf *b) { return count_of(b); }
int64_t tg_tracebuf_dropped(const tg_tracebuf *b) { return b->dropped; }
int64_t tg_tracebuf_nids(const tg_tracebuf *b) { return b->nids; }

int64_t tg_tracebuf_copy(const tg_tracebuf *b, int64_t first, int64_t n, void *dst) {
    int64_t count = count_of(b);
    if (first < 0 || first >= count || n <= 0) return 0;
    if (first + n > count) n = count - first;
    char *out = dst;
    for (int64_t k = first; k < first + n;) {
        int64_t i = k % CHUNK, take = CHUNK - i;
        if (take > first + n - k) take = first + n - k;
        memcpy(out, &b->chunks[k / CHUNK][i], sizeof(tg_trace_rec) * (size_t)take);
        out += sizeof(tg_trace_rec) * (size_t)take;
        k += take;
    }
    return n;
}

void tg_tracebuf_copy_ids(const tg_tracebuf *b, uint64_t *dst) {
    if (b->nids) memcpy(dst, b->ids, sizeof(uint64_t) * (size_t)b->nids);
}

const char *tg_trace_rec_format(void) { return "<QQqqqIIiiiBBH"; }
int tg_trace_rec_size(void) { return (int)sizeof(tg_trace_rec); }
const char *tg_trace_rec_fields(void) {
    return "id parent start end own deps_off ndeps name error worker flags state attempt";
}

int tg_clock_uses_tsc;
static int64_t origin_ticks, origin_ns;

int64_t tg_clock_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The TSC is used only where the kernel itself trusts it for timekeeping (its clocksource is
 * "tsc", which it picks only for an invariant TSC synchronised across CPUs). */
static int tsc_is_the_clocksource(void) {
#if defined(__x86_64__)
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (!f) return 0;
    char buf[32] = {0};
    int ok = fgets(buf, sizeof buf, f) != NULL && strncmp(buf, "tsc", 3) == 0 &&
             (buf[3] == '\n' || buf[3] == '\0');
    fclose(f);
    return ok;
#else
    return 0;
#endif
}

void tg_clock_init(void) {
    tg_clock_uses_tsc = tsc_is_the_clocksource();
    tg_clock_pair(&origin_ticks, &origin_ns);
}

int tg_clock_tsc(void) { return tg_clock_uses_tsc; }

void tg_clock_origin(int64_t *ticks, int64_t *ns) {
    *ticks = origin_ticks;
    *ns = origin_ns;
}

void tg_clock_pair(int64_t *ticks, int64_t *ns) {
    /* ns read between two tick reads, paired with their midpoint. */
    int64_t a = tg_clock_ticks(), n = tg_clock_mono_ns(), b = tg_clock_ticks();
    *ticks = a + (b - a) / 2;
    *ns = n;
}

_Atomic int64_t tg_gc_ticks_total; /* read inline by tg_trace_gc_ticks (trace.h) */
static int64_t gc_started;       /* written and read by the collecting thread only */

void tg_trace_gc_phase(int starting) {
    if (starting) {
        gc_started = tg_clock_ticks();
    } else if (gc_started) {
        /* Relaxed: a running total; a collection stops every thread, so the recorders read
         * it before or after a collection, never during one. */
        atomic_fetch_add_explicit(&tg_gc_ticks_total, tg_clock_ticks() - gc_started, memory_order_relaxed);
        gc_started = 0;
    }
}
