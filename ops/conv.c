/* 2-D convolution: definition and backward; CPU kernels (im2col + GEMM) in ops/cpu/conv.c;
 * tg_conv_transpose2d is the input-gradient function applied forward (at the end).
 * CUDA kernels: ops/cuda/conv.cu; the index math both use: ops/conv_index.h.
 *
 * The op is three tg_functions, each a GEMM around im2col/col2im:
 *   conv2d            (x, w[, b])  -> y
 *   conv2d_input_grad (g, w)       -> dL/dx   (a transposed conv of g)
 *   conv2d_weight_grad(x, g)       -> dL/dw   (a conv between x and g)
 * and each one's backward is written with the other two, so the op is
 * differentiable to any order. Why that closes: y = conv(x, w) is bilinear, so
 * <gg_x, input_grad(g, w)> = <conv(gg_x, w), g> = <w, weight_grad(gg_x, g)> and
 * <gg_w, weight_grad(x, g)> = <conv(x, gg_w), g> = <x, input_grad(g, gg_w)>
 * (the adjoint identities behind PyTorch's convolution_backward double-backward,
 * aten/src/ATen/native/Convolution.cpp, _convolution_double_backward).
 *
 * CPU layout (note "conv chunks"): images are processed in chunks of B so that the
 * im2col buffer col [C*kH*kW, B*Ho*Wo] stays near L2 size (1 MiB); one GEMM per
 * group then covers the whole chunk, which keeps OpenBLAS efficient for small
 * images. The columns of image b are b*L .. b*L+L-1 (L = Ho*Wo). Workspaces are
 * allocated once per call, never in the loops. Large calls give each task of the
 * thread pool (core/parallel.h) a block of whole chunks with a workspace of its own
 * (see tg_conv_make_plan, ops/cpu/conv.c). */
#include "ops/conv.h"

#include <string.h>

#include "autograd/autocast_impl.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/lowp.h"
#include "core/parallel.h"
#include "core/scope.h"
#include "core/simd.h"
#include "core/tensor_impl.h"
#include "onnx/graph.h"
#include "ops/conv_index.h"
#include "ops/cpu/conv.h"
#include "ops/cpu/depthwise_conv.h"
#include "ops/cpu/direct_conv.h"
#include "ops/cpu/winograd_conv.h"
#include "ops/cuda/conv.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/pad.h"
#include "ops/cpu/gemm.h"
#include "ops/reduce.h"
#include "ops/shape.h"

typedef tg_conv_params conv_params; /* ops/cpu/conv.h: shared with the kernels */
typedef tg_conv_geom conv_geom;
typedef tg_conv_plan conv_plan;

/* float16 / bfloat16 (docs/mixed-precision.md): bfloat16 on a CPU with AVX512-BF16 runs the
 * bf16 kernels above; the rest (float16, bfloat16 on other CPUs, both on CUDA) is the
 * float32 op on widened copies, rounded once. Either way each result is summed in float32
 * and rounded once, as PyTorch's oneDNN and cuDNN convolutions. */
static bool bf16_kernel_for(const tg_tensor *t) {
    return t->dtype == TG_BFLOAT16 && t->storage->device.kind == TG_DEVICE_CPU && tg_gemm_bf16_supported();
}
static bool computed_widened(const tg_tensor *t) { return tg_dtype_is_low_precision(t->dtype) && !bf16_kernel_for(t); }
static tg_tensor *widen(tg_tensor *t) { return t ? tg_cast(t, TG_FLOAT32) : NULL; }
static tg_tensor *narrow_to(tg_tensor *t, tg_dtype dtype) { return t ? tg_cast(t, dtype) : NULL; }
/* groups == C > 1: float32 / float64 on the CPU run ops/cpu/depthwise_conv.c's direct kernels. */
static bool depthwise(const tg_conv_geom *g) { return g->groups == g->c && g->groups > 1; }
/* Float32 3x3 stride-1 convolutions whose channel counts are multiples of 8 (the ResNets')
 * run ops/cpu/winograd_conv.c's kernels where the batch has tiles enough to pay for the
 * transformed weights; other dense stride-1 float32 ones ops/cpu/direct_conv.c's. */
static bool winograd(const tg_conv_geom *g, tg_dtype dtype) {
    return dtype == TG_FLOAT32 && tg_cpu_winograd_conv_applies(g) && tg_cpu_winograd_conv_pays(g);
}
static bool direct(const tg_conv_geom *g, tg_dtype dtype) {
    return dtype == TG_FLOAT32 && tg_cpu_direct_conv_applies(g);
}
/* A float32 workspace of n elements (freed with the op's other temporaries). */
static float *kernel_workspace(int64_t n) {
    tg_tensor *t = tg_empty(TG_SHAPE(n), (tg_opts){.dtype = TG_FLOAT32});
    return t ? tg_data_ptr(t) : NULL;
}

/* ======================= the three functions ======================= */

/* One col and one mat workspace per thread of the plan; part (if not NULL) gets room for the
 * weight-grad partial sums of threads 1.. */
static tg_status workspaces(const conv_geom *g, conv_plan pl, tg_dtype dtype, void **col, void **mat, void **part) {
    int64_t chunk = pl.chunk, L = g->ho * g->wo;
    tg_opts o = {.dtype = dtype};
    tg_tensor *c = tg_empty(TG_SHAPE(pl.threads * g->c * g->kh * g->kw * chunk * L + 1), o);
    tg_tensor *m = tg_empty(TG_SHAPE(pl.threads * g->co * chunk * L + 1), o);
    if (!c || !m) return TG_ERROR;
    *col = tg_data_ptr(c);
    *mat = tg_data_ptr(m);
    if (part) {
        tg_tensor *pt = tg_empty(TG_SHAPE((pl.threads - 1) * g->co * (g->c / g->groups) * g->kh * g->kw + 1), o);
        if (!pt) return TG_ERROR;
        *part = tg_data_ptr(pt);
    }
    return TG_OK;
}

static tg_tensor *conv_apply(tg_tensor *x, tg_tensor *w, tg_tensor *b, const conv_params *p);
static tg_tensor *input_grad_apply(tg_tensor *g, tg_tensor *w, const conv_params *p);
static tg_tensor *weight_grad_apply(tg_tensor *x, tg_tensor *g, const conv_params *p);

