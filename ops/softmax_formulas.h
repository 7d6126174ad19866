/* softmax's and log_softmax's per-element and per-row formulas, the one definition both
 * devices compile: ops/cpu/softmax_kernels.h's rows and ops/cuda/softmax.cu's kernel
 * call these, so the CPU tests check the arithmetic the GPU runs. A row: its max (a NaN
 * anywhere makes it NaN), the sum of exp(x - max) in double, then exp(x - max) / sum
 * as exp(x - max) * (T)(1 / sum), or x - (max + log(sum)). Each device walks the row
 * its own way (the CPU in order, a CUDA block in strides); the sum's order differs.
 *
 * A template, included once per element type with T (float, double), NAME(f) (the
 * functions' names) and TYPED(f) (the struct's name) defined: C names both f_f32 /
 * f_f64, C++ (nvcc) gives the functions one name (overloads on T) and the struct two.
 * No include guard, on purpose; the includer undefines its parameters. */

#include <math.h>
#include <stdbool.h>

#include "core/host_device.h"
#include "core/typed_libm.h"

/* The running max of a row, NaN winning (m, once NaN, stays NaN); also combines two
 * partial maxima. */
TG_HD_INLINE T NAME(tg_softmax_max)(T m, T v) { return (v > m || v != v) ? v : m; }

/* One element's exponential, summed in double. */
TG_HD_INLINE T NAME(tg_softmax_exp)(T x, T max) { return TG_EXP(x - max); }

/* What a row's outputs need from its max and sum: log_softmax's shift, softmax's scale. */
typedef struct {
    T shift, inv;
} TYPED(tg_softmax_row);

TG_HD_INLINE void NAME(tg_softmax_row_of)(T max, double sum, bool log_out, TYPED(tg_softmax_row) *r) {
    if (log_out) r->shift = max + (T)log(sum);
    else r->inv = (T)(1.0 / sum);
}

/* softmax's output from the element's exponential e (tg_softmax_exp). */
TG_HD_INLINE T NAME(tg_softmax_out)(T e, const TYPED(tg_softmax_row) *r) { return e * r->inv; }

/* log_softmax's output from the element x. */
TG_HD_INLINE T NAME(tg_log_softmax_out)(T x, const TYPED(tg_softmax_row) *r) { return x - r->shift; }
