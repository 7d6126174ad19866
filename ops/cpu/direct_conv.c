/* The dense stride-1 convolution's direct CPU kernels (ops/cpu/direct_conv.h): AVX2 + FMA
 * register tiles over zero-padded planes. */
#include "ops/cpu/direct_conv.h"

#include <string.h>

#include "core/parallel.h"
#include "ops/cpu/conv_tasks.h"

enum {
    CO_BLOCK = 4,   /* output channels of a tile (broadcast weights) */
    LANES = 8,      /* floats in a vector */
    MAX_VECS = 3,   /* vectors of outputs in a tile: 4 x 3 accumulators */
    TAP_BLOCK = 3,  /* taps of a weight-gradient tile: 4 x 3 accumulators */
    MAX_TAPS = 64,  /* kH * kW the kernels take */
    IMAGE_BLOCK = 4 /* images a weight-gradient tile sums before its accumulators go to memory */
};

/* A stride-1 convolution seen on its padded input's grid: `plane` floats per padded input
 * plane (the padded image, then zeros, so that every tap of every computed output reads
 * inside it), `q` outputs computed per output plane (Ho rows of wp, rounded up to a vector),
 * and the taps' offsets on that grid. */
typedef struct {
    int64_t n, c, h, w, co, ph, pw, ho, wo;
    int64_t wp, q, plane, co_pad; /* co_pad: co rounded up to CO_BLOCK */
    int taps;
    int64_t off[MAX_TAPS];
} grid;

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

static grid make_grid(int64_t n, int64_t c, int64_t h, int64_t w, int64_t co, int64_t kh, int64_t kw, int64_t ph,
                      int64_t pw) {
    grid gr = {.n = n, .c = c, .h = h, .w = w, .co = co, .ph = ph, .pw = pw};
    gr.ho = h + 2 * ph - kh + 1;
    gr.wo = w + 2 * pw - kw + 1;
    gr.wp = w + 2 * pw;
    gr.q = round_up(gr.ho * gr.wp, LANES);
    gr.plane = round_up(gr.q + (kh - 1) * gr.wp + kw - 1, LANES);
    gr.co_pad = round_up(co, CO_BLOCK);
    gr.taps = (int)(kh * kw);
    for (int64_t i = 0; i < kh; i++)
        for (int64_t j = 0; j < kw; j++) gr.off[i * kw + j] = i * gr.wp + j;
    return gr;
}
/* The forward's grid, and the input gradient's: the forward convolution of the gradient
 * [N, Co, Ho, Wo] padded by kH - 1 - pH, kW - 1 - pW into C channels. */
static grid forward_grid(const tg_conv_geom *g) {
    return make_grid(g->n, g->c, g->h, g->w, g->co, g->kh, g->kw, g->ph, g->pw);
}
static grid input_grad_grid(const tg_conv_geom *g) {
    return make_grid(g->n, g->co, g->ho, g->wo, g->c, g->kh, g->kw, g->kh - 1 - g->ph, g->kw - 1 - g->pw);
}

/* The grid computes q outputs per plane for Ho * Wo useful ones: kW - 1 dropped columns a row
 * (a "valid" 5x5 on 12x12 computes 96 for 64, slower than the GEMM path: LeNet's conv2, 7.0
 * against 8.8 ms forward + backward), so at most a quarter dropped. */
static bool grid_dense_enough(const tg_conv_geom *g) {
    grid gr = forward_grid(g);
    return 4 * g->ho * g->wo >= 3 * gr.q;
}

bool tg_cpu_direct_conv_applies(const tg_conv_geom *g) {
    return tg_conv_cpu_has_avx2_fma() && g->groups == 1 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 &&
           g->kh * g->kw <= MAX_TAPS && g->ph < g->kh && g->pw < g->kw && g->ho > 0 && g->wo > 0 &&
           grid_dense_enough(g);
}