static tg_tensor *conv_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const conv_params *p = tg_ctx_attrs(ctx);
    bool has_bias = tg_ctx_function(ctx)->num_inputs == 3;
    tg_ctx_save(ctx, in[0]);
    tg_ctx_save(ctx, in[1]);
    if (computed_widened(in[0])) {
        tg_tensor *x = widen(in[0]), *w = widen(in[1]), *b = has_bias ? widen(in[2]) : NULL;
        if (!x || !w || (has_bias && !b)) return NULL;
        return narrow_to(conv_apply(x, w, b, p), in[0]->dtype);
    }
    tg_tensor *x = tg_contiguous(in[0]), *w = tg_contiguous(in[1]), *b = has_bias ? tg_contiguous(in[2]) : NULL;
    if (!x || !w || (has_bias && !b)) return NULL;
    conv_geom g = tg_conv_make_geom(x->shape.dims[0], x->shape.dims[1], w->shape.dims[0], p);
    if (tg_on_cuda(x)) {
        tg_tensor *y =
            tg_empty(TG_SHAPE(g.n, g.co, g.ho, g.wo), (tg_opts){.dtype = x->dtype, .device = x->storage->device});
        if (!y || TG_CUDA_CALL("tg_conv2d", tg_cuda_conv2d_forward, y, x, w, b, p->sh, p->sw, p->ph, p->pw, p->dh,
                               p->dw, p->groups))
            return NULL;
        return y;
    }
    bool bf16 = x->dtype == TG_BFLOAT16; /* bfloat16 operands, float32 sums rounded into a bfloat16 y */
    tg_dtype acc = bf16 ? TG_FLOAT32 : x->dtype;
    if (bf16 && b && !(b = tg_cast(b, TG_FLOAT32))) return NULL;
    tg_tensor *y = tg_empty(TG_SHAPE(g.n, g.co, g.ho, g.wo), (tg_opts){.dtype = x->dtype});
    if (y && !bf16 && depthwise(&g)) {
        void *bias = b ? tg_data_ptr(b) : NULL;
        if (x->dtype == TG_FLOAT32)
            tg_cpu_depthwise_conv_forward_f32(&g, tg_data_ptr(x), tg_data_ptr(w), bias, tg_data_ptr(y));
        else tg_cpu_depthwise_conv_forward_f64(&g, tg_data_ptr(x), tg_data_ptr(w), bias, tg_data_ptr(y));
        return y;
    }
    if (y && winograd(&g, x->dtype)) {
        float *work = kernel_workspace(tg_cpu_winograd_conv_forward_workspace(&g));
        if (!work) return NULL;
        tg_cpu_winograd_conv_forward(&g, tg_data_ptr(x), tg_data_ptr(w), b ? tg_data_ptr(b) : NULL, tg_data_ptr(y),
                                     work);
        return y;
    }
    if (y && direct(&g, x->dtype)) {
        float *work = kernel_workspace(tg_cpu_direct_conv_forward_workspace(&g));
        if (!work) return NULL;
        tg_cpu_direct_conv_forward(&g, tg_data_ptr(x), tg_data_ptr(w), b ? tg_data_ptr(b) : NULL, tg_data_ptr(y), work);
        return y;
    }
    void *col, *tmp;
    conv_plan pl = tg_conv_make_plan(&g, tg_dtype_size(x->dtype));
    if (!y || workspaces(&g, pl, acc, &col, &tmp, NULL)) return NULL;
    void *bias = b ? tg_data_ptr(b) : NULL;
    if (bf16) tg_cpu_conv_forward_bf16_rounded(&g, pl, tg_data_ptr(x), tg_data_ptr(w), bias, tg_data_ptr(y), col, tmp);
    else if (x->dtype == TG_FLOAT32)
        tg_cpu_conv_forward_f32(&g, pl, tg_data_ptr(x), tg_data_ptr(w), bias, tg_data_ptr(y), col, tmp);
    else tg_cpu_conv_forward_f64(&g, pl, tg_data_ptr(x), tg_data_ptr(w), bias, tg_data_ptr(y), col, tmp);
    return y;
}

/* The bias gradient [Co] (float32) of a bfloat16 CPU output gradient grad [N, Co, L], read
 * as it is: the sums of the float32 path below (tg_sum_dim over L, then over N, each in
 * double in index order, rounded to float32 after each) on elements widened in registers,
 * so the same bits without a float32 copy of grad. Each channel by one thread; four
 * channels side by side, their sums being four independent chains of additions (one alone
 * waits on each addition's latency). */
typedef struct {
    int64_t n, co, l;
    const uint16_t *g;
    float *out;
} bias_grad_job;
enum { BIAS_CHANNELS = 4 };

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HAVE_BIAS_LANES8 1
#define BIAS_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
/* Rows of 8 positions of channels c .. c + nc - 1 of images b0 .. b0 + nb - 1 at position i:
 * register q holds channel c + q, one image per 128-bit lane (zeros past nc and nb). */
BIAS_TARGET static inline __m512i bias_rows(const bias_grad_job *j, int64_t b0, int nb, int64_t c, int q, int64_t i) {
    const uint16_t *p = j->g + (b0 * j->co + c + q) * j->l + i;
    int64_t image = j->co * j->l;
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p));
    if (nb > 1) v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + image)), 1);
    else v = _mm512_inserti32x4(v, _mm_setzero_si128(), 1);
    if (nb > 2) v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 2 * image)), 2);
    else v = _mm512_inserti32x4(v, _mm_setzero_si128(), 2);
    if (nb > 3) v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 3 * image)), 3);
    else v = _mm512_inserti32x4(v, _mm_setzero_si128(), 3);
    return v;
}

/* Eight bfloat16 (8 channels of one image at one position) widened into 8 doubles, added. */
BIAS_TARGET static inline __m512d add8(__m512d s, __m128i h) {
    __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm512_add_pd(s, _mm512_cvtps_pd(f));
}

/* bias_grad_channels' sums for up to eight channels in the eight lanes of a register of
 * doubles: lane q does channel c + q's additions in the loop's order (images in order,
 * positions in order), so the same bits. Four images at a time are four independent
 * chains; an 8 x 8 block (channels x positions) of each is transposed in one 128-bit lane
 * of a zmm, so that each addition takes one position of all eight channels. */
