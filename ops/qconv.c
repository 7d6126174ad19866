/* int8 Linear and Conv2d of static quantisation (ops/qconv.h): an im2col of the
 * uint8 input, the u8 x s8 -> s32 GEMM of ops/qgemm.h, and onednn's requantisation. */
#include "ops/qconv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
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
    if (tg_qgemm_has_vnni() && !(qw->packed = tg_qgemm_pack(out, k, w))) {
        tg_qweights_free(qw);
        return false;
    }
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
    free(qw->packed);
    free(qw->row_sum);
    free(qw->bias_q);
    free(qw->mult);
    memset(qw, 0, sizeof *qw);
}

/* acc = x (rows x k, uint8) times the weights, on the packed VNNI kernel when it runs. */
static void product(const tg_qweights *qw, int64_t rows, const uint8_t *x, int32_t *acc) {
    if (qw->packed && tg_qgemm_vnni_enabled())
        tg_qgemm_u8s8s32_packed(rows, qw->out, qw->k, x, qw->k, qw->packed, acc);
    else
        tg_qgemm_u8s8s32(rows, qw->out, qw->k, x, qw->w, acc);
}

/* nearbyintf for |v| < 2^22 without a libm call (the baseline x86-64 target has no
 * roundss): adding and subtracting 1.5 * 2^23 rounds half to even in the default
 * rounding mode. Larger values only need to stay large (they are clamped). */
static inline float round_half_even(float v) {
    v = v > 4e6f ? 4e6f : v < -4e6f ? -4e6f : v;
    const float big = 12582912.0f; /* the library is not built with -ffast-math, which would fold this */
    return (v + big) - big;
}

/* One output value: the accumulator with its corrections, scaled, rounded, clamped. */
static inline uint8_t requantize_one(int32_t acc, int32_t correction, float mult, float zp, float lo) {
    float v = round_half_even((float)(acc + correction) * mult) + zp;
    v = v < lo ? lo : v; /* comparisons, not fminf / fmaxf: those are libm calls */
    return (uint8_t)(int32_t)(v > 255.f ? 255.f : v);
}

/* acc (rows x out, row-major) -> y at y[r * rs + o * os]; the loop runs along the
 * output's contiguous dimension. */
static void requantize(const tg_qweights *qw, tg_qrequant rq, int64_t rows, const int32_t *acc, uint8_t *y, int64_t rs,
                       int64_t os) {
    const float lo = (float)(rq.relu ? rq.y_zero_point : 0), zp = (float)rq.y_zero_point;
    const int64_t out = qw->out;
    for (int64_t o = 0; o < out; o++) {
        const int32_t correction = qw->bias_q[o] - rq.x_zero_point * qw->row_sum[o];
        const float mult = qw->mult[o];
        if (os == 1) {
            for (int64_t r = 0; r < rows; r++) y[r * rs + o] = requantize_one(acc[r * out + o], correction, mult, zp, lo);
        } else {
            uint8_t *yo = y + o * os;
            for (int64_t r = 0; r < rows; r++) yo[r] = requantize_one(acc[r * out + o], correction, mult, zp, lo);
        }
    }
}

void tg_qlinear_u8(const tg_qweights *qw, tg_qrequant rq, int64_t rows, const uint8_t *x, uint8_t *y) {
    int32_t *acc = malloc((size_t)(rows * qw->out > 0 ? rows * qw->out : 1) * sizeof *acc);
    TG_ASSERT(acc != NULL);
    product(qw, rows, x, acc);
    requantize(qw, rq, rows, acc, y, qw->out, 1);
    free(acc);
}

typedef struct {
    const tg_qweights *qw;
    tg_qrequant rq;
    int64_t c, h, w, oh, ow;
    int kh, kw, stride, padding, dilation;
    const uint8_t *x;
    uint8_t *y;
} qconv_args;

