/* The depthwise convolution's CPU kernels (ops/cpu/depthwise_conv.h): one body for float32
 * and float64 operands, ops/cpu/depthwise_conv_kernels.h, each summing in its own type (as
 * the GEMM path does). */
#include "ops/cpu/depthwise_conv.h"

#include "core/parallel.h"
#include "core/simd.h"
#include "ops/conv_index.h"

/* The weight gradient's blocks: up to DW_TAPS taps by up to DW_COLS output columns of
 * accumulators on the stack (32 KiB of doubles). */
enum { DW_TAPS = 16, DW_COLS = 256 };

#define T float
#define NAME(f) f##_f32
#include "ops/cpu/depthwise_conv_kernels.h"

#define T double
#define NAME(f) f##_f64
#include "ops/cpu/depthwise_conv_kernels.h"