BIAS_TARGET static void bias_grad_lanes8(const bias_grad_job *j, int64_t c, int nc) {
    __m512d total = _mm512_setzero_pd();
    for (int64_t b0 = 0; b0 < j->n; b0 += 4) {
        int nb = j->n - b0 < 4 ? (int)(j->n - b0) : 4;
        __m512d s[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
        int64_t i = 0;
        for (; i + 8 <= j->l; i += 8) {
            __m512i r[8];
            for (int q = 0; q < 8; q++) r[q] = q < nc ? bias_rows(j, b0, nb, c, q, i) : _mm512_setzero_si512();
            __m512i t[8], u[8];
            for (int q = 0; q < 8; q += 2) {
                t[q] = _mm512_unpacklo_epi16(r[q], r[q + 1]);     /* channels q, q+1 at positions 0-3 */
                t[q + 1] = _mm512_unpackhi_epi16(r[q], r[q + 1]); /* ... at positions 4-7 */
            }
            for (int q = 0; q < 8; q += 4)
                for (int h = 0; h < 2; h++) {
                    u[q + 2 * h] = _mm512_unpacklo_epi32(t[q + h], t[q + 2 + h]); /* 4 channels, 2 positions */
                    u[q + 2 * h + 1] = _mm512_unpackhi_epi32(t[q + h], t[q + 2 + h]);
                }
            /* u[0..3]: channels 0-3 at positions (0,1), (2,3), (4,5), (6,7); u[4..7]: channels 4-7 */
            for (int k = 0; k < 4; k++) {
                __m512i lo = _mm512_unpacklo_epi64(u[k], u[k + 4]), hi = _mm512_unpackhi_epi64(u[k], u[k + 4]);
                for (int pos = 0; pos < 2; pos++) { /* positions 2k, 2k + 1: 8 channels per image lane */
                    __m512i v = pos ? hi : lo;
                    for (int m = 0; m < nb; m++) {
                        __m128i h = m == 0   ? _mm512_castsi512_si128(v)
                                    : m == 1 ? _mm512_extracti32x4_epi32(v, 1)
                                    : m == 2 ? _mm512_extracti32x4_epi32(v, 2)
                                             : _mm512_extracti32x4_epi32(v, 3);
                        s[m] = add8(s[m], h);
                    }
                }
            }
        }
        for (; i < j->l; i++) /* the last positions, one at a time */
            for (int m = 0; m < nb; m++) {
                uint16_t e[8] = {0};
                for (int q = 0; q < nc; q++) e[q] = j->g[((b0 + m) * j->co + c + q) * j->l + i];
                s[m] = add8(s[m], _mm_loadu_si128((const __m128i *)e));
            }
        for (int m = 0; m < nb; m++) total = _mm512_add_pd(total, _mm512_cvtps_pd(_mm512_cvtpd_ps(s[m])));
    }
    _mm256_mask_storeu_ps(j->out + c, (__mmask8)((1u << nc) - 1), _mm512_cvtpd_ps(total));
}
#endif

static void bias_grad_channels(int64_t c0, int64_t c1, void *arg) {
    const bias_grad_job *j = arg;
#ifdef HAVE_BIAS_LANES8
    if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl")) {
        for (int64_t c = c0; c < c1; c += 8) bias_grad_lanes8(j, c, c1 - c < 8 ? (int)(c1 - c) : 8);
        return;
    }
#endif
    for (int64_t c = c0; c < c1; c += BIAS_CHANNELS) {
        int k = c1 - c < BIAS_CHANNELS ? (int)(c1 - c) : BIAS_CHANNELS;
        double total[BIAS_CHANNELS] = {0};
        for (int64_t b = 0; b < j->n; b++) {
            const uint16_t *row = j->g + (b * j->co + c) * j->l;
            double s[BIAS_CHANNELS] = {0};
            if (k == BIAS_CHANNELS)
                for (int64_t i = 0; i < j->l; i++)
                    for (int q = 0; q < BIAS_CHANNELS; q++) s[q] += tg_bf16_bits_to_float(row[q * j->l + i]);
            else
                for (int64_t i = 0; i < j->l; i++)
                    for (int q = 0; q < k; q++) s[q] += tg_bf16_bits_to_float(row[q * j->l + i]);
            for (int q = 0; q < k; q++) total[q] += (float)s[q];
        }
        for (int q = 0; q < k; q++) j->out[c + q] = (float)total[q];
    }
}
static tg_tensor *bias_grad_bf16(tg_tensor *grad) {
    int64_t n = grad->shape.dims[0], co = grad->shape.dims[1], l = grad->shape.dims[2] * grad->shape.dims[3];
    tg_tensor *out = tg_empty(TG_SHAPE(co), (tg_opts){.dtype = TG_FLOAT32});
    if (!out) return NULL;
    bias_grad_job j = {n, co, l, tg_data_ptr(grad), tg_data_ptr(out)};
    tg_parallel_for(co, n * co * l >= TG_CONV_GRAIN ? 8 : co, bias_grad_channels, &j);
    return out;
}

static void conv_backward(tg_ctx *ctx, tg_tensor *grad, tg_tensor **grad_in) {
    const conv_params *p = tg_ctx_attrs(ctx);
    tg_tensor *x = tg_ctx_saved(ctx, 0), *w = tg_ctx_saved(ctx, 1);
    if (!x || !w) return;
    grad = tg_contiguous(grad); /* once, not in each of the two functions below (sum's grad is expanded) */
    if (!grad) return;
    if (tg_ctx_needs_input_grad(ctx, 0)) grad_in[0] = input_grad_apply(grad, w, p);
    if (tg_ctx_needs_input_grad(ctx, 1)) grad_in[1] = weight_grad_apply(x, grad, p);
    if (tg_ctx_function(ctx)->num_inputs == 3 && tg_ctx_needs_input_grad(ctx, 2)) {
        /* Two reductions with unit-stride or single-stride inner loops (the reduce
         * kernels' fast paths) instead of one over dims {0, 2, 3}; a low-precision
         * gradient is summed in float32 and rounded once (the engine casts it back). */
        if (grad->dtype == TG_BFLOAT16 && grad->storage->device.kind == TG_DEVICE_CPU && !tg_is_grad_enabled()) {
            grad_in[2] = bias_grad_bf16(grad); /* not recorded: the same sums, no float32 copy */
            return;
        }
        tg_tensor *g = tg_dtype_is_low_precision(grad->dtype) ? tg_cast(grad, TG_FLOAT32) : grad;
        grad_in[2] = tg_sum_dim(tg_sum_dim(tg_flatten(g, 2, 3), 2, false), 0, false);
    }
}

