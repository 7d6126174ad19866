/* int8 Linear and Conv2d of static quantisation (ops/cpu/qconv.h): an im2col of the
 * uint8 input, the u8 x s8 -> s32 GEMM of ops/cpu/qgemm.h, and onednn's requantisation. */
#include "ops/cpu/qconv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
#include "ops/cpu/qgemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

bool tg_qweights_init(tg_qweights *qw, int64_t out, int64_t k, const int8_t *w, const float *w_scale, const float *bias,
                      tg_qrequant rq) {
    memset(qw, 0, sizeof *qw);
    qw->out = out;
    qw->k = k;
    qw->w = malloc((size_t)(out * k > 0 ? out * k : 1));
    qw->row_sum = malloc((size_t)(out > 0 ? out : 1) * sizeof(int32_t));
    qw->bias_q = malloc((size_t)(out > 0 ? out : 1) * sizeof(int32_t));
    qw->correction = malloc((size_t)(out > 0 ? out : 1) * sizeof(int32_t));
    qw->mult = malloc((size_t)(out > 0 ? out : 1) * sizeof(float));
    if (!qw->w || !qw->row_sum || !qw->bias_q || !qw->correction || !qw->mult) {
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
        qw->correction[o] = qw->bias_q[o] - rq.x_zero_point * sum;
    }
    return true;
}

void tg_qweights_free(tg_qweights *qw) {
    free(qw->w);
    free(qw->packed);
    free(qw->row_sum);
    free(qw->bias_q);
    free(qw->correction);
    free(qw->mult);
    memset(qw, 0, sizeof *qw);
}

/* The packed VNNI kernel runs (with the requantisation in its registers). */
static bool packed_runs(const tg_qweights *qw) { return qw->packed && tg_qgemm_vnni_enabled(); }

/* y[r * ldy + o] = the requantised product of x (rows x k, rows ldx apart; k may be
 * the weights' k rounded up to 4 when those bytes of x are finite) with the weights, on
 * the packed kernel. */
static void packed_product_u8(const tg_qweights *qw, tg_qrequant rq, int64_t rows, int64_t k, const uint8_t *x,
                              int64_t ldx, uint8_t *y, int64_t ldy) {
    tg_qgemm_epilogue e = {.kind = TG_QGEMM_OUT_U8,
                           .out = y,
                           .ldc = ldy,
                           .correction = qw->correction,
                           .mult = qw->mult,
                           .y_zero_point = (float)rq.y_zero_point,
                           .lo = (float)(rq.relu ? rq.y_zero_point : 0)};
    tg_qgemm_u8s8_packed_epilogue(rows, qw->out, k, x, ldx, qw->packed, &e);
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
        const int32_t correction = qw->correction[o];
        const float mult = qw->mult[o];
        if (os == 1) {
            for (int64_t r = 0; r < rows; r++)
                y[r * rs + o] = requantize_one(acc[r * out + o], correction, mult, zp, lo);
        } else {
            uint8_t *yo = y + o * os;
            for (int64_t r = 0; r < rows; r++) yo[r] = requantize_one(acc[r * out + o], correction, mult, zp, lo);
        }
    }
}

void tg_qlinear_u8(const tg_qweights *qw, tg_qrequant rq, int64_t rows, const uint8_t *x, uint8_t *y) {
    if (packed_runs(qw)) {
        packed_product_u8(qw, rq, rows, qw->k, x, qw->k, y, qw->out);
        return;
    }
    int32_t *acc = malloc((size_t)(rows * qw->out > 0 ? rows * qw->out : 1) * sizeof *acc);
    TG_ASSERT(acc != NULL);
    tg_qgemm_u8s8s32(rows, qw->out, qw->k, x, qw->w, acc);
    requantize(qw, rq, rows, acc, y, qw->out, 1);
    free(acc);
}

