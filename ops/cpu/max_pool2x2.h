/* Max pooling over 2x2 windows at stride 2 without padding (every CNN's default), one
 * plane at a time in AVX-512 registers, for float32 and bfloat16 (ops/cpu/max_pool2x2.c).
 * ops/pool.c calls these where they apply and keeps its general loops for the rest. */
#ifndef TG_OPS_CPU_MAX_POOL2X2_H
#define TG_OPS_CPU_MAX_POOL2X2_H

#include <stdbool.h>
#include <stdint.h>

/* Whether this CPU runs the kernels below (AVX512-F and BW). */
bool tg_max_pool2x2_available(void);

/* y [ho, wo] and idx (flat indices into the plane) from the plane x [h, w], 2 * ho <= h,
 * 2 * wo <= w: the float32 values and ATen's indices (ties keep the first element in
 * row-major order). Returns false on a plane holding a NaN, whose outputs are then
 * unspecified: the caller's general loop redoes it (NaN wins there). */
bool tg_max_pool2x2_plane_f32(const float *x, int64_t h, int64_t w, int64_t ho, int64_t wo, float *y, int64_t *idx);
bool tg_max_pool2x2_plane_bf16(const uint16_t *x, int64_t h, int64_t w, int64_t ho, int64_t wo, uint16_t *y,
                               int64_t *idx);

/* The bfloat16 input gradient gx [h, w] of one plane: g [ho, wo] put at idx, zero
 * elsewhere, each element as the float32 scatter-add onto zeros rounded once gives it
 * (-0 becomes +0, NaN 0x7FC0). Returns false, gx unspecified, if an index is outside its
 * own window (indices that did not come from the forward above). */
bool tg_max_unpool2x2_plane_bf16(const uint16_t *g, const int64_t *idx, int64_t h, int64_t w, int64_t ho, int64_t wo,
                                 uint16_t *gx);

#endif