/* grad_x from (g, w); x's shape comes from g, w and the params. */
static tg_tensor *input_grad_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const conv_params *p = tg_ctx_attrs(ctx);
    tg_ctx_save(ctx, in[0]);
    tg_ctx_save(ctx, in[1]);
    if (computed_widened(in[0])) {
        tg_tensor *g = widen(in[0]), *w = widen(in[1]);
        if (!g || !w) return NULL;
        return narrow_to(input_grad_apply(g, w, p), in[0]->dtype);
    }
    tg_tensor *g = tg_contiguous(in[0]), *w = tg_contiguous(in[1]);
    if (!g || !w) return NULL;
    conv_geom geom = tg_conv_make_geom(g->shape.dims[0], w->shape.dims[1] * p->groups, w->shape.dims[0], p);
    if (tg_on_cuda(g)) {
        tg_tensor *gx = tg_empty(TG_SHAPE(geom.n, geom.c, geom.h, geom.w),
                                 (tg_opts){.dtype = g->dtype, .device = g->storage->device});
        if (!gx || TG_CUDA_CALL("tg_conv2d backward", tg_cuda_conv2d_input_grad, gx, g, w, p->sh, p->sw, p->ph, p->pw,
                                p->dh, p->dw, p->groups))
            return NULL;
        return gx;
    }
    bool bf16 = g->dtype == TG_BFLOAT16;
    tg_dtype acc = bf16 ? TG_FLOAT32 : g->dtype;
    tg_tensor *gx = tg_empty(TG_SHAPE(geom.n, geom.c, geom.h, geom.w), (tg_opts){.dtype = acc});
    if (gx && !bf16 && depthwise(&geom)) {
        if (g->dtype == TG_FLOAT32)
            tg_cpu_depthwise_conv_input_grad_f32(&geom, tg_data_ptr(g), tg_data_ptr(w), tg_data_ptr(gx));
        else tg_cpu_depthwise_conv_input_grad_f64(&geom, tg_data_ptr(g), tg_data_ptr(w), tg_data_ptr(gx));
        return gx;
    }
    if (gx && winograd(&geom, g->dtype)) {
        float *work = kernel_workspace(tg_cpu_winograd_conv_input_grad_workspace(&geom));
        if (!work) return NULL;
        tg_cpu_winograd_conv_input_grad(&geom, tg_data_ptr(g), tg_data_ptr(w), tg_data_ptr(gx), work);
        return gx;
    }
    if (gx && direct(&geom, g->dtype)) {
        float *work = kernel_workspace(tg_cpu_direct_conv_input_grad_workspace(&geom));
        if (!work) return NULL;
        tg_cpu_direct_conv_input_grad(&geom, tg_data_ptr(g), tg_data_ptr(w), tg_data_ptr(gx), work);
        return gx;
    }
    void *col, *mat;
    conv_plan pl = tg_conv_make_plan(&geom, tg_dtype_size(acc)); /* the columns col2im reads are `acc` */
    if (!gx || workspaces(&geom, pl, acc, &col, &mat, NULL)) return NULL;
    if (bf16) tg_cpu_conv_input_grad_bf16(&geom, pl, tg_data_ptr(g), tg_data_ptr(w), tg_data_ptr(gx), col, mat);
    else if (g->dtype == TG_FLOAT32)
        tg_cpu_conv_input_grad_f32(&geom, pl, tg_data_ptr(g), tg_data_ptr(w), tg_data_ptr(gx), col, mat);
    else tg_cpu_conv_input_grad_f64(&geom, pl, tg_data_ptr(g), tg_data_ptr(w), tg_data_ptr(gx), col, mat);
    return bf16 ? tg_cast(gx, TG_BFLOAT16) : gx;
}

/* input_grad(g, w) is linear in each: see the adjoint identities at the top. */
static void input_grad_backward(tg_ctx *ctx, tg_tensor *gg, tg_tensor **grad_in) {
    const conv_params *p = tg_ctx_attrs(ctx);
    tg_tensor *g = tg_ctx_saved(ctx, 0), *w = tg_ctx_saved(ctx, 1);
    if (!g || !w) return;
    if (tg_ctx_needs_input_grad(ctx, 0)) grad_in[0] = conv_apply(gg, w, NULL, p);
    if (tg_ctx_needs_input_grad(ctx, 1)) grad_in[1] = weight_grad_apply(gg, g, p);
}