/* Images [begin, end): im2col, product, requantisation, each image on one thread. */
static void qconv_images(int64_t begin, int64_t end, void *ctx) {
    const qconv_args *g = ctx;
    const int64_t c = g->c, h = g->h, w = g->w, oh = g->oh, ow = g->ow, kh = g->kh, kw = g->kw;
    const int64_t positions = oh * ow, k = c * kh * kw, out = g->qw->out;
    uint8_t *cols = malloc((size_t)(positions * k > 0 ? positions * k : 1) + 8);
    int32_t *acc = malloc((size_t)(positions * out > 0 ? positions * out : 1) * sizeof *acc);
    TG_ASSERT(cols && acc);
    const uint8_t pad = (uint8_t)g->rq.x_zero_point;
    const bool plain = g->padding == 0 && g->dilation == 1; /* rows of the window are contiguous */
    for (int64_t b = begin; b < end; b++) {
        const uint8_t *img = g->x + b * c * h * w, *img_end = img + c * h * w;
        /* one row of k = (channel, ky, kx) per output position: the weight's layout */
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                uint8_t *row = cols + (oy * ow + ox) * k;
                for (int64_t ch = 0; ch < c; ch++)
                    for (int64_t ky = 0; ky < kh; ky++) {
                        int64_t iy = oy * g->stride - g->padding + ky * g->dilation;
                        if (plain) {
                            const uint8_t *src = img + (ch * h + iy) * w + ox * g->stride;
                            if (kw <= 8 && src + 8 <= img_end) {
                                /* one 8-byte move; the bytes past kw are overwritten by the
                                 * next ones (cols has 8 bytes of slack at its end) */
                                uint64_t v;
                                memcpy(&v, src, 8);
                                memcpy(row, &v, 8);
                            } else {
                                for (int64_t kx = 0; kx < kw; kx++) row[kx] = src[kx];
                            }
                            row += kw;
                            continue;
                        }
                        for (int64_t kx = 0; kx < kw; kx++) {
                            int64_t ix = ox * g->stride - g->padding + kx * g->dilation;
                            bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
                            *row++ = inside ? img[(ch * h + iy) * w + ix] : pad;
                        }
                    }
            }
        product(g->qw, positions, cols, acc);
        requantize(g->qw, g->rq, positions, acc, g->y + b * out * positions, 1, positions);
    }
    free(cols);
    free(acc);
}

void tg_qconv2d_u8(const tg_qweights *qw, tg_qrequant rq, int64_t n, int64_t c, int64_t h, int64_t w, int kh, int kw,
                   int stride, int padding, int dilation, const uint8_t *x, uint8_t *y) {
    qconv_args g = {qw, rq, c, h, w, (h + 2 * padding - dilation * (kh - 1) - 1) / stride + 1,
                    (w + 2 * padding - dilation * (kw - 1) - 1) / stride + 1, kh, kw, stride, padding, dilation, x, y};
    /* several images: one per thread (the product inside runs on that thread); one
     * image: the product spreads its rows over the threads */
    if (n == 1) qconv_images(0, 1, &g);
    else tg_parallel_for(n, 1, qconv_images, &g);
}

void tg_qmax_pool2d_u8(int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow, int k, int stride, int padding,
                       int dilation, const uint8_t *x, uint8_t *y) {
    for (int64_t p = 0; p < planes; p++) {
        const uint8_t *in = x + p * h * w;
        uint8_t *out = y + p * oh * ow;
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                uint8_t m = 0;
                for (int ky = 0; ky < k; ky++) {
                    int64_t iy = oy * stride - padding + ky * dilation;
                    if (iy < 0 || iy >= h) continue;
                    for (int kx = 0; kx < k; kx++) {
                        int64_t ix = ox * stride - padding + kx * dilation;
                        if (ix >= 0 && ix < w && in[iy * w + ix] > m) m = in[iy * w + ix];
                    }
                }
                out[oy * ow + ox] = m;
            }
    }
}
