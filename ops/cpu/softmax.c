/* CPU kernel of softmax and log_softmax (ops/cpu/softmax.h), float32 and float64 from
 * one body. */
#include "ops/cpu/softmax.h"

#include <math.h>

#include "core/parallel.h"

#define SOFTMAX_GRAIN 32768 /* elements above which rows are split across threads */

#define T float
#define NAME(f) f##_f32
#include "ops/cpu/softmax_kernels.h"

#define T double
#define NAME(f) f##_f64
#include "ops/cpu/softmax_kernels.h"
