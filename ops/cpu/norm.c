/* CPU kernels of batch and layer norm (ops/cpu/norm.h), float32 and float64 from one
 * body each. */
#include "ops/cpu/norm.h"

#include <math.h>

#include "core/parallel.h"
#include "core/simd.h"
#include "ops/norm_formulas.h"
#include "ops/unary_formulas.h" /* TG_RELU_OF */

#define LANES 16        /* interleaved partial sums per row (ops/cpu/norm_kernels.h) */
#define LN_ROW_BLOCK 64 /* rows per block of layer norm's column sums */

#define T float
#define NAME(f) f##_f32
#include "ops/cpu/norm_kernels.h"

#define T double
#define NAME(f) f##_f64
#include "ops/cpu/norm_kernels.h"

int64_t tg_cpu_ln_backward_workspace(int64_t R, int64_t D) { return (R + LN_ROW_BLOCK - 1) / LN_ROW_BLOCK * 2 * D; }
