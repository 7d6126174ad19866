/* CPU kernel of max/min/argmax/argmin (ops/cpu/extreme.h), every dtype from one body. */
#include "ops/cpu/extreme.h"

#include "core/parallel.h"

#define EXTREME_GRAIN 32768 /* elements above which lines are split across threads */

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtautological-compare" /* v != v is the NaN test; integers never pass it */
#define T float
#define NAME(f) f##_f32
#include "ops/cpu/extreme_kernels.h"

#define T double
#define NAME(f) f##_f64
#include "ops/cpu/extreme_kernels.h"

#define T int64_t
#define NAME(f) f##_i64
#include "ops/cpu/extreme_kernels.h"

#define T int32_t
#define NAME(f) f##_i32
#include "ops/cpu/extreme_kernels.h"

#define T uint8_t
#define NAME(f) f##_u8
#include "ops/cpu/extreme_kernels.h"
#pragma GCC diagnostic pop
