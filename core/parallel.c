/* tapegrad's thread pool (core/parallel.h).
 *
 * One loop at a time holds the pool (a second thread's loop runs serially). A loop is
 * published as a job: its fields in one of two slots (by generation parity) and a
 * 64-bit claim word packing the generation, the number of chunks and the next chunk
 * to take. Every participant (the caller and the workers) takes chunks with one
 * fetch_add on that word; the value it gets back says, on its own, which job and
 * which chunk are its, so a worker that wakes late can never run a chunk of the wrong
 * job: a chunk index below the job's chunk count means the job is still running (its
 * slot cannot be reused before that chunk is done). The caller takes chunks too, so
 * when the workers are asleep or descheduled (a busy machine) it does the work itself
 * and only waits for chunks already started.
 *
 * Waiting: workers watch `epoch` (incremented per job), spinning for spin_ns and then
 * sleeping in futex_wait; the caller wakes them only if some sleep. The caller waits
 * for the job's last chunk the same way, on the slot's `remaining` count.
 *
 * Spinning pays on an idle machine (a futex wake costs tens of microseconds per loop)
 * and costs on a busy one: a spinning thread burns the time slice its own process's
 * other thread needs, and spins for a thread that is not running. So the caller counts
 * its involuntary context switches (the kernel took its CPU for another runnable
 * thread) over windows of at least WINDOW_NS; after a window with BUSY_SWITCH_RATE a
 * second or more, the machine is taken as oversubscribed and every wait of the pool
 * sleeps at once, until a window with under QUIET_SWITCH_RATE. (Measured on an idle
 * 2-core machine: 0 to 2 per 50 ms window; with two CPU-bound processes beside ours, 30
 * to 70 while we spin and 1 to 20 while we do not: hence the two thresholds.) */
#include "core/parallel.h"

#include "core/denormal_bits.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"

#define MAX_THREADS 256
#define CHUNKS_PER_THREAD 4 /* more chunks than threads: a late or descheduled thread's share is taken by others */

/* The claim word: generation (24 bits) | chunk count (20) | next chunk (20). The next
 * field counts past the chunk count by at most two failed claims per participant. */
#define NEXT_BITS 20
#define COUNT_SHIFT NEXT_BITS
#define GEN_SHIFT (2 * NEXT_BITS)
#define FIELD_MASK ((UINT64_C(1) << NEXT_BITS) - 1)

typedef struct {
    tg_parallel_fn fn;
    void *ctx;
    int64_t q, r;               /* n split into count chunks: chunk i starts at i*q + min(i, r), q or q+1 long */
    unsigned flush_bits;        /* the caller's subnormal flushing (core/denormal.h), for its chunks */
    _Atomic uint32_t remaining; /* chunks not yet finished (a futex word) */
    _Atomic uint32_t caller_waiting;
    const char *_Atomic failure; /* the first tg_kernel_fail of the job's chunks */
} job_slot;

static job_slot slots[2];
static _Atomic uint64_t claim_word;
static _Atomic uint32_t epoch;    /* incremented per published job and at shutdown (a futex word) */
static _Atomic uint32_t sleepers; /* workers in futex_wait on epoch */
static _Atomic int shutting_down;
static atomic_flag pool_busy = ATOMIC_FLAG_INIT;
static uint32_t generation; /* written only by the pool's holder */

static _Atomic int num_threads; /* 0 until first use */
static int64_t spin_ns = 50 * 1000;
#define WINDOW_NS (50 * 1000 * 1000)
#define BUSY_SWITCH_RATE 100 /* a second */
#define QUIET_SWITCH_RATE 10
static _Atomic bool oversubscribed; /* set and cleared by the pool's holder, read by the workers */
static pthread_t workers[MAX_THREADS];
static int num_workers; /* started; changed only by the pool's holder (and at exit / fork) */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static _Thread_local bool in_region;
static _Thread_local const char *kernel_failure; /* tg_kernel_fail on this thread, not yet handed on */

void tg_kernel_fail(const char *reason) {
    if (!kernel_failure) kernel_failure = reason;
}

const char *tg_kernel_failure(void) { return kernel_failure; }