/* grad_w from (x, g); the kernel size comes from the params. */
static tg_tensor *weight_grad_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const conv_params *p = tg_ctx_attrs(ctx);
    tg_ctx_save(ctx, in[0]);
    tg_ctx_save(ctx, in[1]);
    if (computed_widened(in[0])) {
        tg_tensor *x = widen(in[0]), *g = widen(in[1]);
        if (!x || !g) return NULL;
        return narrow_to(weight_grad_apply(x, g, p), in[0]->dtype);
    }
    tg_tensor *x = tg_contiguous(in[0]), *g = tg_contiguous(in[1]);
    if (!x || !g) return NULL;
    conv_geom geom = tg_conv_make_geom(x->shape.dims[0], x->shape.dims[1], g->shape.dims[1], p);
    tg_shape wshape = TG_SHAPE(geom.co, geom.c / p->groups, geom.kh, geom.kw);
    if (tg_on_cuda(x)) {
        tg_tensor *gw = tg_empty(wshape, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
        if (!gw || TG_CUDA_CALL("tg_conv2d backward", tg_cuda_conv2d_weight_grad, gw, x, g, p->sh, p->sw, p->ph, p->pw,
                                p->dh, p->dw, p->groups))
            return NULL;
        return gw;
    }
    bool bf16 = x->dtype == TG_BFLOAT16;
    tg_dtype acc = bf16 ? TG_FLOAT32 : x->dtype;
    tg_tensor *gw = tg_empty(wshape, (tg_opts){.dtype = acc});
    if (gw && !bf16 && depthwise(&geom)) {
        if (x->dtype == TG_FLOAT32)
            tg_cpu_depthwise_conv_weight_grad_f32(&geom, tg_data_ptr(x), tg_data_ptr(g), tg_data_ptr(gw));
        else tg_cpu_depthwise_conv_weight_grad_f64(&geom, tg_data_ptr(x), tg_data_ptr(g), tg_data_ptr(gw));
        return gw;
    }
    if (gw && winograd(&geom, x->dtype)) {
        float *work = kernel_workspace(tg_cpu_winograd_conv_weight_grad_workspace(&geom));
        if (!work) return NULL;
        tg_cpu_winograd_conv_weight_grad(&geom, tg_data_ptr(x), tg_data_ptr(g), tg_data_ptr(gw), work);
        return gw;
    }
    if (gw && direct(&geom, x->dtype)) {
        float *work = kernel_workspace(tg_cpu_direct_conv_weight_grad_workspace(&geom));
        if (!work) return NULL;
        tg_cpu_direct_conv_weight_grad(&geom, tg_data_ptr(x), tg_data_ptr(g), tg_data_ptr(gw), work);
        return gw;
    }
    void *col, *mat, *part;
    conv_plan pl = tg_conv_make_plan(&geom, tg_dtype_size(x->dtype));
    if (!gw || workspaces(&geom, pl, acc, &col, &mat, &part)) return NULL;
    if (bf16) tg_cpu_conv_weight_grad_bf16(&geom, pl, tg_data_ptr(x), tg_data_ptr(g), tg_data_ptr(gw), col, mat, part);
    else if (x->dtype == TG_FLOAT32)
        tg_cpu_conv_weight_grad_f32(&geom, pl, tg_data_ptr(x), tg_data_ptr(g), tg_data_ptr(gw), col, mat, part);
    else tg_cpu_conv_weight_grad_f64(&geom, pl, tg_data_ptr(x), tg_data_ptr(g), tg_data_ptr(gw), col, mat, part);
    return bf16 ? tg_cast(gw, TG_BFLOAT16) : gw;
}

static void weight_grad_backward(tg_ctx *ctx, tg_tensor *gg, tg_tensor **grad_in) {
    const conv_params *p = tg_ctx_attrs(ctx);
    tg_tensor *x = tg_ctx_saved(ctx, 0), *g = tg_ctx_saved(ctx, 1);
    if (!x || !g) return;
    if (tg_ctx_needs_input_grad(ctx, 0)) grad_in[0] = input_grad_apply(g, gg, p);
    if (tg_ctx_needs_input_grad(ctx, 1)) grad_in[1] = conv_apply(x, gg, NULL, p);
}

/* The attributes Conv and ConvTranspose share; the kernel size is the weight's. */
static tg_onnx_node *conv_node_onnx(tg_onnx_op *op, const char *type, const conv_params *p) {
    tg_tensor *w = tg_onnx_input(op, 1);
    tg_onnx_node *n = tg_onnx_add_node_same(op, type);
    tg_onnx_attr_ints(n, "kernel_shape", (int64_t[]){w->shape.dims[2], w->shape.dims[3]}, 2);
    tg_onnx_attr_ints(n, "strides", (int64_t[]){p->sh, p->sw}, 2);
    tg_onnx_attr_ints(n, "pads", (int64_t[]){p->ph, p->pw, p->ph, p->pw}, 4);
    tg_onnx_attr_ints(n, "dilations", (int64_t[]){p->dh, p->dw}, 2);
    tg_onnx_attr_int(n, "group", p->groups);
    return n;
}

static tg_status conv_onnx(tg_onnx_op *op) { return conv_node_onnx(op, "Conv", tg_onnx_attrs(op)) ? TG_OK : TG_ERROR; }

/* conv_transpose2d is conv2d's input gradient: ConvTranspose of the same weight, with
 * the output_padding that reaches the recorded output size. */
static tg_status conv_transpose_onnx(tg_onnx_op *op) {
    const conv_params *p = tg_onnx_attrs(op);
    tg_tensor *x = tg_onnx_input(op, 0), *w = tg_onnx_input(op, 1), *y = tg_onnx_output(op, 0);
    int64_t pad_h =
        y->shape.dims[2] - ((x->shape.dims[2] - 1) * p->sh - 2 * p->ph + p->dh * (w->shape.dims[2] - 1) + 1);
    int64_t pad_w =
        y->shape.dims[3] - ((x->shape.dims[3] - 1) * p->sw - 2 * p->pw + p->dw * (w->shape.dims[3] - 1) + 1);
    tg_onnx_node *n = conv_node_onnx(op, "ConvTranspose", p);
    tg_onnx_attr_ints(n, "output_padding", (int64_t[]){pad_h, pad_w}, 2);
    return n ? TG_OK : TG_ERROR;
}

/* float16 / bfloat16 inputs reach the forwards as they are (see computed_widened). */
static const tg_function conv2d_fn = {.name = "conv2d",
                                      .num_inputs = 2,
                                      .forward = conv_forward,
                                      .backward = conv_backward,
                                      .low_precision = TG_LOW_PRECISION_NATIVE,
                                      .autocast = TG_AUTOCAST_LOWER,
                                      .onnx = conv_onnx};
static const tg_function conv2d_bias_fn = {.name = "conv2d",
                                           .num_inputs = 3,
                                           .forward = conv_forward,
                                           .backward = conv_backward,
                                           .low_precision = TG_LOW_PRECISION_NATIVE,
                                           .autocast = TG_AUTOCAST_LOWER,
                                           .onnx = conv_onnx};
static const tg_function input_grad_fn = {.name = "conv2d_input_grad",
                                          .num_inputs = 2,
                                          .forward = input_grad_forward,
                                          .backward = input_grad_backward,
                                          .low_precision = TG_LOW_PRECISION_NATIVE,
                                          .autocast = TG_AUTOCAST_NONE,
                                          .onnx = conv_transpose_onnx};
