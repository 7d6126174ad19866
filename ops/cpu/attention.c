/* The fused attention's CPU kernels, float32 and float64 (ops/cpu/attention.h): one
 * body, ops/cpu/attention_kernel.h, included once per element type. */
#include "ops/cpu/attention.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "core/parallel.h"
#include "ops/cpu/gemm.h"

#define ATT_T float
#define ATT_SFX f32
#define ATT_GEMM tg_gemm_f32
#define ATT_EXP expf
#include "ops/cpu/attention_kernel.h"
#undef ATT_T
#undef ATT_SFX
#undef ATT_GEMM
#undef ATT_EXP

#define ATT_T double
#define ATT_SFX f64
#define ATT_GEMM tg_gemm_f64
#define ATT_EXP exp
#include "ops/cpu/attention_kernel.h"
#undef ATT_T
#undef ATT_SFX
#undef ATT_GEMM
#undef ATT_EXP
