/* The 3x3 stride-1 convolution's Winograd F(4x4, 3x3) CPU kernels (ops/cpu/winograd_conv.h):
 * AVX2 + FMA on vectors of 8 channels; the products on AVX-512 where the CPU has it. */
#include "ops/cpu/winograd_conv.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "core/parallel.h"
#include "ops/cpu/conv_tasks.h"

enum {
    OUT = 4,                /* a tile: 4x4 outputs */
    IN = 6,                 /* from a 6x6 input patch */
    POS = IN * IN,          /* elements of a transformed tile */
    RING = 8,               /* input rows a task keeps, channels last (a tile row reads 6, the next 4 more) */
    LANES = 8,              /* floats in a vector: channels are taken 8 at a time */
    TILE_ROWS = 6,          /* tiles (or input channels) of a product tile */
    MAX_VECS = 2,           /* vectors of output channels in a product tile: 6 x 2 accumulators */
    BLOCK_FLOATS = 2048,    /* a block's tiles times (C + Co): its V and M (36 of each) stay in L2 */
    MIN_BLOCK_TILES = 16,   /* but no fewer tiles: each block streams all 36 C x Co weight slices */
    CHUNK_FLOATS = 1 << 21, /* the weight gradient's transformed tiles at a time (8 MiB) */
    SPAN = 256              /* tiles a weight-gradient product tile sums before the next tile */
};

/* A 3x3 stride-1 convolution seen as tiles: input [n, c, h, w] padded by ph, pw, output
 * [n, co, ho, wo] in th x tw tiles of 4x4 (the last row and column cut where ho or wo is not
 * a multiple of 4).
 * Tile rows are numbered across images (image b's row ty is b * th + ty); a block is `rows`
 * consecutive tile rows, its tiles in `tb` slots (a multiple of the product tile's 6; the
 * rest zeros). */
typedef struct {
    int64_t n, c, h, w, co, ph, pw, ho, wo;
    int64_t th, tw, wpad; /* wpad: a padded input row, 4 * tw + 2 */
    int64_t rows, tb, blocks;
} wgrid;

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static wgrid make_wgrid(int64_t n, int64_t c, int64_t h, int64_t w, int64_t co, int64_t ph, int64_t pw) {
    wgrid g = {.n = n, .c = c, .h = h, .w = w, .co = co, .ph = ph, .pw = pw};
    g.ho = h + 2 * ph - 2;
    g.wo = w + 2 * pw - 2;
    g.th = (g.ho + OUT - 1) / OUT;
    g.tw = (g.wo + OUT - 1) / OUT;
    g.wpad = OUT * g.tw + 2;
    int64_t block_tiles = BLOCK_FLOATS / (c + co);
    if (block_tiles < MIN_BLOCK_TILES) block_tiles = MIN_BLOCK_TILES;
    int64_t most = min64(block_tiles / g.tw > 0 ? block_tiles / g.tw : 1, n * g.th);
    g.rows = most; /* the most rows whose tiles fill whole product tiles, if any do */
    for (int64_t r = most; r > 0; r--)
        if (r * g.tw % TILE_ROWS == 0) {
            g.rows = r;
            break;
        }
    g.tb = round_up(g.rows * g.tw, TILE_ROWS);
    g.blocks = (n * g.th + g.rows - 1) / g.rows;
    return g;
}
static wgrid forward_grid(const tg_conv_geom *g) { return make_wgrid(g->n, g->c, g->h, g->w, g->co, g->ph, g->pw); }
/* The input gradient's: the forward convolution of the gradient padded by 2 - pH, 2 - pW. */
static wgrid input_grad_grid(const tg_conv_geom *g) {
    return make_wgrid(g->n, g->co, g->ho, g->wo, g->c, 2 - g->ph, 2 - g->pw);
}

/* Whether the call has tiles enough to pay for its transformed weights: each call
 * transforms all c x co filters (36 floats each) forward, flipped and back, a cost the
 * tiles share, and the products stream a position's c x co weights once per block of
 * tiles, so wide layers pay more. Measured forward + backward against the GEMM path (2
 * threads, AVX-512 Xeon; ms): c = co = 64 on 8 x 8, 16 tiles 1.85 vs 0.86, 32 tiles
 * 2.11 vs 2.51; 128: 32 tiles 8.7 vs 5.9, 64 tiles 9.9 vs 14.4; 256: 64 tiles 46 vs 44,
 * 128 tiles 59 vs 89; 512 on 4 x 4: 64 tiles 292 vs 75, 256 tiles 532 vs 283 (ResNet-18's
 * last stage at batch 4 took 1.1 s a step this way against 0.24 s). */
bool tg_cpu_winograd_conv_pays(const tg_conv_geom *g) {
    wgrid gr = forward_grid(g);
    int64_t tiles = gr.n * gr.th * gr.tw;
    double width = sqrt((double)g->c * (double)g->co);
    return width <= 256 && (double)tiles >= 16 + width / 4;
}

