/* CPU kernels of sum (ops/cpu/sum.h), every dtype from one body. */
#include "ops/cpu/sum.h"

#include <stdbool.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/lowp.h"
#include "core/parallel.h"
#include "core/simd.h"

#define AS_IS(v) (v)
#define TO_FLOAT(a) ((float)(a))
#define TO_BF16(a) tg_float_to_bf16_bits((float)(a))
#define TO_HALF(a) tg_float_to_half_bits((float)(a))
#define SUM_STRIP 32 /* columns summed together in registers (ops/cpu/sum_kernels.h) */

#define T float
#define ACC double
#define LOAD AS_IS
#define STORE TO_FLOAT
#define NAME(f) f##_f32
#include "ops/cpu/sum_kernels.h"

#define T double
#define ACC double
#define LOAD AS_IS
#define STORE AS_IS
#define NAME(f) f##_f64
#include "ops/cpu/sum_kernels.h"

#define T int64_t
#define ACC int64_t
#define LOAD AS_IS
#define STORE AS_IS
#define NAME(f) f##_i64
#include "ops/cpu/sum_kernels.h"

#define T uint16_t
#define ACC double
#define LOAD tg_bf16_bits_to_float
#define STORE TO_BF16
#define NAME(f) f##_bf16
#include "ops/cpu/sum_kernels.h"

#define T uint16_t
#define ACC double
#define LOAD tg_half_bits_to_float
#define STORE TO_HALF
#define NAME(f) f##_f16
#include "ops/cpu/sum_kernels.h"

/* A full sum of a long contiguous float32 run: partial sums (in double) of fixed blocks
 * of TG_REDUCE_GRAIN elements, the blocks split across threads, the partials added in
 * block order. The same blocks for any number of threads: the same result. */
typedef struct {
    const float *x;
    int64_t n;
    double *partial;
} sum_all_job;

static void sum_all_blocks(int64_t b0, int64_t b1, void *arg) {
    const sum_all_job *j = arg;
    for (int64_t b = b0; b < b1; b++) {
        int64_t i0 = b * TG_REDUCE_GRAIN, i1 = i0 + TG_REDUCE_GRAIN < j->n ? i0 + TG_REDUCE_GRAIN : j->n;
        double total = 0;
        for (int64_t i = i0; i < i1; i++) total += j->x[i];
        j->partial[b] = total;
    }
}

double tg_cpu_sum_all_f32(const float *x, int64_t n) {
    int64_t blocks = (n + TG_REDUCE_GRAIN - 1) / TG_REDUCE_GRAIN;
    if (blocks <= 1) {
        double total = 0;
        for (int64_t i = 0; i < n; i++) total += x[i];
        return total;
    }
    double stack[256], *partial = blocks <= 256 ? stack : malloc((size_t)blocks * sizeof(double));
    TG_ASSERT(partial != NULL);
    sum_all_job j = {x, n, partial};
    tg_parallel_for(blocks, 1, sum_all_blocks, &j);
    double total = 0;
    for (int64_t b = 0; b < blocks; b++) total += partial[b];
    if (partial != stack) free(partial);
    return total;
}