/* dst [plane] = src [h, w] zero-padded by ph rows and pw columns on each side, then zeros. */
static void pad_plane(const grid *gr, const float *src, float *dst) {
    memset(dst, 0, (size_t)gr->plane * sizeof(float));
    float *row = dst + gr->ph * gr->wp + gr->pw;
    for (int64_t i = 0; i < gr->h; i++, row += gr->wp) memcpy(row, src + i * gr->w, (size_t)gr->w * sizeof(float));
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DIRECT_TARGET __attribute__((target("avx2,fma")))
#define TILE_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* out[co][0 .. 8 vecs) for the 4 channels of a block = sum over input channels and taps
 * of wb[ci][tap][co] * xq[ci * plane + off[tap] + ...]: 4 x vecs accumulators, one FMA
 * chain per output over (ci, tap) in order. */
TILE_INLINE void forward_tile(int vecs, const grid *gr, int64_t cin, const float *xq, const float *wb, float *out,
                              int64_t out_stride) {
    __m256 acc[CO_BLOCK][MAX_VECS];
#pragma GCC unroll 4
    for (int o = 0; o < CO_BLOCK; o++)
#pragma GCC unroll 3
        for (int v = 0; v < vecs; v++) acc[o][v] = _mm256_setzero_ps();
    for (int64_t ci = 0; ci < cin; ci++) {
        const float *xc = xq + ci * gr->plane;
        for (int t = 0; t < gr->taps; t++, wb += CO_BLOCK) {
            const float *s = xc + gr->off[t];
            __m256 xv[MAX_VECS];
#pragma GCC unroll 3
            for (int v = 0; v < vecs; v++) xv[v] = _mm256_loadu_ps(s + v * LANES);
#pragma GCC unroll 4
            for (int o = 0; o < CO_BLOCK; o++) {
                __m256 wv = _mm256_broadcast_ss(wb + o);
#pragma GCC unroll 3
                for (int v = 0; v < vecs; v++) acc[o][v] = _mm256_fmadd_ps(wv, xv[v], acc[o][v]);
            }
        }
    }
#pragma GCC unroll 4
    for (int o = 0; o < CO_BLOCK; o++)
#pragma GCC unroll 3
        for (int v = 0; v < vecs; v++) _mm256_storeu_ps(out + o * out_stride + v * LANES, acc[o][v]);
}

/* One image: its padded planes xp [cin][plane] -> out [co_pad][q] (the grid's outputs). */
DIRECT_TARGET static void forward_image(const grid *gr, const float *xp, const float *wpk, float *out) {
    int64_t wblock = gr->c * gr->taps * CO_BLOCK;
    for (int64_t q0 = 0; q0 < gr->q; q0 += MAX_VECS * LANES) {
        int64_t left = (gr->q - q0) / LANES;
        for (int64_t cb = 0; cb < gr->co_pad / CO_BLOCK; cb++) {
            const float *wb = wpk + cb * wblock;
            float *o = out + cb * CO_BLOCK * gr->q + q0;
            if (left >= 3) forward_tile(3, gr, gr->c, xp + q0, wb, o, gr->q);
            else if (left == 2) forward_tile(2, gr, gr->c, xp + q0, wb, o, gr->q);
            else forward_tile(1, gr, gr->c, xp + q0, wb, o, gr->q);
        }
    }
}

/* acc[o][t] += sum over the image's positions of g[o][p] * x[t][p + off_t]: gq [co][q] (this
 * block's 4 channels) and the taps' starting points xs[t]. */
TILE_INLINE void weight_tile(int ntap, const grid *gr, const float *gq, const float *const *xs,
                             __m256 acc[][TAP_BLOCK]) {
    for (int64_t p = 0; p < gr->q; p += LANES) {
        __m256 xv[TAP_BLOCK];
#pragma GCC unroll 3
        for (int t = 0; t < ntap; t++) xv[t] = _mm256_loadu_ps(xs[t] + p);
#pragma GCC unroll 4
        for (int o = 0; o < CO_BLOCK; o++) {
            __m256 gv = _mm256_loadu_ps(gq + o * gr->q + p);
#pragma GCC unroll 3
            for (int t = 0; t < ntap; t++) acc[o][t] = _mm256_fmadd_ps(gv, xv[t], acc[o][t]);
        }
    }
}
#else
#define DIRECT_TARGET
static void forward_image(const grid *gr, const float *xp, const float *wpk, float *out) {
    (void)gr, (void)xp, (void)wpk, (void)out; /* tg_cpu_direct_conv_applies is false here */
}
#endif

/* ======================= forward and input gradient ======================= */

/* wpk [co_pad / 4][cin][taps][4] from w: forward, w [co][cin][taps]; flipped (the input
 * gradient), w [cin][co][taps] read with its taps reversed. Channels >= co are zeros. */
static void pack_weight(const grid *gr, const float *w, bool flipped, float *wpk) {
    int64_t cin = gr->c, taps = gr->taps;
    for (int64_t cb = 0; cb < gr->co_pad / CO_BLOCK; cb++)
        for (int64_t ci = 0; ci < cin; ci++)
            for (int64_t t = 0; t < taps; t++)
                for (int64_t o = 0; o < CO_BLOCK; o++) {
                    int64_t co = cb * CO_BLOCK + o;
                    float v = 0;
                    if (co < gr->co)
                        v = flipped ? w[(ci * gr->co + co) * taps + (taps - 1 - t)] : w[(co * cin + ci) * taps + t];
                    *wpk++ = v;
                }
}

static int64_t packed_weight_size(const grid *gr) { return gr->co_pad * gr->c * gr->taps; }
static int64_t image_work_size(const grid *gr) { return gr->c * gr->plane + gr->co_pad * gr->q; }
static int64_t conv_work_size(const grid *gr) {
    return packed_weight_size(gr) + tg_conv_task_count(gr->n) * image_work_size(gr);
}

typedef struct {
    const grid *gr;
    const float *x, *wpk, *bias;
    float *y, *work;
    int64_t tasks;
} conv_job;

/* Task t's images: pad, compute on the grid, copy the Ho x Wo outputs (plus the bias) out. */
static void conv_tasks(int64_t t0, int64_t t1, void *arg) {
    const conv_job *j = arg;
    const grid *gr = j->gr;
    for (int64_t t = t0; t < t1; t++) {
        float *xp = j->work + t * image_work_size(gr), *out = xp + gr->c * gr->plane;
        int64_t b0, b1;
        tg_conv_task_range(t, j->tasks, gr->n, &b0, &b1);
        for (int64_t b = b0; b < b1; b++) {
            for (int64_t ci = 0; ci < gr->c; ci++)
                pad_plane(gr, j->x + (b * gr->c + ci) * gr->h * gr->w, xp + ci * gr->plane);
            forward_image(gr, xp, j->wpk, out);
            for (int64_t co = 0; co < gr->co; co++) {
                float add = j->bias ? j->bias[co] : 0, *dst = j->y + (b * gr->co + co) * gr->ho * gr->wo;
                const float *src = out + co * gr->q;
                for (int64_t i = 0; i < gr->ho; i++)
                    for (int64_t k = 0; k < gr->wo; k++) dst[i * gr->wo + k] = src[i * gr->wp + k] + add;
            }
        }
    }
}

static void run_conv(const grid *gr, const float *x, const float *w, bool flipped, const float *bias, float *y,
                     float *work) {
    pack_weight(gr, w, flipped, work);
    conv_job j = {gr, x, work, bias, y, work + packed_weight_size(gr), tg_conv_task_count(gr->n)};
    tg_parallel_for(j.tasks, 1, conv_tasks, &j);
}

int64_t tg_cpu_direct_conv_forward_workspace(const tg_conv_geom *g) {
    grid gr = forward_grid(g);
    return conv_work_size(&gr);
}
int64_t tg_cpu_direct_conv_input_grad_workspace(const tg_conv_geom *g) {
    grid gr = input_grad_grid(g);
    return conv_work_size(&gr);
}

void tg_cpu_direct_conv_forward(const tg_conv_geom *g, const float *x, const float *w, const float *bias, float *y,
                                float *work) {
    grid gr = forward_grid(g);
    run_conv(&gr, x, w, false, bias, y, work);
}
void tg_cpu_direct_conv_input_grad(const tg_conv_geom *g, const float *grad, const float *w, float *gx, float *work) {
    grid gr = input_grad_grid(g);
    run_conv(&gr, grad, w, true, NULL, gx, work);
}

/* ======================= weight gradient ======================= */

/* The workspace: every image's padded input planes xp [n][c][plane], its gradient on the
 * grid gq [n][co_pad][q] (zero in the dropped columns and the padding channels), and each
 * tile's 4 x 3 vector accumulators. Tiles: (block of 4 output channels, block of 3 of the
 * c * taps (input channel, tap) pairs). */
static int64_t tap_blocks(const grid *gr) { return (gr->c * gr->taps + TAP_BLOCK - 1) / TAP_BLOCK; }
static int64_t tile_count(const grid *gr) { return gr->co_pad / CO_BLOCK * tap_blocks(gr); }
enum { TILE_ACC = CO_BLOCK * TAP_BLOCK * LANES };

int64_t tg_cpu_direct_conv_weight_grad_workspace(const tg_conv_geom *g) {
    grid gr = forward_grid(g);
    return gr.n * gr.c * gr.plane + gr.n * gr.co_pad * gr.q + tile_count(&gr) * TILE_ACC;
}

typedef struct {
    const grid *gr;
    const float *x, *grad;
    float *xp, *gq, *acc, *gw;
    int64_t tasks;
} weight_job;

static void weight_prepare(int64_t b0, int64_t b1, void *arg) {
    const weight_job *j = arg;
    const grid *gr = j->gr;
    for (int64_t b = b0; b < b1; b++) {
        for (int64_t ci = 0; ci < gr->c; ci++)
            pad_plane(gr, j->x + (b * gr->c + ci) * gr->h * gr->w, j->xp + (b * gr->c + ci) * gr->plane);
        float *gq = j->gq + b * gr->co_pad * gr->q;
        memset(gq, 0, (size_t)(gr->co_pad * gr->q) * sizeof(float));
        for (int64_t co = 0; co < gr->co; co++)
            for (int64_t i = 0; i < gr->ho; i++)
                memcpy(gq + co * gr->q + i * gr->wp, j->grad + ((b * gr->co + co) * gr->ho + i) * gr->wo,
                       (size_t)gr->wo * sizeof(float));
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* Tile k over images [b0, b1): its accumulators from memory, summed on, back to memory. */
DIRECT_TARGET static void weight_tile_images(const weight_job *j, int64_t k, int64_t b0, int64_t b1) {
    const grid *gr = j->gr;
    int64_t cb = k / tap_blocks(gr), pair0 = k % tap_blocks(gr) * TAP_BLOCK, pairs = gr->c * gr->taps;
    int ntap = pairs - pair0 < TAP_BLOCK ? (int)(pairs - pair0) : TAP_BLOCK;
    float *mem = j->acc + k * TILE_ACC;
    __m256 acc[CO_BLOCK][TAP_BLOCK];
    for (int o = 0; o < CO_BLOCK; o++)
        for (int t = 0; t < TAP_BLOCK; t++) acc[o][t] = _mm256_loadu_ps(mem + (o * TAP_BLOCK + t) * LANES);
    for (int64_t b = b0; b < b1; b++) {
        const float *xs[TAP_BLOCK];
        for (int t = 0; t < ntap; t++) {
            int64_t pair = pair0 + t, ci = pair / gr->taps;
            xs[t] = j->xp + (b * gr->c + ci) * gr->plane + gr->off[pair % gr->taps];
        }
        const float *gq = j->gq + (b * gr->co_pad + cb * CO_BLOCK) * gr->q;
        if (ntap == 3) weight_tile(3, gr, gq, xs, acc);
        else if (ntap == 2) weight_tile(2, gr, gq, xs, acc);
        else weight_tile(1, gr, gq, xs, acc);
    }
    for (int o = 0; o < CO_BLOCK; o++)
        for (int t = 0; t < TAP_BLOCK; t++) _mm256_storeu_ps(mem + (o * TAP_BLOCK + t) * LANES, acc[o][t]);
}
#else
static void weight_tile_images(const weight_job *j, int64_t k, int64_t b0, int64_t b1) {
    (void)j, (void)k, (void)b0, (void)b1;
}
#endif

/* Task t's tiles, over all images in blocks (so a block's planes stay in cache across its tiles). */
static void weight_tasks(int64_t t0, int64_t t1, void *arg) {
    const weight_job *j = arg;
    int64_t tiles = tile_count(j->gr);
    for (int64_t t = t0; t < t1; t++) {
        int64_t k0, k1;
        tg_conv_task_range(t, j->tasks, tiles, &k0, &k1);
        for (int64_t b0 = 0; b0 < j->gr->n; b0 += IMAGE_BLOCK) {
            int64_t b1 = b0 + IMAGE_BLOCK < j->gr->n ? b0 + IMAGE_BLOCK : j->gr->n;
            for (int64_t k = k0; k < k1; k++) weight_tile_images(j, k, b0, b1);
        }
    }
}

void tg_cpu_direct_conv_weight_grad(const tg_conv_geom *g, const float *x, const float *grad, float *gw, float *work) {
    grid gr = forward_grid(g);
    int64_t tiles = tile_count(&gr), pairs = gr.c * gr.taps;
    float *xp = work, *gq = xp + gr.n * gr.c * gr.plane, *acc = gq + gr.n * gr.co_pad * gr.q;
    memset(acc, 0, (size_t)(tiles * TILE_ACC) * sizeof(float));
    weight_job j = {&gr, x, grad, xp, gq, acc, gw, tg_conv_task_count(tiles)};
    tg_parallel_for(gr.n, 1, weight_prepare, &j);
    tg_parallel_for(j.tasks, 1, weight_tasks, &j);
    /* Each accumulator's 8 lanes, in lane order. */
    for (int64_t k = 0; k < tiles; k++) {
        int64_t cb = k / tap_blocks(&gr), pair0 = k % tap_blocks(&gr) * TAP_BLOCK;
        for (int o = 0; o < CO_BLOCK; o++)
            for (int t = 0; t < TAP_BLOCK; t++) {
                int64_t co = cb * CO_BLOCK + o, pair = pair0 + t;
                if (co >= gr.co || pair >= pairs) continue;
                const float *lanes = acc + k * TILE_ACC + (o * TAP_BLOCK + t) * LANES;
                float s = 0;
                for (int l = 0; l < LANES; l++) s += lanes[l];
                gw[co * pairs + pair] = s;
            }
    }
}
