/* The module's state, the per-thread state and the fault sites (state.h). */
#include "state.h"

#include <sched.h>

tg_globals TG;
_Thread_local tg_tls TG_TLS;
static _Atomic uint64_t thread_numbers; /* threads that named a node so far */

uint64_t tg_next_node_id(void) {
    tg_tls *tls = &TG_TLS;
    if (!tls->thread_no)
        /* Relaxed: a unique number is all that is needed. */
        tls->thread_no = atomic_fetch_add_explicit(&thread_numbers, 1, memory_order_relaxed) + 1;
    return ((tls->thread_no - 1) << 40) | ++tls->seq;
}

/* How much of a thread's C stack is kept in reserve below the deepest nested join: a
 * quarter of it, at least 64 KiB and at most 1 MiB (one more level of a task calling a task
 * takes a few KiB; the reserve also covers the error's own unwinding). */
#define STACK_RESERVE_MIN (64 * 1024)
#define STACK_RESERVE_MAX (1024 * 1024)

const char *tg_c_stack_limit(void) {
    tg_c_stack_low(); /* learns the bounds once */
    tg_tls *tls = &TG_TLS;
    return tls->stack_known == 1 ? tls->stack_low : NULL;
}

int tg_c_stack_low(void) {
    tg_tls *tls = &TG_TLS;
    if (!tls->stack_known) {
        pthread_attr_t a;
        void *base = NULL;
        size_t size = 0;
        tls->stack_known = -1;
        if (pthread_getattr_np(pthread_self(), &a) == 0) {
            if (pthread_attr_getstack(&a, &base, &size) == 0 && base && size) {
                size_t reserve = size / 4;
                if (reserve < STACK_RESERVE_MIN) reserve = STACK_RESERVE_MIN;
                if (reserve > STACK_RESERVE_MAX) reserve = STACK_RESERVE_MAX;
                if (reserve < size) {
                    tls->stack_low = (char *)base + reserve; /* stacks grow down */
                    tls->stack_known = 1;
                }
            }
            pthread_attr_destroy(&a);
        }
    }
    /* The frame address, not a local's: under AddressSanitizer locals may live on a fake
     * stack on the heap. */
    return tls->stack_known == 1 && (char *)__builtin_frame_address(0) < tls->stack_low;
}

PyObject *tg_memory_error(void) { return Py_NewRef(TG.memory_error); }

void tg_lock_detached(pthread_mutex_t *mu) {
    if (pthread_mutex_trylock(mu) == 0) return;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(mu);
    Py_END_ALLOW_THREADS
}

#ifdef TG_FAULTS
_Atomic int tg_faults_armed;
static _Atomic int64_t fault_countdown[TG_FAULT_NSITES];

int tg_fault_hit(tg_fault_site site) {
    /* Relaxed: a countdown armed by a test; the thread that takes it to 0 fails once. */
    int64_t left = atomic_load_explicit(&fault_countdown[site], memory_order_relaxed);
    while (left > 0) {
        if (atomic_compare_exchange_weak_explicit(&fault_countdown[site], &left, left - 1,
                                                  memory_order_relaxed, memory_order_relaxed))
            return left == 1;
    }
    return 0;
}

PyObject *tg_py_arm_fault(PyObject *mod, PyObject *args) {
    (void)mod;
    int site;
    long long n;
    if (!PyArg_ParseTuple(args, "iL:_arm_fault", &site, &n)) return NULL;
    if (site < 0 || site >= TG_FAULT_NSITES) {
        PyErr_Format(PyExc_ValueError, "no fault site %d", site);
        return NULL;
    }
    /* Relaxed: the test arms, then runs the code under test on this or a started thread. */
    atomic_store_explicit(&fault_countdown[site], n, memory_order_relaxed);
    int any = 0;
    for (int i = 0; i < TG_FAULT_NSITES; i++)
        any |= atomic_load_explicit(&fault_countdown[i], memory_order_relaxed) > 0;
    atomic_store_explicit(&tg_faults_armed, any, memory_order_relaxed);
    Py_RETURN_NONE;
}
#endif
