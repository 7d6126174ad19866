/* The int8 kernels of static quantisation (quant/static_quant.h): quint8 activations
 * (uint8 with a scale and zero point), int8 weights with one scale per output
 * channel (zero point 0), requantised to quint8. Library-internal (not in
 * tapegrad.h); the caller owns every buffer.
 *
 * Requantisation follows onednn's (PyTorch 1.13's x86 engine in Debian's build):
 * the bias is quantised to int32 at the accumulator's scale x_scale * w_scale[o],
 * acc = sum (x - x_zp) * w + bias_q, and y = clamp(nearbyint(acc * m[o]) + y_zp, lo,
 * 255) with m[o] = y_scale^-1 / (x_scale^-1 * w_scale[o]^-1) in float32 (onednn keeps
 * reciprocal scales); lo = y_zp with a fused ReLU, else 0. */
#ifndef TG_OPS_CPU_QCONV_H
#define TG_OPS_CPU_QCONV_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The requantisation constants of one layer. */
typedef struct {
    float x_scale, y_scale;
    int32_t x_zero_point, y_zero_point;
    bool relu;
} tg_qrequant;

/* A quantised layer's weights, made once: w (out x k, int8), their row sums, the
 * int32 bias and the multipliers. */
typedef struct {
    int64_t out, k;
    int8_t *w;      /* row-major, for the portable GEMM */
    int8_t *packed; /* tg_qgemm_pack's layout, for the VNNI one (NULL without VNNI) */
    int32_t *row_sum, *bias_q;
    int32_t *correction; /* bias_q - x_zero_point * row_sum: what each sum needs before scaling */
    float *mult;
} tg_qweights;

/* Fills qw from int8 weights w (out x k, copied), per-channel scales w_scale[out] and
 * an optional float bias. Returns false when out of memory. tg_qweights_free frees. */
bool tg_qweights_init(tg_qweights *qw, int64_t out, int64_t k, const int8_t *w, const float *w_scale, const float *bias,
                      tg_qrequant rq);
void tg_qweights_free(tg_qweights *qw);

/* Linear: x (rows x k uint8) -> y (rows x out uint8). */
void tg_qlinear_u8(const tg_qweights *qw, tg_qrequant rq, int64_t rows, const uint8_t *x, uint8_t *y);

/* Conv2d (groups 1): x [n, c, h, w] uint8 -> y [n, out, oh, ow] uint8, weights laid
 * out [out, c, kh, kw]; padding reads x's zero point (the quantised 0.0). */
void tg_qconv2d_u8(const tg_qweights *qw, tg_qrequant rq, int64_t n, int64_t c, int64_t h, int64_t w, int kh, int kw,
                   int stride, int padding, int dilation, const uint8_t *x, uint8_t *y);

/* MaxPool2d on quint8 planes (planes = n * c): the max of the uint8 values in each
 * window (padding never wins), oh x ow outputs as the caller computed them. */
void tg_qmax_pool2d_u8(int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow, int k, int stride, int padding,
                       int dilation, const uint8_t *x, uint8_t *y);

#ifdef __cplusplus
}
#endif

#endif