static const tg_function weight_grad_fn = {.name = "conv2d_weight_grad",
                                           .num_inputs = 2,
                                           .forward = weight_grad_forward,
                                           .backward = weight_grad_backward,
                                           .low_precision = TG_LOW_PRECISION_NATIVE,
                                           .autocast = TG_AUTOCAST_NONE};

static tg_tensor *conv_apply(tg_tensor *x, tg_tensor *w, tg_tensor *b, const conv_params *p) {
    conv_params q = *p;
    q.h = x->shape.dims[2];
    q.w = x->shape.dims[3];
    if (b) return tg_apply_args(&conv2d_bias_fn, (tg_tensor *[]){x, w, b}, &q, sizeof q);
    return tg_apply_args(&conv2d_fn, (tg_tensor *[]){x, w}, &q, sizeof q);
}
static tg_tensor *input_grad_apply(tg_tensor *g, tg_tensor *w, const conv_params *p) {
    return tg_apply_args(&input_grad_fn, (tg_tensor *[]){g, w}, p, sizeof *p);
}
static tg_tensor *weight_grad_apply(tg_tensor *x, tg_tensor *g, const conv_params *p) {
    return tg_apply_args(&weight_grad_fn, (tg_tensor *[]){x, g}, p, sizeof *p);
}

/* ======================= public entry ======================= */

/* The checks conv2d and conv_transpose2d share; x_layout and w_layout name the 4-D
 * shapes each expects. A 3-D input passes: conv_entry runs it batched. */
static bool conv_args_ok(const char *op, const tg_tensor *x, const tg_tensor *weight, const tg_tensor *bias,
                         const char *x_layout, const char *w_layout) {
    if (tg_unusable_(x)) return tg_error_unusable_input(op, x, 0), false;
    if (tg_unusable_(weight)) return tg_error_unusable_input(op, weight, 1), false;
    char xs[128], ws[128], d1[16], d2[16];
    if (x->shape.ndim != 3 && x->shape.ndim != 4)
        return tg_error("%s: expected input %s (4-D, or 3-D unbatched), got %s", op, x_layout,
                        tg_shape_str(x->shape, xs, sizeof xs)),
               false;
    if (weight->shape.ndim != 4)
        return tg_error("%s: expected weight %s (4-D), got %s", op, w_layout,
                        tg_shape_str(weight->shape, ws, sizeof ws)),
               false;
    if (!tg_dtype_is_floating(x->dtype) || x->dtype != weight->dtype || (bias && bias->dtype != x->dtype))
        return tg_error("%s: expected input, weight and bias of one floating dtype, got "
                        "input %s, weight %s%s%s",
                        op, tg_dtype_name(x->dtype), tg_dtype_name(weight->dtype), bias ? ", bias " : "",
                        bias ? tg_dtype_name(bias->dtype) : ""),
               false;
    if (!tg_device_equal(x->storage->device, weight->storage->device) ||
        (bias && !tg_device_equal(x->storage->device, bias->storage->device)))
        return tg_error("%s: expected all tensors on one device, got input on %s and weight on %s", op,
                        tg_device_str(x->storage->device, d1), tg_device_str(weight->storage->device, d2)),
               false;
    return true;
}

/* One public conv call: conv_entry checks it and runs the batched op below. */
typedef struct {
    const char *op;
    bool transposed;
    tg_conv_opts conv;                /* !transposed */
    tg_conv_transpose_opts transpose; /* transposed */
    const int64_t *out_size;          /* transposed: NULL, or the [H, W] to reach */
} conv_call;

static tg_tensor *conv2d_batched(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const conv_call *c);
static tg_tensor *conv_transpose2d_batched(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const conv_call *c);

static tg_tensor *conv_entry(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const conv_call *c) {
    bool ok = c->transposed ? conv_args_ok(c->op, x, weight, bias, "[N, C_in, H, W]", "[C_in, C_out / groups, kH, kW]")
                            : conv_args_ok(c->op, x, weight, bias, "[N, C, H, W]", "[C_out, C_in / groups, kH, kW]");
    if (!ok) return NULL;
    if (x->shape.ndim == 4)
        return c->transposed ? conv_transpose2d_batched(x, weight, bias, c) : conv2d_batched(x, weight, bias, c);
    tg_tensor *y = NULL; /* unbatched [C, H, W], as PyTorch allows: run on [1, C, H, W] */
    TG_SCOPE {
        tg_tensor *x4 = tg_unsqueeze(x, 0);
        y = tg_scope_return(tg_squeeze(conv_entry(x4, weight, bias, c), 0));
    }
    return y;
}

static tg_pair pair_or_scalar(tg_pair pair, int scalar, int unset) {
    if (pair.h || pair.w) return pair;
    int v = scalar ? scalar : unset;
    return (tg_pair){v, v};
}
tg_pair tg_conv_opts_stride(tg_conv_opts opts) { return pair_or_scalar(opts.strides, opts.stride, 1); }
tg_pair tg_conv_opts_padding(tg_conv_opts opts) { return pair_or_scalar(opts.paddings, opts.padding, 0); }
tg_pair tg_conv_opts_dilation(tg_conv_opts opts) { return pair_or_scalar(opts.dilations, opts.dilation, 1); }

/* What to pad before and after, per dim. padding="same" (PyTorch's _convolution_mode):
 * dilation * (k - 1) in all, half before, an odd total's extra one after. */
typedef struct {
    int top, bottom, left, right;
} conv_pads;

static conv_pads pads_of(const tg_conv_opts *opts, tg_pair padding, tg_pair dilation, int64_t kh, int64_t kw) {
    if (!opts->padding_same) return (conv_pads){padding.h, padding.h, padding.w, padding.w};
    int th = (int)(dilation.h * (kh - 1)), tw = (int)(dilation.w * (kw - 1));
    return (conv_pads){th / 2, th - th / 2, tw / 2, tw - tw / 2};
}

/* The conv's own padding does zeros on both sides alike; other modes (Conv2d's
 * padding_mode) and the uneven "same" pad the input first, as PyTorch does. Returns the
 * input to convolve and sets the padding left for the conv. */
