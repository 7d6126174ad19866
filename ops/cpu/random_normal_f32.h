/* PyTorch's float32 normals, internal to ops/random.c: the Box-Muller step of ATen's
 * normal_fill for float32, bit for bit (see ops/cpu/random_normal_f32.c). */
#ifndef TG_OPS_CPU_RANDOM_NORMAL_F32_H
#define TG_OPS_CPU_RANDOM_NORMAL_F32_H

#include <stdint.h>

/* A function whose fmaf/fma calls should be instructions where the CPU has FMA: GCC
 * builds it twice and picks one when the program starts (2-4x faster; the same
 * numbers, as fmaf rounds once either way). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define WITH_FMA_CLONE __attribute__((target_clones("default", "fma")))
#else
#define WITH_FMA_CLONE
#endif

/* d[16 b .. 16 b + 15] for each of `blocks` blocks hold uniforms in [0, 1); each block
 * becomes 16 normals N(mean, std^2): element j and j + 8 from the pair (d[j], d[j + 8]). */
void tg_normal_blocks_f32(float *d, int64_t blocks, float mean, float std);

#endif
