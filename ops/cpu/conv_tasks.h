/* What the direct (ops/cpu/direct_conv.c) and Winograd (ops/cpu/winograd_conv.c) CPU
 * convolution kernels share: whether this CPU runs their AVX2 + FMA code, and how a call
 * splits its items (images, tiles, blocks) into one task per thread, each with a workspace
 * of its own that the caller sized with the same task count. */
#ifndef TG_OPS_CPU_CONV_TASKS_H
#define TG_OPS_CPU_CONV_TASKS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/parallel.h"

static inline bool tg_conv_cpu_has_avx2_fma(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

/* The number of tasks a call splits into: one per thread, none idle for want of items. */
static inline int64_t tg_conv_task_count(int64_t items) {
    int64_t nt = tg_in_parallel_region() ? 1 : tg_get_num_threads();
    return items < nt ? (items > 0 ? items : 1) : nt;
}
/* Task t's items [*i0, *i1) of `items` split evenly over `tasks`. */
static inline void tg_conv_task_range(int64_t t, int64_t tasks, int64_t items, int64_t *i0, int64_t *i1) {
    *i0 = items * t / tasks;
    *i1 = items * (t + 1) / tasks;
}

#endif