/* y[o * rows + r] = t[r * out + o]: the packed kernel's positions-first output to the
 * channels-first planes. With AVX-512 (which the packed kernel implies): 16 positions
 * per gather of 4-byte words, each word 4 channels of one position, then the bytes
 * regrouped by channel (in each 128-bit lane, then the lanes' 4-byte pieces), four
 * planes' 16 bytes per gather; the last channels (out % 4) one per word, its low byte
 * kept. t needs 3 bytes of slack. */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512bw"))) static void to_planes(const uint8_t *t, int64_t rows, int64_t out,
                                                                  uint8_t *y) {
    const __m512i step = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int32_t)out));
    /* in a lane, 4 positions x 4 channels -> 4 channels x 4 positions */
    const __m512i by_channel =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    /* 4-byte piece c of lane l -> lane c, piece l */
    const __m512i lanes = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    int64_t o = 0;
    for (; o + 4 <= out; o += 4)
        for (int64_t r = 0; r < rows; r += 16) {
            const __mmask16 mask = rows - r >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (rows - r)) - 1);
            __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, step, t + r * out + o, 1);
            words = _mm512_permutexvar_epi32(lanes, _mm512_shuffle_epi8(words, by_channel));
            /* plane o + c's bytes for positions r..r+15 are lane c: moved to lane 0 and
             * stored under the 16-bit mask (AVX512BW's byte stores, no AVX512VL needed) */
            uint8_t *dst = y + o * rows + r;
            _mm512_mask_storeu_epi8(dst, mask, words);
            _mm512_mask_storeu_epi8(dst + rows, mask, _mm512_shuffle_i32x4(words, words, 1));
            _mm512_mask_storeu_epi8(dst + 2 * rows, mask, _mm512_shuffle_i32x4(words, words, 2));
            _mm512_mask_storeu_epi8(dst + 3 * rows, mask, _mm512_shuffle_i32x4(words, words, 3));
        }
    for (; o < out; o++)
        for (int64_t r = 0; r < rows; r += 16) {
            const __mmask16 mask = rows - r >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (rows - r)) - 1);
            __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, step, t + r * out + o, 1);
            _mm512_mask_cvtepi32_storeu_epi8(y + o * rows + r, mask, words);
        }
}
#else
static void to_planes(const uint8_t *t, int64_t rows, int64_t out, uint8_t *y) {
    for (int64_t o = 0; o < out; o++)
        for (int64_t r = 0; r < rows; r++) y[o * rows + r] = t[r * out + o];
}
#endif

typedef struct {
    const tg_qweights *qw;
    tg_qrequant rq;
    int64_t c, h, w, oh, ow;
    int kh, kw, stride, padding, dilation;
    const uint8_t *x;
    uint8_t *y;
} qconv_args;

/* The im2col of one image: one row of k = (channel, ky, kx) per output position (the
 * weight's layout), rows lda bytes apart. */
static void im2col(const qconv_args *g, const uint8_t *img, uint8_t *cols, int64_t lda) {
    const int64_t c = g->c, h = g->h, w = g->w, oh = g->oh, ow = g->ow, kh = g->kh, kw = g->kw, k = c * kh * kw;
    const int64_t stride = g->stride;
    if (g->padding == 0 && g->dilation == 1 && kw <= 8 && lda >= k + 8 - kw) {
        /* Rows of a window are contiguous: each is one 8-byte move, the bytes past kw
         * overwritten by the next segment of the row (segments are written in order, and
         * the last one's spill lands in the row's padding). Along ox, one simple loop. */
        const uint8_t *img_end = img + c * h * w;
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t ky = 0; ky < kh; ky++)
                for (int64_t oy = 0; oy < oh; oy++) {
                    const uint8_t *src = img + (ch * h + oy * stride + ky) * w;
                    uint8_t *dst = cols + oy * ow * lda + (ch * kh + ky) * kw;
                    int64_t ox = 0;
                    for (; ox < ow && src + ox * stride + 8 <= img_end; ox++) {
                        uint64_t v;
                        memcpy(&v, src + ox * stride, 8);
                        memcpy(dst + ox * lda, &v, 8);
                    }
                    for (; ox < ow; ox++) /* the image's last bytes: no read past it */
                        for (int64_t kx = 0; kx < kw; kx++) dst[ox * lda + kx] = src[ox * stride + kx];
                }
        return;
    }
    const uint8_t pad = (uint8_t)g->rq.x_zero_point;
    for (int64_t oy = 0; oy < oh; oy++)
        for (int64_t ox = 0; ox < ow; ox++) {
            uint8_t *row = cols + (oy * ow + ox) * lda;
            for (int64_t ch = 0; ch < c; ch++)
                for (int64_t ky = 0; ky < kh; ky++) {
                    int64_t iy = oy * stride - g->padding + ky * g->dilation;
                    for (int64_t kx = 0; kx < kw; kx++) {
                        int64_t ix = ox * stride - g->padding + kx * g->dilation;
                        bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
                        *row++ = inside ? img[(ch * h + iy) * w + ix] : pad;
                    }
                }
        }
}

