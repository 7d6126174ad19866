/* Threads: how many CPU threads tapegrad's kernels use, and the loop that splits a
 * kernel's work across them (tapegrad's own thread pool; no OpenMP).
 *
 * The number of threads counts the calling thread. By default it is the number of
 * CPUs the process may run on (its affinity mask, so `taskset -c 0 prog` gets 1),
 * or the value of TG_NUM_THREADS, or else OMP_NUM_THREADS, when set: the user's
 * environment wins over the default, and tg_set_num_threads wins over both, as
 * torch.set_num_threads does.
 *
 * The pool's worker threads are started on the first parallel loop. Between loops a
 * worker spins for a few tens of microseconds (TG_SPIN_US, default 50) in case the next
 * loop comes right away, then sleeps on a futex: an idle pool costs other processes
 * nothing, and on a busy machine the calling thread takes over the chunks that a
 * descheduled worker has not started. While the machine is oversubscribed (the calling
 * thread keeps being preempted: other processes want the CPUs) nothing spins: a
 * spinning thread would take CPU time from its own process's working thread. Workers
 * end cleanly at process exit. */
#ifndef TG_CORE_PARALLEL_H
#define TG_CORE_PARALLEL_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the number of threads CPU kernels use from now on (1: everything on the calling
 * thread). At most 256; more than the machine's cores is allowed. n < 1 is an error
 * (recorded, the setting is unchanged). Process-wide, as torch.set_num_threads. */
void tg_set_num_threads(int n);

/* The number of threads CPU kernels use (>= 1), counting the calling thread. */
int tg_get_num_threads(void);

/* fn is called on [begin, end) ranges that together cover [0, n) exactly once, in no
 * particular order and possibly at the same time on several threads, with ctx as
 * given. `grain` is the smallest range worth a thread: n <= grain, one thread, a call
 * from inside another parallel loop (nested) or while another thread's loop holds the
 * pool runs fn(0, n, ctx) on the calling thread, without any synchronisation. Returns
 * when every range is done. The ranges differ with the thread count and the pool's
 * availability, so work whose result depends on how it is cut (a float sum) should
 * loop over fixed blocks of its own, as the reductions do (ops/reduce.c). fn must not
 * allocate tensors or record errors (it may run on a worker thread). For custom CPU
 * kernels as for the built-in ones. */
typedef void (*tg_parallel_fn)(int64_t begin, int64_t end, void *ctx);
void tg_parallel_for(int64_t n, int64_t grain, tg_parallel_fn fn, void *ctx);

/* A kernel that cannot finish (a work buffer it could not allocate) reports it here, on
 * whatever thread it runs, and returns; the op that called the kernel then fails with
 * "<op>: <reason>" (autograd/function.c after a forward, autograd/engine.c after a
 * backward), so an allocation that fails anywhere under a tapegrad call ends as that
 * call's error. A failure in a chunk of tg_parallel_for reaches the loop's caller; the
 * first reason wins. `reason` must outlive the call (a string literal). */
void tg_kernel_fail(const char *reason);
/* The calling thread's pending kernel failure (NULL if none). An op notes whether one
 * was pending before its kernels ran (then it is an enclosing op's to report) and
 * takes the one they raised: tg_kernel_failure_take returns it and clears it. */
const char *tg_kernel_failure(void);
const char *tg_kernel_failure_take(void);

/* Whether the pool last found the machine oversubscribed (measured by the threads that
 * call tg_parallel_for, over windows of 50 ms), so that its waits sleep at once instead
 * of spinning. For diagnostics and tests. */
bool tg_parallel_oversubscribed(void);

/* True inside fn of a tg_parallel_for that went parallel (on any of its threads). */
bool tg_in_parallel_region(void);

#ifdef __cplusplus
}
#endif
#endif
