/* CPU kernels of the 3x3 stride-1 convolution by Winograd's minimal filtering F(4x4, 3x3)
 * (Lavin and Gray 2015; issue 32): the ResNets' 3x3 convolutions in float32 on a CPU with
 * AVX2 and FMA, forward, input gradient and weight gradient.
 *
 * Each 4x4 block of outputs (a tile) is A^T [(G g G^T) . (B^T d B)] A for its 6x6 input
 * patch d and every 3x3 filter g: summed over input channels, the 36 elementwise products
 * become 36 matrix products [tiles x C] x [C x Co], 36 multiplies per tile and channel pair
 * where a direct convolution needs 144 (4x fewer). The transforms are additions and small
 * constant factors (B: up to 5, A: up to 8, G: 1/4 to 1/24).
 *
 * - Forward: blocks of tile rows are transformed into V [36][tiles][C], multiplied by the
 *   transformed weights U [36][C][Co] into M [36][tiles][Co], and M is transformed back.
 *   A tile's values are vectors of 8 channels (a tile row's input rows are transposed to
 *   channels last first, its output rows back after), so every transform and product runs
 *   on full vectors whatever the image's width.
 * - Input gradient: the forward convolution of the gradient padded by 2 - pH, 2 - pW, with
 *   the weight's channels swapped and its taps reversed (as ops/cpu/direct_conv.h).
 * - Weight gradient: dU [36][C][Co] = sum over tiles of V (A dY A^T), then G^T dU G.
 *
 * Every result element is summed by one thread in a fixed order (over channels, or the
 * weight gradient's over tiles in order), so results do not depend on the thread count.
 * They differ from the direct and GEMM paths' by more than those differ from each other:
 * the transforms' factors round, to about 1e-5 of a sum's spread where float32 sums in order
 * reach 1e-6 (tests/ops/winograd_conv_test.cc), the price of the 4x fewer multiplies that
 * oneDNN's and NNPACK's Winograd convolutions pay too. */
#ifndef TG_OPS_CPU_WINOGRAD_CONV_H
#define TG_OPS_CPU_WINOGRAD_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/cpu/conv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True when this CPU has the instructions and g is a convolution the kernels take: 3x3,
 * groups 1, stride 1, dilation 1, padding at most 2, and input and output channels that are
 * multiples of 8 (a vector; fewer make products too thin to gain on the direct kernels). */
bool tg_cpu_winograd_conv_applies(const tg_conv_geom *g);

/* True when g has tiles enough (4 x 4 outputs of all images) to pay for transforming
 * every filter, as measured against the GEMM path: at least 16 + sqrt(c co) / 4 tiles,
 * and sqrt(c co) at most 256 (wider layers stream their transformed weights per block
 * of tiles; see the measurements in winograd_conv.c). ops/conv.c asks both. */
bool tg_cpu_winograd_conv_pays(const tg_conv_geom *g);

/* Each call takes a float32 workspace of the size its *_workspace function gives, which
 * the caller allocates (ops/conv.c: a tensor, so the allocator's cache serves it). */
int64_t tg_cpu_winograd_conv_forward_workspace(const tg_conv_geom *g);
int64_t tg_cpu_winograd_conv_input_grad_workspace(const tg_conv_geom *g);
int64_t tg_cpu_winograd_conv_weight_grad_workspace(const tg_conv_geom *g);

/* y [N, Co, Ho, Wo] = conv(x [N, C, H, W], w [Co, C, 3, 3]) + bias [Co] (bias may be NULL). */
void tg_cpu_winograd_conv_forward(const tg_conv_geom *g, const float *x, const float *w, const float *bias, float *y,
                                  float *work);
/* gx [N, C, H, W] = the input gradient of grad [N, Co, Ho, Wo] (every element written). */
void tg_cpu_winograd_conv_input_grad(const tg_conv_geom *g, const float *grad, const float *w, float *gx, float *work);
/* gw [Co, C, 3, 3] = the weight gradient (every element written). */
void tg_cpu_winograd_conv_weight_grad(const tg_conv_geom *g, const float *x, const float *grad, float *gw, float *work);

/* Whether the products take their AVX-512 tiles where the CPU has AVX-512F (the default;
 * the same bits as the AVX2 tiles, twice the work per instruction); false keeps the AVX2
 * ones, so that tests compare the two. Returns the previous setting. */
bool tg_cpu_winograd_set_avx512(bool on);

#ifdef __cplusplus
}
#endif

#endif
