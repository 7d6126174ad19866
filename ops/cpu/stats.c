/* CPU kernel of var, std, logsumexp and norm (ops/cpu/stats.h), float32 and float64
 * from one body. */
#include "ops/cpu/stats.h"

#include <math.h>
#include <stdbool.h>

#include "core/parallel.h"

#define STATS_GRAIN 32768 /* elements above which lines are split across threads */

#define T float
#define NAME(f) f##_f32
#include "ops/cpu/stats_kernels.h"

#define T double
#define NAME(f) f##_f64
#include "ops/cpu/stats_kernels.h"