const char *tg_kernel_failure_take(void) {
    const char *reason = kernel_failure;
    kernel_failure = NULL;
    return reason;
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val) {
    return syscall(SYS_futex, (uint32_t *)addr, op, val, NULL, NULL, 0);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins while *word == `old` (keep_while_equal) or while *word != 0 (otherwise), until
 * the spin budget is spent (none while the machine is oversubscribed). Returns *word's
 * last value. */
static uint32_t spin_wait(_Atomic uint32_t *word, uint32_t old, bool keep_while_equal) {
#define SPIN_ON(v) (keep_while_equal ? (v) == old : (v) != 0)
    uint32_t v = atomic_load_explicit(word, memory_order_acquire);
    if (!SPIN_ON(v) || spin_ns == 0 || atomic_load_explicit(&oversubscribed, memory_order_relaxed)) return v;
    int64_t deadline = now_ns() + spin_ns;
    for (int k = 1; SPIN_ON(v = atomic_load_explicit(word, memory_order_acquire)); k++) {
        cpu_relax();
        if ((k & 63) == 0 && now_ns() >= deadline) break;
    }
    return v;
#undef SPIN_ON
}

/* Called by the pool's holder before each loop: at the end of the calling thread's
 * window, whether it was preempted often enough in it to stop spinning (see above). */
static void check_oversubscribed(void) {
    static _Thread_local int64_t window_start;
    static _Thread_local long switches_at_start;
    int64_t t = now_ns();
    if (window_start != 0 && t - window_start < WINDOW_NS) return;
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0) return;
    if (window_start != 0) {
        int64_t per_second = (ru.ru_nivcsw - switches_at_start) * 1000000000 / (t - window_start);
        bool was = atomic_load_explicit(&oversubscribed, memory_order_relaxed);
        atomic_store_explicit(&oversubscribed, per_second >= (was ? QUIET_SWITCH_RATE : BUSY_SWITCH_RATE),
                              memory_order_relaxed);
    }
    switches_at_start = ru.ru_nivcsw;
    window_start = t;
}

/* A positive integer from the environment, or 0. */
static int env_threads(const char *name) {
    const char *s = getenv(name);
    if (!s || !*s) return 0;
    char *end;
    long v = strtol(s, &end, 10); /* OMP_NUM_THREADS may be a list ("4,2"): its first value */
    if (end == s || v < 1) return 0;
    return v > MAX_THREADS ? MAX_THREADS : (int)v;
}

static int affinity_threads(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n > MAX_THREADS ? MAX_THREADS : n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}

static void stop_workers(void);

static void after_fork_child(void) {
    /* The workers did not come along; start new ones on the next loop. */
    num_workers = 0;
    atomic_store(&sleepers, 0);
    atomic_flag_clear(&pool_busy);
}

static void init(void) {
    int n = env_threads("TG_NUM_THREADS");
    if (!n) n = env_threads("OMP_NUM_THREADS");
    if (!n) n = affinity_threads();
    int expected = 0; /* tg_set_num_threads before first use wins */
    atomic_compare_exchange_strong(&num_threads, &expected, n);
    const char *spin = getenv("TG_SPIN_US");
    if (spin && *spin) {
        long us = strtol(spin, NULL, 10);
        if (us >= 0 && us <= 1000000) spin_ns = us * 1000;
    }
    atexit(stop_workers);
    pthread_atfork(NULL, NULL, after_fork_child);
}

int tg_get_num_threads(void) {
    pthread_once(&init_once, init);
    return atomic_load_explicit(&num_threads, memory_order_relaxed);
}

void tg_set_num_threads(int n) {
    if (n < 1) {
        tg_error("tg_set_num_threads: the number of threads must be positive, got %d", n);
        return;
    }
    pthread_once(&init_once, init);
    atomic_store(&num_threads, n > MAX_THREADS ? MAX_THREADS : n);
}

bool tg_in_parallel_region(void) { return in_region; }

bool tg_parallel_oversubscribed(void) { return atomic_load(&oversubscribed); }

/* Runs chunks of the current job until none is left. */
static void take_chunks(void) {
    for (;;) {
        uint64_t c = atomic_fetch_add_explicit(&claim_word, 1, memory_order_acq_rel);
        uint64_t count = (c >> COUNT_SHIFT) & FIELD_MASK, i = c & FIELD_MASK;
        if (i >= count) return;
        job_slot *s = &slots[(c >> GEN_SHIFT) & 1];
        tg_set_flush_bits(s->flush_bits); /* a register compare when unchanged */
        int64_t lo = (int64_t)i, begin = lo * s->q + (lo < s->r ? lo : s->r);
        int64_t end = begin + s->q + (lo < s->r ? 1 : 0);
        s->fn(begin, end, s->ctx);
        if (kernel_failure) { /* handed to the loop's caller through the slot */
            const char *none = NULL;
            atomic_compare_exchange_strong(&s->failure, &none, kernel_failure);
            kernel_failure = NULL;
        }
        if (atomic_fetch_sub(&s->remaining, 1) == 1 && atomic_load(&s->caller_waiting))
            futex(&s->remaining, FUTEX_WAKE_PRIVATE, 1);
    }
}