static tg_tensor *pad_input(tg_tensor *x, conv_pads p, tg_pad_mode mode, tg_pair *conv_padding) {
    bool even = p.top == p.bottom && p.left == p.right;
    if (mode == TG_PAD_CONSTANT && even) {
        *conv_padding = (tg_pair){p.top, p.left};
        return x;
    }
    if (mode == TG_PAD_CONSTANT) { /* the extra ones after, the rest by the conv */
        *conv_padding = (tg_pair){p.top, p.left};
        int64_t pad[4] = {0, p.right - p.left, 0, p.bottom - p.top};
        return tg_pad(x, pad, 4, TG_PAD_CONSTANT, 0);
    }
    *conv_padding = (tg_pair){0, 0};
    int64_t pad[4] = {p.left, p.right, p.top, p.bottom};
    return tg_pad(x, pad, 4, mode, 0);
}

static tg_tensor *conv2d_batched(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const conv_call *c) {
    const char *op = c->op;
    tg_conv_opts opts = c->conv;
    char xs[128], ws[128], bs[128];
    tg_shape_str(x->shape, xs, sizeof xs);
    tg_shape_str(weight->shape, ws, sizeof ws);
    tg_pair stride = tg_conv_opts_stride(opts), dilation = tg_conv_opts_dilation(opts);
    tg_pair padding = tg_conv_opts_padding(opts);
    int groups = opts.groups ? opts.groups : 1;
    if (stride.h <= 0 || stride.w <= 0 || dilation.h <= 0 || dilation.w <= 0 || groups < 0 || padding.h < 0 ||
        padding.w < 0)
        return tg_error("%s: stride (%d, %d) and dilation (%d, %d) must be positive, padding (%d, %d) and groups "
                        "(%d) not negative",
                        op, stride.h, stride.w, dilation.h, dilation.w, padding.h, padding.w, opts.groups),
               NULL;
    if ((unsigned)opts.padding_mode > TG_PAD_CIRCULAR)
        return tg_error("%s: padding_mode %d is not one of zeros, reflect, replicate, circular", op,
                        (int)opts.padding_mode),
               NULL;
    if (opts.padding_same && (padding.h || padding.w))
        return tg_error("%s: padding_same with padding (%d, %d): give one or the other", op, padding.h, padding.w),
               NULL;
    if (opts.padding_same && (stride.h != 1 || stride.w != 1))
        return tg_error("%s: padding='same' is not supported for strided convolutions (stride (%d, %d))", op, stride.h,
                        stride.w),
               NULL;
    int64_t co = weight->shape.dims[0], cg = weight->shape.dims[1];
    if (co % groups != 0)
        return tg_error("%s: weight %s has %lld output channels, not divisible by groups %d", op, ws, (long long)co,
                        groups),
               NULL;
    if (x->shape.dims[1] != cg * groups)
        return tg_error("%s: expected input [N, C, H, W] with C == %lld (weight %s, groups %d), got %s", op,
                        (long long)(cg * groups), ws, groups, xs),
               NULL;
    if (bias && (bias->shape.ndim != 1 || bias->shape.dims[0] != co))
        return tg_error("%s: expected bias [%lld] (weight %s), got %s", op, (long long)co, ws,
                        tg_shape_str(bias->shape, bs, sizeof bs)),
               NULL;
    int64_t kh = weight->shape.dims[2], kw = weight->shape.dims[3];
    x = pad_input(x, pads_of(&opts, padding, dilation, kh, kw), opts.padding_mode, &padding);
    if (!x) return NULL;
    conv_params p = {stride.h, stride.w, padding.h, padding.w,        dilation.h,      dilation.w,
                     groups,   kh,       kw,        x->shape.dims[2], x->shape.dims[3]};
    int64_t ho = tg_conv_out_size(p.h, p.kh, stride.h, padding.h, dilation.h);
    int64_t wo = tg_conv_out_size(p.w, p.kw, stride.w, padding.w, dilation.w);
    if (ho <= 0 || wo <= 0 || p.kh <= 0 || p.kw <= 0)
        return tg_error("%s: output would be empty: input %s with kernel %lldx%lld, stride (%d, %d), padding "
                        "(%d, %d), dilation (%d, %d) gives %lldx%lld",
                        op, xs, (long long)p.kh, (long long)p.kw, stride.h, stride.w, padding.h, padding.w, dilation.h,
                        dilation.w, (long long)(ho > 0 ? ho : 0), (long long)(wo > 0 ? wo : 0)),
               NULL;
    return conv_apply(x, weight, bias, &p);
}

/* Autocast casts the inputs before the checks above, which require one dtype. */
tg_tensor *tg_conv2d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, tg_conv_opts opts) {
    const conv_call call = {.op = "tg_conv2d", .conv = opts};
    if (!tg_autocast_active()) return conv_entry(x, weight, bias, &call);
    tg_tensor *out = NULL;
    TG_SCOPE {
        tg_tensor *t[] = {x, weight, bias};
        if (!tg_autocast_inputs(TG_AUTOCAST_LOWER, t, 3)) out = tg_scope_return(conv_entry(t[0], t[1], t[2], &call));
    }
    return out;
}

/* output_padding >= stride (allowed below dilation): the conv that maps the output size
 * back onto x's does not exist, so take the whole transposed conv (no padding: every
 * tap lands), keep rows and columns [padding, padding + size) and zero-fill what lies
 * past its end (rows no input reaches, as in PyTorch). */
static tg_tensor *uncropped_then_cropped(tg_tensor *x, tg_tensor *w, int stride, int padding, int dilation, int groups,
                                         int64_t ho, int64_t wo) {
    int64_t kh = w->shape.dims[2], kw = w->shape.dims[3];
    int64_t full_h = (x->shape.dims[2] - 1) * stride + (int64_t)dilation * (kh - 1) + 1;
    int64_t full_w = (x->shape.dims[3] - 1) * stride + (int64_t)dilation * (kw - 1) + 1;
    conv_params p = {stride, stride, 0, 0, dilation, dilation, groups, kh, kw, full_h, full_w};
    tg_tensor *y = input_grad_apply(x, w, &p);
    int64_t want[2] = {ho, wo}, full[2] = {full_h, full_w};
    for (int d = 0; d < 2 && y; d++) {
        int64_t keep = full[d] - padding < want[d] ? full[d] - padding : want[d];
        y = tg_narrow(y, 2 + d, padding, keep);
        if (y && keep < want[d]) {
            tg_shape zshape = tg_shape_of(y);
            zshape.dims[2 + d] = want[d] - keep;
            tg_tensor *parts[2] = {y, tg_zeros(zshape, (tg_opts){.dtype = y->dtype, .device = y->storage->device})};
            y = parts[1] ? tg_cat(parts, 2, 2 + d) : NULL;
        }
    }
    return y;
}