bool tg_cpu_winograd_conv_applies(const tg_conv_geom *g) {
    return tg_conv_cpu_has_avx2_fma() && g->groups == 1 && g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 &&
           g->dh == 1 && g->dw == 1 && g->ph >= 0 && g->ph <= 2 && g->pw >= 0 && g->pw <= 2 && g->ho > 0 && g->wo > 0 &&
           g->c % LANES == 0 && g->co % LANES == 0 && g->c > 0 && g->co > 0;
}

/* A task's scratch: its ring of input rows, channels last, then a tile row's 4 output (or
 * gradient) rows. */
static int64_t ring_size(const wgrid *g) { return RING * g->wpad * g->c; }
static int64_t scratch_size(const wgrid *g) { return ring_size(g) + OUT * g->wpad * g->co; }

/* ======================= the filter transforms (double, rounded once) ======================= */

/* F(4x4, 3x3) from the points 0, 1, -1, 2, -2 and infinity (Lavin and Gray 2015):
 * Y = A^T [(G g G^T) . (B^T d B)] A. */
static const double G[IN][3] = {{1.0 / 4, 0, 0},
                                {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                {0, 0, 1}};

/* u = G f G^T (6x6) of the 3x3 filter f. */
static void filter_transform(const double f[3][3], double u[IN][IN]) {
    double gf[IN][3] = {{0}};
    for (int a = 0; a < IN; a++)
        for (int k = 0; k < 3; k++)
            for (int j = 0; j < 3; j++) gf[a][j] += G[a][k] * f[k][j];
    for (int a = 0; a < IN; a++)
        for (int b = 0; b < IN; b++) u[a][b] = gf[a][0] * G[b][0] + gf[a][1] * G[b][1] + gf[a][2] * G[b][2];
}

/* The weight gradient's way back: df = G^T du G (3x3) of the transformed-domain sum du. */
static void filter_gradient(const double du[IN][IN], float *df) {
    double t[3][IN] = {{0}};
    for (int i = 0; i < 3; i++)
        for (int a = 0; a < IN; a++)
            for (int b = 0; b < IN; b++) t[i][b] += G[a][i] * du[a][b];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double sum = 0;
            for (int b = 0; b < IN; b++) sum += t[i][b] * G[b][j];
            df[i * 3 + j] = (float)sum;
        }
}

/* u [36][cin][co] = G f G^T of every filter: forward, f = w [co][cin][3][3]; flipped (the
 * input gradient), w [cin][co][3][3] with its taps reversed. Input channels [ci0, ci1). */
typedef struct {
    const wgrid *g;
    const float *w;
    bool flipped;
    float *u;
} weight_transform_job;

static void transform_weight_part(int64_t ci0, int64_t ci1, void *arg) {
    const weight_transform_job *j = arg;
    const wgrid *g = j->g;
    for (int64_t ci = ci0; ci < ci1; ci++) /* co innermost: u's rows are written in order */
        for (int64_t co = 0; co < g->co; co++) {
            double f[3][3], t[IN][IN];
            for (int k = 0; k < 9; k++)
                f[k / 3][k % 3] = j->flipped ? j->w[(ci * g->co + co) * 9 + (8 - k)] : j->w[(co * g->c + ci) * 9 + k];
            filter_transform(f, t);
            for (int pos = 0; pos < POS; pos++) j->u[(pos * g->c + ci) * g->co + co] = (float)t[pos / IN][pos % IN];
        }
}

/* Over the thread pool, as the gradient's way back (weight_gradient_part): every filter is
 * its own, so the bits do not depend on the threads. On one thread these transforms were
 * a serial part of every call (256 channels on 8 x 8 at batch 64, forward + backward: 61
 * against 44 ms on two threads). */