typedef struct {
    int id;
    uint32_t seen; /* the epoch when the worker was created: any later job or the shutdown wakes it */
} worker_start;

static worker_start starts[MAX_THREADS];

static void *worker_main(void *arg) {
    const worker_start *start = arg;
    int id = start->id;
    uint32_t seen = start->seen; /* not read here: a worker that starts late must still see the change */
    in_region = true;            /* loops called from a chunk run serially */
    for (;;) {
        if (atomic_load(&shutting_down)) break;
        uint32_t e = spin_wait(&epoch, seen, true);
        while (e == seen) {
            atomic_fetch_add(&sleepers, 1);
            futex(&epoch, FUTEX_WAIT_PRIVATE, seen);
            atomic_fetch_sub(&sleepers, 1);
            e = atomic_load(&epoch);
        }
        seen = e;
        if (atomic_load(&shutting_down)) break;
        if (id < atomic_load_explicit(&num_threads, memory_order_relaxed)) take_chunks();
    }
    return NULL;
}

/* Starts workers 1 .. want (called by the pool's holder). */
static void start_workers(int want) {
    if (want >= MAX_THREADS) want = MAX_THREADS - 1;
    if (num_workers >= want) return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals go to the program's own threads */
    while (num_workers < want) {
        worker_start *st = &starts[num_workers];
        st->id = num_workers + 1;
        st->seen = atomic_load(&epoch);
        if (pthread_create(&workers[num_workers], NULL, worker_main, st) != 0) break; /* run with the workers we have */
        num_workers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void stop_workers(void) {
    /* At exit: wait for a loop in progress on another thread, then end and join the workers. */
    if (in_region) return; /* exit() from inside a loop: leave the workers be */
    while (atomic_flag_test_and_set(&pool_busy)) sched_yield();
    atomic_store(&shutting_down, 1);
    atomic_fetch_add(&epoch, 1);
    futex(&epoch, FUTEX_WAKE_PRIVATE, INT_MAX);
    for (int i = 0; i < num_workers; i++) pthread_join(workers[i], NULL);
    num_workers = 0;
    /* The pool stays held: a loop run by an exit handler after this one runs serially. */
}

void tg_parallel_for(int64_t n, int64_t grain, tg_parallel_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int threads = tg_get_num_threads();
    if (threads <= 1 || n <= grain || in_region || atomic_flag_test_and_set(&pool_busy)) {
        fn(0, n, ctx);
        return;
    }
    start_workers(threads - 1);
    check_oversubscribed();
    if (num_workers == 0) {
        atomic_flag_clear(&pool_busy);
        fn(0, n, ctx);
        return;
    }
    int64_t count = (n + grain - 1) / grain, most = (int64_t)threads * CHUNKS_PER_THREAD;
    if (count > most) count = most;
    generation++;
    job_slot *s = &slots[generation & 1];
    s->fn = fn;
    s->ctx = ctx;
    s->flush_bits = tg_flush_bits();
    s->q = n / count;
    s->r = n % count;
    atomic_store_explicit(&s->remaining, (uint32_t)count, memory_order_relaxed);
    atomic_store_explicit(&s->caller_waiting, 0, memory_order_relaxed);
    atomic_store_explicit(&s->failure, NULL, memory_order_relaxed);
    atomic_store_explicit(&claim_word,
                          ((uint64_t)(generation & 0xffffff) << GEN_SHIFT) | ((uint64_t)count << COUNT_SHIFT),
                          memory_order_release);
    atomic_fetch_add(&epoch, 1);
    if (atomic_load(&sleepers) > 0) futex(&epoch, FUTEX_WAKE_PRIVATE, INT_MAX);

    in_region = true;
    take_chunks();
    /* Wait for the chunks others started: spin, then sleep until the last one wakes us. */
    uint32_t left = spin_wait(&s->remaining, 0, false);
    while (left) {
        atomic_store(&s->caller_waiting, 1);
        if ((left = atomic_load(&s->remaining)) == 0) break;
        futex(&s->remaining, FUTEX_WAIT_PRIVATE, left);
        left = atomic_load(&s->remaining);
    }
    in_region = false;
    const char *failure = atomic_load(&s->failure); /* before the slot can be reused */
    if (failure) tg_kernel_fail(failure);
    atomic_flag_clear(&pool_busy);
}