/* conv_transpose2d(x, w) = conv2d_input_grad(x, w) for the conv2d whose input has the
 * transposed conv's output size: x plays the conv's output gradient, w [C_in, C_out/g,
 * kH, kW] the conv's weight [Co, C/g, kH, kW]. With output_padding < stride the conv
 * maps the larger size back onto x's exactly; the extra rows and columns take no
 * window and stay zero, as PyTorch's. Larger output_padding: uncropped_then_cropped. */
/* out_size: NULL for opts.output_padding on both dims, else the [H, W] to reach
 * (ConvTranspose2d.forward(input, output_size)): each dim's output_padding is what is
 * left above the size output_padding 0 gives, within [0, stride - 1]. */
static tg_tensor *conv_transpose2d_batched(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const conv_call *c) {
    const char *op = c->op;
    tg_conv_transpose_opts opts = c->transpose;
    const int64_t *out_size = c->out_size;
    char xs[128], ws[128], bs[128];
    tg_shape_str(x->shape, xs, sizeof xs);
    tg_shape_str(weight->shape, ws, sizeof ws);
    int stride = opts.stride ? opts.stride : 1, dilation = opts.dilation ? opts.dilation : 1;
    int groups = opts.groups ? opts.groups : 1, padding = opts.padding, output_padding = opts.output_padding;
    if (stride < 0 || dilation < 0 || groups < 0 || padding < 0 || output_padding < 0)
        return tg_error("%s: stride (%d), padding (%d), output_padding (%d), dilation (%d) and groups (%d) must not "
                        "be negative",
                        op, opts.stride, opts.padding, opts.output_padding, opts.dilation, opts.groups),
               NULL;
    if (!out_size && output_padding >= stride && output_padding >= dilation)
        return tg_error("%s: output_padding (%d) must be smaller than either stride (%d) or dilation (%d)", op,
                        output_padding, stride, dilation),
               NULL;
    int64_t ci = weight->shape.dims[0], cog = weight->shape.dims[1];
    if (ci % groups != 0)
        return tg_error("%s: weight %s has %lld input channels, not divisible by groups %d", op, ws, (long long)ci,
                        groups),
               NULL;
    if (x->shape.dims[1] != ci)
        return tg_error("%s: expected input [N, C_in, H, W] with C_in == %lld (weight %s), got %s", op, (long long)ci,
                        ws, xs),
               NULL;
    int64_t co = cog * groups;
    if (bias && (bias->shape.ndim != 1 || bias->shape.dims[0] != co))
        return tg_error("%s: expected bias [%lld] (weight %s, groups %d), got %s", op, (long long)co, ws, groups,
                        tg_shape_str(bias->shape, bs, sizeof bs)),
               NULL;
    int64_t kh = weight->shape.dims[2], kw = weight->shape.dims[3];
    int64_t min_h = (x->shape.dims[2] - 1) * stride - 2 * (int64_t)padding + (int64_t)dilation * (kh - 1) + 1;
    int64_t min_w = (x->shape.dims[3] - 1) * stride - 2 * (int64_t)padding + (int64_t)dilation * (kw - 1) + 1;
    int64_t pad_h = output_padding, pad_w = output_padding;
    if (out_size) { /* PyTorch's _ConvTransposeNd._output_padding */
        if (out_size[0] < min_h || out_size[0] > min_h + stride - 1 || out_size[1] < min_w ||
            out_size[1] > min_w + stride - 1)
            return tg_error("%s: requested an output size of [%lld, %lld], but valid sizes range from [%lld, %lld] "
                            "to [%lld, %lld] (for an input of [%lld, %lld])",
                            op, (long long)out_size[0], (long long)out_size[1], (long long)min_h, (long long)min_w,
                            (long long)(min_h + stride - 1), (long long)(min_w + stride - 1),
                            (long long)x->shape.dims[2], (long long)x->shape.dims[3]),
                   NULL;
        pad_h = out_size[0] - min_h;
        pad_w = out_size[1] - min_w;
    }
    int64_t ho = min_h + pad_h, wo = min_w + pad_w;
    if (ho <= 0 || wo <= 0 || kh <= 0 || kw <= 0 || x->shape.dims[2] <= 0 || x->shape.dims[3] <= 0)
        return tg_error("%s: output would be empty: input %s with kernel %lldx%lld, stride %d, padding %d, "
                        "dilation %d gives %lldx%lld",
                        op, xs, (long long)kh, (long long)kw, stride, padding, dilation, (long long)(ho > 0 ? ho : 0),
                        (long long)(wo > 0 ? wo : 0)),
               NULL;
    tg_tensor *y = NULL;
    TG_SCOPE {
        tg_tensor *raw;
        if (pad_h < stride && pad_w < stride) {
            conv_params p = {stride, stride, padding, padding, dilation, dilation, groups, kh, kw, ho, wo};
            raw = input_grad_apply(x, weight, &p);
        } else {
            raw = uncropped_then_cropped(x, weight, stride, padding, dilation, groups, ho, wo);
        }
        if (raw && bias) raw = tg_add(raw, tg_view(bias, TG_SHAPE(1, co, 1, 1)));
        if (raw) y = tg_scope_return(raw);
    }
    return y;
}

tg_tensor *tg_conv_transpose2d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, tg_conv_transpose_opts opts) {
    const conv_call call = {.op = "tg_conv_transpose2d", .transposed = true, .transpose = opts};
    return conv_entry(x, weight, bias, &call);
}

tg_tensor *tg_conv_transpose2d_to_size(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, tg_conv_transpose_opts opts,
                                       int64_t out_h, int64_t out_w) {
    const int64_t size[2] = {out_h, out_w};
    const conv_call call = {
        .op = "tg_conv_transpose2d_to_size", .transposed = true, .transpose = opts, .out_size = size};
    return conv_entry(x, weight, bias, &call);
}
