/* int8 Linear and Conv2d of static quantisation (ops/qconv.h): an im2col of the
 * uint8 input, the u8 x s8 -> s32 GEMM of ops/qgemm.h, and onednn's requantisation. */
#include "ops/qconv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/qgemm.h"

bool tg_qweights_init(tg_qweights *qw, int64_t out, int64_t k, const int8_t *w, const float *w_scale,
                      const float *bias, tg_qrequant rq) {
    memset(qw, 0, sizeof *qw);
    qw->out = out;
    qw->k = k;
    qw->w = malloc((size_t)(out * k > 0 ? out * k : 1));
    qw->row_sum = malloc((size_t)(out > 0 ? out : 1) * sizeof(int32_t));
    qw->bias_q = malloc((size_t)(out > 0 ? out : 1) * sizeof(int32_t));
    qw->mult = malloc((size_t)(out > 0 ? out : 1) * sizeof(float));
    if (!qw->w || !qw->row_sum || !qw->bias_q || !qw->mult) {
        tg_qweights_free(qw);
        return false;
    }
    memcpy(qw->w, w, (size_t)(out * k));
    const float inv_x = 1.0f / rq.x_scale, inv_y = 1.0f / rq.y_scale;
    for (int64_t o = 0; o < out; o++) {
        int32_t sum = 0;
        for (int64_t p = 0; p < k; p++) sum += w[o * k + p];
        qw->row_sum[o] = sum;
        const float inv_w = 1.0f / w_scale[o];
        qw->bias_q[o] = bias ? (int32_t)nearbyintf(bias[o] * inv_x * inv_w) : 0;
        qw->mult[o] = inv_y / (inv_x * inv_w);
    }
    return true;
}

void tg_qweights_free(tg_qweights *qw) {
    free(qw->w);
    free(qw->row_sum);
    free(qw->bias_q);
    free(qw->mult);
    memset(qw, 0, sizeof *qw);
}

/* acc (rows x out, row-major) -> y at y[r * rs + o * os]. */
static void requantize(const tg_qweights *qw, tg_qrequant rq, int64_t rows, const int32_t *acc, uint8_t *y, int64_t rs,
                       int64_t os) {
    const int32_t lo = rq.relu ? rq.y_zero_point : 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < qw->out; o++) {
            int32_t raw = acc[r * qw->out + o] - rq.x_zero_point * qw->row_sum[o] + qw->bias_q[o];
            float v = nearbyintf((float)raw * qw->mult[o]) + (float)rq.y_zero_point;
            y[r * rs + o * os] = (uint8_t)(v < (float)lo ? lo : v > 255.f ? 255 : (int32_t)v);
        }
}

void tg_qlinear_u8(const tg_qweights *qw, tg_qrequant rq, int64_t rows, const uint8_t *x, uint8_t *y) {
    int32_t *acc = malloc((size_t)(rows * qw->out > 0 ? rows * qw->out : 1) * sizeof *acc);
    TG_ASSERT(acc != NULL);
    tg_qgemm_u8s8s32(rows, qw->out, qw->k, x, qw->w, acc);
    requantize(qw, rq, rows, acc, y, qw->out, 1);
    free(acc);
}

void tg_qconv2d_u8(const tg_qweights *qw, tg_qrequant rq, int64_t n, int64_t c, int64_t h, int64_t w, int kh, int kw,
                   int stride, int padding, int dilation, const uint8_t *x, uint8_t *y) {
    const int64_t oh = (h + 2 * padding - dilation * (kh - 1) - 1) / stride + 1;
    const int64_t ow = (w + 2 * padding - dilation * (kw - 1) - 1) / stride + 1;
    const int64_t positions = oh * ow, k = c * kh * kw;
    uint8_t *cols = malloc((size_t)(positions * k > 0 ? positions * k : 1));
    int32_t *acc = malloc((size_t)(positions * qw->out > 0 ? positions * qw->out : 1) * sizeof *acc);
    TG_ASSERT(cols && acc);
    const uint8_t pad = (uint8_t)rq.x_zero_point;
    for (int64_t b = 0; b < n; b++) {
        const uint8_t *img = x + b * c * h * w;
        /* one row of k = (channel, ky, kx) per output position: the weight's layout */
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                uint8_t *row = cols + (oy * ow + ox) * k;
                for (int64_t ch = 0; ch < c; ch++)
                    for (int ky = 0; ky < kh; ky++) {
                        int64_t iy = oy * stride - padding + ky * dilation;
                        for (int kx = 0; kx < kw; kx++) {
                            int64_t ix = ox * stride - padding + kx * dilation;
                            bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
                            *row++ = inside ? img[(ch * h + iy) * w + ix] : pad;
                        }
                    }
            }
        tg_qgemm_u8s8s32(positions, qw->out, k, cols, qw->w, acc);
        requantize(qw, rq, positions, acc, y + b * qw->out * positions, 1, positions);
    }
    free(cols);
    free(acc);
}