/* Images [begin, end): im2col, product, requantisation, each image on one thread. */
static void qconv_images(int64_t begin, int64_t end, void *ctx) {
    const qconv_args *g = ctx;
    const int64_t c = g->c, h = g->h, w = g->w, positions = g->oh * g->ow, k = c * g->kh * g->kw, out = g->qw->out;
    const bool packed = packed_runs(g->qw);
    /* The packed kernel runs k rounded up to 4 (its packing's zeros pad the weights), so
     * no row has a tail to assemble; rows get room for im2col's 8-byte moves. The
     * portable kernel reads rows exactly k apart. */
    const int64_t k4 = (k + 3) / 4 * 4, lda = packed ? (k + 8 + 3) / 4 * 4 : k;
    uint8_t *cols = calloc((size_t)(positions * lda > 0 ? positions * lda : 1), 1); /* pads hold zeros */
    /* the packed kernel's requantised output, positions x out, before its transposition to
     * channels first (3 bytes of slack for to_planes); else the int32 sums */
    void *acc = malloc((size_t)(positions * out > 0 ? positions * out : 1) * (packed ? 1 : sizeof(int32_t)) + 3);
    TG_ASSERT(cols && acc);
    for (int64_t b = begin; b < end; b++) {
        im2col(g, g->x + b * c * h * w, cols, lda);
        uint8_t *y = g->y + b * out * positions;
        if (packed) {
            packed_product_u8(g->qw, g->rq, positions, k4, cols, lda, acc, out);
            to_planes(acc, positions, out, y);
        } else {
            tg_qgemm_u8s8s32(positions, out, k, cols, g->qw->w, acc);
            requantize(g->qw, g->rq, positions, acc, y, 1, positions);
        }
    }
    free(cols);
    free(acc);
}

void tg_qconv2d_u8(const tg_qweights *qw, tg_qrequant rq, int64_t n, int64_t c, int64_t h, int64_t w, int kh, int kw,
                   int stride, int padding, int dilation, const uint8_t *x, uint8_t *y) {
    qconv_args g = {qw,
                    rq,
                    c,
                    h,
                    w,
                    (h + 2 * padding - dilation * (kh - 1) - 1) / stride + 1,
                    (w + 2 * padding - dilation * (kw - 1) - 1) / stride + 1,
                    kh,
                    kw,
                    stride,
                    padding,
                    dilation,
                    x,
                    y};
    /* several images: one per thread (the product inside runs on that thread); one
     * image: the product spreads its rows over the threads */
    if (n == 1) qconv_images(0, 1, &g);
    else tg_parallel_for(n, 1, qconv_images, &g);
}

typedef struct {
    int64_t h, w, oh, ow;
    const uint8_t *x;
    uint8_t *y;
} pool2_args;

/* Planes [begin, end) of LeNet's pooling (2x2, stride 2, windows inside the plane): no
 * bounds to test, a loop that vectorises. */
static void pool2_planes(int64_t begin, int64_t end, void *ctx) {
    const pool2_args *g = ctx;
    const int64_t h = g->h, w = g->w, oh = g->oh, ow = g->ow;
    for (int64_t p = begin; p < end; p++)
        for (int64_t oy = 0; oy < oh; oy++) {
            const uint8_t *r0 = g->x + (p * h + 2 * oy) * w, *r1 = r0 + w;
            uint8_t *out = g->y + (p * oh + oy) * ow;
            for (int64_t ox = 0; ox < ow; ox++) {
                uint8_t a = r0[2 * ox] > r0[2 * ox + 1] ? r0[2 * ox] : r0[2 * ox + 1];
                uint8_t b = r1[2 * ox] > r1[2 * ox + 1] ? r1[2 * ox] : r1[2 * ox + 1];
                out[ox] = a > b ? a : b;
            }
        }
}

void tg_qmax_pool2d_u8(int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow, int k, int stride, int padding,
                       int dilation, const uint8_t *x, uint8_t *y) {
    if (k == 2 && stride == 2 && padding == 0 && dilation == 1 && 2 * oh <= h && 2 * ow <= w) {
        pool2_args g = {h, w, oh, ow, x, y};
        int64_t per_plane = h * w > 0 ? h * w : 1; /* about 64 KB of input per chunk */
        tg_parallel_for(planes, per_plane >= 65536 ? 1 : 65536 / per_plane, pool2_planes, &g);
        return;
    }
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