static void transform_weight(const wgrid *g, const float *w, bool flipped, float *u) {
    weight_transform_job j = {g, w, flipped, u};
    tg_parallel_for(g->c, 1 + 2048 / g->co, transform_weight_part, &j);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define WINO_TARGET __attribute__((target("avx2,fma")))
#define TILE_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* ======================= channels last and back ======================= */

TILE_INLINE void transpose8(__m256 r[8]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* dst [w][c] = src [c][w] (channel k's row at src + k * plane). */
WINO_TARGET static void to_channels_last(const float *src, int64_t plane, int64_t c, int64_t w, float *dst) {
    for (int64_t c0 = 0; c0 < c; c0 += LANES) {
        int64_t x0 = 0;
        for (; x0 + LANES <= w; x0 += LANES) {
            __m256 r[8];
            for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_ps(src + (c0 + k) * plane + x0);
            transpose8(r);
            for (int m = 0; m < 8; m++) _mm256_storeu_ps(dst + (x0 + m) * c + c0, r[m]);
        }
        for (; x0 < w; x0++)
            for (int k = 0; k < 8; k++) dst[x0 * c + c0 + k] = src[(c0 + k) * plane + x0];
    }
}

/* dst [c][w] (channel k's row at dst + k * plane) = src [w][c]. */
WINO_TARGET static void from_channels_last(const float *src, int64_t c, int64_t w, float *dst, int64_t plane) {
    for (int64_t c0 = 0; c0 < c; c0 += LANES) {
        int64_t x0 = 0;
        for (; x0 + LANES <= w; x0 += LANES) {
            __m256 r[8];
            for (int m = 0; m < 8; m++) r[m] = _mm256_loadu_ps(src + (x0 + m) * c + c0);
            transpose8(r);
            for (int k = 0; k < 8; k++) _mm256_storeu_ps(dst + (c0 + k) * plane + x0, r[k]);
        }
        for (; x0 < w; x0++)
            for (int k = 0; k < 8; k++) dst[(c0 + k) * plane + x0] = src[x0 * c + c0 + k];
    }
}

/* row [wpad][c] = input row y of image b of x [n][c][h][w], channels last, with pw zero
 * columns before it and zeros after (all zeros above and below the image). */
static void stage_input_row(const wgrid *g, const float *x, int64_t b, int64_t y, float *row) {
    if (y < 0 || y >= g->h) {
        memset(row, 0, (size_t)(g->wpad * g->c) * sizeof(float));
        return;
    }
    memset(row, 0, (size_t)(g->pw * g->c) * sizeof(float));
    to_channels_last(x + b * g->c * g->h * g->w + y * g->w, g->h * g->w, g->c, g->w, row + g->pw * g->c);
    memset(row + (g->pw + g->w) * g->c, 0, (size_t)((g->wpad - g->pw - g->w) * g->c) * sizeof(float));
}

/* ======================= tile transforms ======================= */

#define SPLAT(v) _mm256_set1_ps(v)

/* B^T d: (d0 .. d5) -> (4 d0 - 5 d2 + d4, -4 (d1 + d2) + d3 + d4, 4 (d1 - d2) - d3 + d4,
 * 2 (d3 - d1) - d2 + d4, -2 (d3 - d1) - d2 + d4, 4 d1 - 5 d3 + d5), applied down the patch's
 * columns and then along its rows. */
TILE_INLINE void input_1d(const __m256 d[IN], __m256 v[IN]) {
    __m256 d12 = _mm256_add_ps(d[1], d[2]), d34 = _mm256_add_ps(d[3], d[4]);
    __m256 d1m2 = _mm256_sub_ps(d[1], d[2]), d4m3 = _mm256_sub_ps(d[4], d[3]);
    __m256 d3m1 = _mm256_sub_ps(d[3], d[1]), d4m2 = _mm256_sub_ps(d[4], d[2]);
    v[0] = _mm256_fmadd_ps(SPLAT(4), d[0], _mm256_fnmadd_ps(SPLAT(5), d[2], d[4]));
    v[1] = _mm256_fnmadd_ps(SPLAT(4), d12, d34);
    v[2] = _mm256_fmadd_ps(SPLAT(4), d1m2, d4m3);
    v[3] = _mm256_fmadd_ps(SPLAT(2), d3m1, d4m2);
    v[4] = _mm256_fnmadd_ps(SPLAT(2), d3m1, d4m2);
    v[5] = _mm256_fmadd_ps(SPLAT(4), d[1], _mm256_fnmadd_ps(SPLAT(5), d[3], d[5]));
}

/* The ring's row for padded input row y (0 is the first padding row of image b's plane). */
static float *ring_row(const wgrid *g, float *ring, int64_t y) { return ring + (y % RING) * g->wpad * g->c; }

/* v [36][pstride][c], slots [slot, slot + tw) = B^T d B of the tile row (b, ty)'s tiles.
 * `continues`: the ring already holds this tile row's first 2 input rows (the previous
 * tile row of the same image was the task's last). */
WINO_TARGET static void transform_input_row(const wgrid *g, const float *x, int64_t b, int64_t ty, bool continues,
                                            float *v, int64_t pstride, int64_t slot, float *ring) {
    const float *rows[IN];
    for (int i = 0; i < IN; i++) {
        float *row = ring_row(g, ring, OUT * ty + i);
        if (i >= 2 || !continues) stage_input_row(g, x, b, OUT * ty + i - g->ph, row);
        rows[i] = row;
    }
    for (int64_t tx = 0; tx < g->tw; tx++)
        for (int64_t c0 = 0; c0 < g->c; c0 += LANES) {
            __m256 t[IN][IN];
            for (int j = 0; j < IN; j++) {
                __m256 d[IN], col[IN];
                for (int i = 0; i < IN; i++) d[i] = _mm256_loadu_ps(rows[i] + (OUT * tx + j) * g->c + c0);
                input_1d(d, col);
                for (int i = 0; i < IN; i++) t[i][j] = col[i];
            }
            float *out = v + (slot + tx) * g->c + c0;
            for (int i = 0; i < IN; i++) {
                __m256 o[IN];
                input_1d(t[i], o);
                for (int j = 0; j < IN; j++) _mm256_storeu_ps(out + (i * IN + j) * pstride * g->c, o[j]);
            }
        }
}

/* A^T m: (m0 .. m5) -> (m0 + (m1 + m2) + (m3 + m4), (m1 - m2) + 2 (m3 - m4),
 * (m1 + m2) + 4 (m3 + m4), (m1 - m2) + 8 (m3 - m4) + m5). */
TILE_INLINE void output_1d(const __m256 m[IN], __m256 y[OUT]) {
    __m256 a = _mm256_add_ps(m[1], m[2]), b = _mm256_sub_ps(m[1], m[2]);
    __m256 c = _mm256_add_ps(m[3], m[4]), d = _mm256_sub_ps(m[3], m[4]);
    y[0] = _mm256_add_ps(_mm256_add_ps(m[0], a), c);
    y[1] = _mm256_fmadd_ps(SPLAT(2), d, b);
    y[2] = _mm256_fmadd_ps(SPLAT(4), c, a);
    y[3] = _mm256_add_ps(_mm256_fmadd_ps(SPLAT(8), d, b), m[5]);
}

/* The tile row (b, ty) of y [n][co][ho][wo] (plus the bias) from m [36][tb][co], its tiles
 * at slots [slot, slot + tw). */
WINO_TARGET static void transform_output_row(const wgrid *g, const float *m, int64_t slot, int64_t b, int64_t ty,
                                             const float *bias, float *y, float *rows) {
    int64_t rs = OUT * g->tw * g->co;
    for (int64_t tx = 0; tx < g->tw; tx++)
        for (int64_t c0 = 0; c0 < g->co; c0 += LANES) {
            __m256 s[OUT][IN], add = bias ? _mm256_loadu_ps(bias + c0) : _mm256_setzero_ps();
            const float *in = m + (slot + tx) * g->co + c0;
            for (int j = 0; j < IN; j++) {
                __m256 col[IN], o[OUT];
                for (int i = 0; i < IN; i++) col[i] = _mm256_loadu_ps(in + (i * IN + j) * g->tb * g->co);
                output_1d(col, o);
                for (int a = 0; a < OUT; a++) s[a][j] = o[a];
            }
            for (int a = 0; a < OUT; a++) {
                __m256 o[OUT];
                output_1d(s[a], o);
                for (int k = 0; k < OUT; k++)
                    _mm256_storeu_ps(rows + a * rs + (OUT * tx + k) * g->co + c0, _mm256_add_ps(o[k], add));
            }
        }
    for (int a = 0; a < OUT && OUT * ty + a < g->ho; a++)
        from_channels_last(rows + a * rs, g->co, g->wo, y + (b * g->co * g->ho + OUT * ty + a) * g->wo, g->ho * g->wo);
}

/* A d (the transform the gradient takes back): (d0 .. d3) -> (d0, d0 + d1 + d2 + d3,
 * d0 - d1 + d2 - d3, d0 + 2 d1 + 4 d2 + 8 d3, d0 - 2 d1 + 4 d2 - 8 d3, d3). */
TILE_INLINE void grad_1d(const __m256 d[OUT], __m256 e[IN]) {
    __m256 p = _mm256_add_ps(d[0], d[2]), q = _mm256_add_ps(d[1], d[3]);
    __m256 r = _mm256_fmadd_ps(SPLAT(4), d[2], d[0]), s = _mm256_fmadd_ps(SPLAT(8), d[3], _mm256_add_ps(d[1], d[1]));
    e[0] = d[0];
    e[1] = _mm256_add_ps(p, q);
    e[2] = _mm256_sub_ps(p, q);
    e[3] = _mm256_add_ps(r, s);
    e[4] = _mm256_sub_ps(r, s);
    e[5] = d[3];
}

/* mg [36][pstride][co], slots [slot, slot + tw) = A dY A^T of the tile row (b, ty)'s
 * gradient tiles of grad [n][co][ho][wo] (zero past ho and wo). */
WINO_TARGET static void transform_grad_row(const wgrid *g, const float *grad, int64_t b, int64_t ty, float *mg,
                                           int64_t pstride, int64_t slot, float *rows) {
    int64_t rs = OUT * g->tw * g->co;
    for (int a = 0; a < OUT; a++) {
        float *row = rows + a * rs;
        int64_t oy = OUT * ty + a, from = oy < g->ho ? g->wo : 0;
        if (oy < g->ho) to_channels_last(grad + (b * g->co * g->ho + oy) * g->wo, g->ho * g->wo, g->co, g->wo, row);
        memset(row + from * g->co, 0, (size_t)((OUT * g->tw - from) * g->co) * sizeof(float));
    }
    for (int64_t tx = 0; tx < g->tw; tx++)
        for (int64_t c0 = 0; c0 < g->co; c0 += LANES) {
            __m256 t[IN][OUT];
            for (int k = 0; k < OUT; k++) {
                __m256 d[OUT], col[IN];
                for (int a = 0; a < OUT; a++) d[a] = _mm256_loadu_ps(rows + a * rs + (OUT * tx + k) * g->co + c0);
                grad_1d(d, col);
                for (int i = 0; i < IN; i++) t[i][k] = col[i];
            }
            float *out = mg + (slot + tx) * g->co + c0;
            for (int i = 0; i < IN; i++) {
                __m256 o[IN];
                grad_1d(t[i], o);
                for (int j = 0; j < IN; j++) _mm256_storeu_ps(out + (i * IN + j) * pstride * g->co, o[j]);
            }
        }
}

/* ======================= products ======================= */

/* out [rows][ostride] (+)= sum over i < k of a [r][i] (broadcast, at a + r * row_stride +
 * i * k_stride) times b [i][bstride] (8 vecs outputs): rows x vecs accumulators, one FMA
 * chain each in order. The forward's products run it with tiles as rows and input
 * channels as k; the weight gradient's with input channels as rows and tiles as k,
 * accumulating on out. */
TILE_INLINE void product_tile(int vecs, int rows, int64_t k, const float *a, int64_t row_stride, int64_t k_stride,
                              const float *b, int64_t bstride, float *out, int64_t ostride, bool accumulate) {
    __m256 acc[TILE_ROWS][MAX_VECS];
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 2
        for (int v = 0; v < vecs; v++)
            acc[r][v] = accumulate ? _mm256_loadu_ps(out + r * ostride + v * LANES) : _mm256_setzero_ps();
    for (int64_t i = 0; i < k; i++) {
        __m256 bv[MAX_VECS];
#pragma GCC unroll 2
        for (int v = 0; v < vecs; v++) bv[v] = _mm256_loadu_ps(b + i * bstride + v * LANES);
#pragma GCC unroll 6
        for (int r = 0; r < rows; r++) {
            __m256 av = _mm256_broadcast_ss(a + r * row_stride + i * k_stride);
#pragma GCC unroll 2
            for (int v = 0; v < vecs; v++) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 2
        for (int v = 0; v < vecs; v++) _mm256_storeu_ps(out + r * ostride + v * LANES, acc[r][v]);
}

/* ---- the products on AVX-512 ----
 * product_tile on zmm: 16 output channels a vector, so the tile is 6 rows x 32 output
 * channels (the last vector's lanes `last`, 8 or 16: channel counts are multiples of 8)
 * and each FMA does twice the AVX2 one's work. Every output is still one FMA chain over k
 * in k order from the same start, so the bits are the AVX2 tile's. Taken where the CPU
 * has AVX-512F (tg_cpu_winograd_set_avx512 turns it off, so tests compare the two). */
#define TILE512_INLINE __attribute__((target("avx512f"), always_inline)) static inline
#define WINO512_TARGET __attribute__((target("avx512f")))
enum { LANES512 = 16 };

TILE512_INLINE void product_tile512(int vecs, int rows, __mmask16 last, int64_t k, const float *a, int64_t row_stride,
                                    int64_t k_stride, const float *b, int64_t bstride, float *out, int64_t ostride,
                                    bool accumulate) {
    __mmask16 mask[MAX_VECS];
    __m512 acc[TILE_ROWS][MAX_VECS];
#pragma GCC unroll 2
    for (int v = 0; v < vecs; v++) mask[v] = v < vecs - 1 ? (__mmask16)0xffff : last;
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 2
        for (int v = 0; v < vecs; v++)
            acc[r][v] =
                accumulate ? _mm512_maskz_loadu_ps(mask[v], out + r * ostride + v * LANES512) : _mm512_setzero_ps();
    for (int64_t i = 0; i < k; i++) {
        __m512 bv[MAX_VECS];
#pragma GCC unroll 2
        for (int v = 0; v < vecs; v++) bv[v] = _mm512_maskz_loadu_ps(mask[v], b + i * bstride + v * LANES512);
#pragma GCC unroll 6
        for (int r = 0; r < rows; r++) {
            __m512 av = _mm512_set1_ps(a[r * row_stride + i * k_stride]);
#pragma GCC unroll 2
            for (int v = 0; v < vecs; v++) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 2
        for (int v = 0; v < vecs; v++) _mm512_mask_storeu_ps(out + r * ostride + v * LANES512, mask[v], acc[r][v]);
}

/* out [rows][co] (+)= the band's sums (a's rows, k terms) against every output channel of
 * b [k][co], 32 at a time (the last vector masked): product_tile512 with constant row and
 * vector counts, so the accumulators stay in registers. rows is 6, 4 or 2 (c is a multiple
 * of 8). The forward's bands are 6 tiles over the input channels, the weight gradient's
 * input channels over a span of tiles. */
WINO512_TARGET static void product_band512(int rows, int64_t k, const float *a, int64_t row_stride, int64_t k_stride,
                                           const float *b, int64_t co, float *out, bool accumulate) {
    for (int64_t o0 = 0; o0 < co; o0 += MAX_VECS * LANES512) {
        int64_t width = min64(co - o0, MAX_VECS * LANES512);
        int vecs = width > LANES512 ? 2 : 1;
        __mmask16 last = width % LANES512 ? (__mmask16)((1u << (width % LANES512)) - 1) : (__mmask16)0xffff;
        const float *bp = b + o0;
        float *op = out + o0;
#define BAND_CASE(R)                                                                                        \
    case R:                                                                                                 \
        if (vecs == 2) product_tile512(2, R, last, k, a, row_stride, k_stride, bp, co, op, co, accumulate); \
        else product_tile512(1, R, last, k, a, row_stride, k_stride, bp, co, op, co, accumulate);           \
        break;
        switch (rows) { BAND_CASE(6) BAND_CASE(4) BAND_CASE(2) }
#undef BAND_CASE
    }
}

static _Atomic bool avx512_on = true;

bool tg_cpu_winograd_set_avx512(bool on) { return atomic_exchange(&avx512_on, on); }

static bool avx512_here(void) { return atomic_load(&avx512_on) && __builtin_cpu_supports("avx512f"); }

/* m [36][tb][co] = the block's 36 products V [pos] U [pos]: rows of 6 tiles against 16
 * (or the last 8) output channels, summed over the input channels. */
WINO_TARGET static void multiply_block(const wgrid *g, const float *v, const float *u, float *m) {
    bool wide = avx512_here();
    for (int pos = 0; pos < POS; pos++)
        for (int64_t t0 = 0; t0 < g->tb; t0 += TILE_ROWS) {
            const float *vp = v + (pos * g->tb + t0) * g->c;
            if (wide) {
                product_band512(6, g->c, vp, g->c, 1, u + pos * g->c * g->co, g->co, m + (pos * g->tb + t0) * g->co,
                                false);
                continue;
            }
            for (int64_t o0 = 0; o0 < g->co; o0 += MAX_VECS * LANES) {
                const float *up = u + pos * g->c * g->co + o0;
                float *mp = m + (pos * g->tb + t0) * g->co + o0;
                if (g->co - o0 >= 2 * LANES) product_tile(2, 6, g->c, vp, g->c, 1, up, g->co, mp, g->co, false);
                else product_tile(1, 6, g->c, vp, g->c, 1, up, g->co, mp, g->co, false);
            }
        }
}

/* du [cin][co] += position pos's sums over the slots [t0, t1) of v [pstride][c] and
 * mg [pstride][co] (both already at pos). */
WINO_TARGET static void gradient_span(const wgrid *g, const float *v, const float *mg, int64_t t0, int64_t t1,
                                      float *du) {
    bool wide = avx512_here();
    int64_t span = t1 - t0;
    const float *vp = v + t0 * g->c, *mp = mg + t0 * g->co;
    for (int64_t c0 = 0; c0 < g->c; c0 += TILE_ROWS) {
        int rows = (int)min64(TILE_ROWS, g->c - c0);
        if (wide) {
            product_band512(rows, span, vp + c0, 1, g->c, mp, g->co, du + c0 * g->co, true);
            continue;
        }
        for (int64_t o0 = 0; o0 < g->co; o0 += MAX_VECS * LANES) {
            float *out = du + c0 * g->co + o0;
            bool two = g->co - o0 >= 2 * LANES;
            switch (rows) { /* constant row counts, so the accumulators stay in registers */
            case 6:
                two ? product_tile(2, 6, span, vp + c0, 1, g->c, mp + o0, g->co, out, g->co, true)
                    : product_tile(1, 6, span, vp + c0, 1, g->c, mp + o0, g->co, out, g->co, true);
                break;
            case 4:
                two ? product_tile(2, 4, span, vp + c0, 1, g->c, mp + o0, g->co, out, g->co, true)
                    : product_tile(1, 4, span, vp + c0, 1, g->c, mp + o0, g->co, out, g->co, true);
                break;
            default: /* c is a multiple of 8: 6-row blocks leave 2 or 4 */
                two ? product_tile(2, 2, span, vp + c0, 1, g->c, mp + o0, g->co, out, g->co, true)
                    : product_tile(1, 2, span, vp + c0, 1, g->c, mp + o0, g->co, out, g->co, true);
                break;
            }
        }
    }
}
#else
/* tg_cpu_winograd_conv_applies is false here: nothing below runs. */
bool tg_cpu_winograd_set_avx512(bool on) { return (void)on, false; }
static void transform_input_row(const wgrid *g, const float *x, int64_t b, int64_t ty, bool continues, float *v,
                                int64_t pstride, int64_t slot, float *ring) {
    (void)g, (void)x, (void)b, (void)ty, (void)continues, (void)v, (void)pstride, (void)slot, (void)ring;
}
static void transform_output_row(const wgrid *g, const float *m, int64_t slot, int64_t b, int64_t ty, const float *bias,
                                 float *y, float *rows) {
    (void)g, (void)m, (void)slot, (void)b, (void)ty, (void)bias, (void)y, (void)rows;
}
static void transform_grad_row(const wgrid *g, const float *grad, int64_t b, int64_t ty, float *mg, int64_t pstride,
                               int64_t slot, float *rows) {
    (void)g, (void)grad, (void)b, (void)ty, (void)mg, (void)pstride, (void)slot, (void)rows;
}
static void multiply_block(const wgrid *g, const float *v, const float *u, float *m) {
    (void)g, (void)v, (void)u, (void)m;
}
static void gradient_span(const wgrid *g, const float *v, const float *mg, int64_t t0, int64_t t1, float *du) {
    (void)g, (void)v, (void)mg, (void)t0, (void)t1, (void)du;
}
#endif

/* Zeros in slots [from, to) of every position of a [36][pstride][c]. */
static void zero_slots(float *a, int64_t pstride, int64_t c, int64_t from, int64_t to) {
    if (to > from)
        for (int pos = 0; pos < POS; pos++)
            memset(a + (pos * pstride + from) * c, 0, (size_t)((to - from) * c) * sizeof(float));
}

/* ======================= forward and input gradient ======================= */

static int64_t weight_size(const wgrid *g) { return POS * g->c * g->co; }
static int64_t block_work_size(const wgrid *g) { return POS * g->tb * (g->c + g->co) + scratch_size(g); }
static int64_t conv_work_size(const wgrid *g) {
    return weight_size(g) + tg_conv_task_count(g->blocks) * block_work_size(g);
}

typedef struct {
    const wgrid *g;
    const float *x, *u, *bias;
    float *y, *work;
    int64_t tasks;
} conv_job;

/* Task t's blocks: transform the input, multiply, transform back into y. */
static void conv_tasks(int64_t t0, int64_t t1, void *arg) {
    const conv_job *j = arg;
    const wgrid *g = j->g;
    for (int64_t t = t0; t < t1; t++) {
        float *v = j->work + t * block_work_size(g), *m = v + POS * g->tb * g->c, *ring = m + POS * g->tb * g->co;
        float *rows = ring + ring_size(g);
        int64_t k0, k1;
        tg_conv_task_range(t, j->tasks, g->blocks, &k0, &k1);
        for (int64_t k = k0; k < k1; k++) {
            int64_t r0 = k * g->rows, r1 = min64(r0 + g->rows, g->n * g->th);
            for (int64_t r = r0; r < r1; r++) {
                bool continues = r % g->th > 0 && (r > r0 || k > k0);
                transform_input_row(g, j->x, r / g->th, r % g->th, continues, v, g->tb, (r - r0) * g->tw, ring);
            }
            zero_slots(v, g->tb, g->c, (r1 - r0) * g->tw, g->tb);
            multiply_block(g, v, j->u, m);
            for (int64_t r = r0; r < r1; r++)
                transform_output_row(g, m, (r - r0) * g->tw, r / g->th, r % g->th, j->bias, j->y, rows);
        }
    }
}

static void run_conv(const wgrid *g, const float *x, const float *w, bool flipped, const float *bias, float *y,
                     float *work) {
    transform_weight(g, w, flipped, work);
    conv_job j = {g, x, work, bias, y, work + weight_size(g), tg_conv_task_count(g->blocks)};
    tg_parallel_for(j.tasks, 1, conv_tasks, &j);
}

int64_t tg_cpu_winograd_conv_forward_workspace(const tg_conv_geom *g) {
    wgrid gr = forward_grid(g);
    return conv_work_size(&gr);
}
int64_t tg_cpu_winograd_conv_input_grad_workspace(const tg_conv_geom *g) {
    wgrid gr = input_grad_grid(g);
    return conv_work_size(&gr);
}

void tg_cpu_winograd_conv_forward(const tg_conv_geom *g, const float *x, const float *w, const float *bias, float *y,
                                  float *work) {
    wgrid gr = forward_grid(g);
    run_conv(&gr, x, w, false, bias, y, work);
}
void tg_cpu_winograd_conv_input_grad(const tg_conv_geom *g, const float *grad, const float *w, float *gx, float *work) {
    wgrid gr = input_grad_grid(g);
    run_conv(&gr, grad, w, true, NULL, gx, work);
}

/* ======================= weight gradient ======================= */

/* The batch goes in chunks of `per_chunk` blocks: a chunk's input and gradient tiles are
 * transformed (in parallel over its blocks) into v [36][span][c] and mg [36][span][co], then
 * each position's sums du [36][c][co] go on (in parallel over the 36 positions) over the
 * chunk's tiles in order, chunk after chunk. */
typedef struct {
    const wgrid *g;
    const float *x, *grad;
    float *v, *mg, *du, *scratch;
    int64_t per_chunk, span, chunk0, chunk_blocks, tasks;
} weight_job;

static int64_t blocks_per_chunk(const wgrid *g) {
    int64_t k = CHUNK_FLOATS / (POS * (g->c + g->co) * g->tb);
    return k < 1 ? 1 : min64(k, g->blocks);
}

int64_t tg_cpu_winograd_conv_weight_grad_workspace(const tg_conv_geom *g) {
    wgrid gr = forward_grid(g);
    int64_t per_chunk = blocks_per_chunk(&gr);
    return POS * (gr.c + gr.co) * per_chunk * gr.tb + weight_size(&gr) +
           tg_conv_task_count(per_chunk) * scratch_size(&gr);
}

static void weight_transform_tasks(int64_t t0, int64_t t1, void *arg) {
    const weight_job *j = arg;
    const wgrid *g = j->g;
    for (int64_t t = t0; t < t1; t++) {
        float *ring = j->scratch + t * scratch_size(g), *rows = ring + ring_size(g);
        int64_t k0, k1;
        tg_conv_task_range(t, j->tasks, j->chunk_blocks, &k0, &k1);
        for (int64_t k = k0; k < k1; k++) {
            int64_t r0 = (j->chunk0 + k) * g->rows, r1 = min64(r0 + g->rows, g->n * g->th);
            for (int64_t r = r0; r < r1; r++) {
                int64_t slot = k * g->tb + (r - r0) * g->tw;
                bool continues = r % g->th > 0 && (r > r0 || k > k0);
                transform_input_row(g, j->x, r / g->th, r % g->th, continues, j->v, j->span, slot, ring);
                transform_grad_row(g, j->grad, r / g->th, r % g->th, j->mg, j->span, slot, rows);
            }
            zero_slots(j->v, j->span, g->c, k * g->tb + (r1 - r0) * g->tw, (k + 1) * g->tb);
            zero_slots(j->mg, j->span, g->co, k * g->tb + (r1 - r0) * g->tw, (k + 1) * g->tb);
        }
    }
}

static void weight_product_tasks(int64_t p0, int64_t p1, void *arg) {
    const weight_job *j = arg;
    const wgrid *g = j->g;
    int64_t used = j->chunk_blocks * g->tb;
    for (int64_t pos = p0; pos < p1; pos++)
        for (int64_t s0 = 0; s0 < used; s0 += SPAN)
            gradient_span(g, j->v + pos * j->span * g->c, j->mg + pos * j->span * g->co, s0, min64(s0 + SPAN, used),
                          j->du + pos * g->c * g->co);
}

/* gw [co][cin][3][3] = G^T du G of the summed transformed gradients, output channels
 * [co0, co1) (each filter its own: the same bits on any number of threads). */
typedef struct {
    const wgrid *g;
    const float *du;
    float *gw;
} weight_gradient_job;

static void weight_gradient_part(int64_t co0, int64_t co1, void *arg) {
    const weight_gradient_job *j = arg;
    const wgrid *g = j->g;
    for (int64_t co = co0; co < co1; co++)
        for (int64_t ci = 0; ci < g->c; ci++) {
            double du[IN][IN];
            for (int pos = 0; pos < POS; pos++) du[pos / IN][pos % IN] = j->du[(pos * g->c + ci) * g->co + co];
            filter_gradient(du, j->gw + (co * g->c + ci) * 9);
        }
}

void tg_cpu_winograd_conv_weight_grad(const tg_conv_geom *g, const float *x, const float *grad, float *gw,
                                      float *work) {
    wgrid gr = forward_grid(g);
    int64_t per_chunk = blocks_per_chunk(&gr), span = per_chunk * gr.tb;
    weight_job j = {.g = &gr, .x = x, .grad = grad, .per_chunk = per_chunk, .span = span};
    j.v = work;
    j.mg = j.v + POS * span * gr.c;
    j.du = j.mg + POS * span * gr.co;
    j.scratch = j.du + weight_size(&gr);
    memset(j.du, 0, (size_t)weight_size(&gr) * sizeof(float));
    int64_t tasks = tg_conv_task_count(per_chunk);
    for (j.chunk0 = 0; j.chunk0 < gr.blocks; j.chunk0 += per_chunk) {
        j.chunk_blocks = min64(per_chunk, gr.blocks - j.chunk0);
        j.tasks = min64(tasks, j.chunk_blocks);
        tg_parallel_for(j.tasks, 1, weight_transform_tasks, &j);
        tg_parallel_for(POS, 1, weight_product_tasks, &j);
    }
    weight_gradient_job wj = {&gr, j.du, gw};
    tg_parallel_for(gr.co, 1 + 2048 / gr.c, weight_gradient_part, &wj);
}
