/* CPU kernel of fused cross entropy (ops/cpu/cross_entropy.h), float32 and float64
 * from one body. */
#include "ops/cpu/cross_entropy.h"

#include <math.h>

#include "core/parallel.h"
#include "ops/loss_formulas.h"

#define T float
#define NAME(f) f##_f32
#include "ops/cpu/cross_entropy_kernels.h"

#define T double
#define NAME(f) f##_f64
#include "ops/cpu/cross_entropy_kernels.h"
