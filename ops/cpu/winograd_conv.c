/* The 3x3 stride-1 convolution's Winograd F(2x2, 3x3) CPU kernels (ops/cpu/winograd_conv.h):
 * AVX2 + FMA on vectors of 8 channels. */
#include "ops/cpu/winograd_conv.h"

#include <string.h>

#include "core/parallel.h"

enum {
    POS = 16,               /* elements of a transformed 4x4 tile */
    LANES = 8,              /* floats in a vector: channels are taken 8 at a time */
    TILE_ROWS = 6,          /* tiles (or input channels) of a product tile */
    MAX_VECS = 2,           /* vectors of output channels in a product tile: 6 x 2 accumulators */
    BLOCK_FLOATS = 4096,    /* a block's tiles times (C + Co): its V and M stay in L2 */
    CHUNK_FLOATS = 1 << 21, /* the weight gradient's transformed tiles at a time (8 MiB) */
    SPAN = 256              /* tiles a weight-gradient product tile sums before the next tile */
};

/* A 3x3 stride-1 convolution seen as tiles: input [n, c, h, w] padded by ph, pw, output
 * [n, co, ho, wo] in th x tw tiles of 2x2 (the last row or column cut where ho or wo is odd).
 * Tile rows are numbered across images (image b's row ty is b * th + ty); a block is `rows`
 * consecutive tile rows, its tiles in `tb` slots (a multiple of the product tile's 6; the
 * rest zeros). */
typedef struct {
    int64_t n, c, h, w, co, ph, pw, ho, wo;
    int64_t th, tw, wpad; /* wpad: a padded input row, 2 * tw + 2 */
    int64_t rows, tb, blocks;
} wgrid;

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static wgrid make_wgrid(int64_t n, int64_t c, int64_t h, int64_t w, int64_t co, int64_t ph, int64_t pw) {
    wgrid g = {.n = n, .c = c, .h = h, .w = w, .co = co, .ph = ph, .pw = pw};
    g.ho = h + 2 * ph - 2;
    g.wo = w + 2 * pw - 2;
    g.th = (g.ho + 1) / 2;
    g.tw = (g.wo + 1) / 2;
    g.wpad = 2 * g.tw + 2;
    int64_t target = BLOCK_FLOATS / (c + co);
    g.rows = target / g.tw > 0 ? target / g.tw : 1;
    g.rows = min64(g.rows, n * g.th);
    g.tb = round_up(g.rows * g.tw, TILE_ROWS);
    g.blocks = (n * g.th + g.rows - 1) / g.rows;
    return g;
}
static wgrid forward_grid(const tg_conv_geom *g) { return make_wgrid(g->n, g->c, g->h, g->w, g->co, g->ph, g->pw); }
/* The input gradient's: the forward convolution of the gradient padded by 2 - pH, 2 - pW. */
static wgrid input_grad_grid(const tg_conv_geom *g) {
    return make_wgrid(g->n, g->co, g->ho, g->wo, g->c, 2 - g->ph, 2 - g->pw);
}

static bool cpu_has_avx2_fma(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

bool tg_cpu_winograd_conv_applies(const tg_conv_geom *g) {
    return cpu_has_avx2_fma() && g->groups == 1 && g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 &&
           g->dw == 1 && g->ph >= 0 && g->ph <= 2 && g->pw >= 0 && g->pw <= 2 && g->ho > 0 && g->wo > 0 &&
           g->c % LANES == 0 && g->co % LANES == 0 && g->c > 0 && g->co > 0;
}

/* The number of tasks a call splits into: one per thread, none idle for want of blocks. */
static int64_t task_count(int64_t items) {
    int64_t nt = tg_in_parallel_region() ? 1 : tg_get_num_threads();
    return items < nt ? (items > 0 ? items : 1) : nt;
}
static void task_range(int64_t t, int64_t tasks, int64_t items, int64_t *i0, int64_t *i1) {
    *i0 = items * t / tasks;
    *i1 = items * (t + 1) / tasks;
}
/* A task's scratch: a tile row's 4 input rows, channels last, and its 2 output (or
 * gradient) rows. */
static int64_t scratch_size(const wgrid *g) { return 4 * g->wpad * g->c + 2 * g->wpad * g->co; }

/* ======================= the filter transforms (double, rounded once) ======================= */

/* U = G g G^T (4x4) of the 3x3 filter g, G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]. */
static void filter_transform(const double g[3][3], double u[4][4]) {
    double gg[4][3];
    for (int j = 0; j < 3; j++) {
        gg[0][j] = g[0][j];
        gg[1][j] = 0.5 * (g[0][j] + g[1][j] + g[2][j]);
        gg[2][j] = 0.5 * (g[0][j] - g[1][j] + g[2][j]);
        gg[3][j] = g[2][j];
    }
    for (int a = 0; a < 4; a++) {
        u[a][0] = gg[a][0];
        u[a][1] = 0.5 * (gg[a][0] + gg[a][1] + gg[a][2]);
        u[a][2] = 0.5 * (gg[a][0] - gg[a][1] + gg[a][2]);
        u[a][3] = gg[a][2];
    }
}

/* The weight gradient's way back: dg = G^T du G (3x3) of the transformed-domain sum du. */
static void filter_gradient(const double du[4][4], float *dg) {
    double t[3][4];
    for (int j = 0; j < 4; j++) {
        t[0][j] = du[0][j] + 0.5 * (du[1][j] + du[2][j]);
        t[1][j] = 0.5 * (du[1][j] - du[2][j]);
        t[2][j] = 0.5 * (du[1][j] + du[2][j]) + du[3][j];
    }
    for (int i = 0; i < 3; i++) {
        dg[i * 3 + 0] = (float)(t[i][0] + 0.5 * (t[i][1] + t[i][2]));
        dg[i * 3 + 1] = (float)(0.5 * (t[i][1] - t[i][2]));
        dg[i * 3 + 2] = (float)(0.5 * (t[i][1] + t[i][2]) + t[i][3]);
    }
}

/* u [16][cin][co] = G g G^T of every filter: forward, g = w [co][cin][3][3]; flipped (the
 * input gradient), w [cin][co][3][3] with its taps reversed. */
static void transform_weight(const wgrid *g, const float *w, bool flipped, float *u) {
    for (int64_t co = 0; co < g->co; co++)
        for (int64_t ci = 0; ci < g->c; ci++) {
            double f[3][3], t[4][4];
            for (int k = 0; k < 9; k++)
                f[k / 3][k % 3] = flipped ? w[(ci * g->co + co) * 9 + (8 - k)] : w[(co * g->c + ci) * 9 + k];
            filter_transform(f, t);
            for (int pos = 0; pos < POS; pos++) u[(pos * g->c + ci) * g->co + co] = (float)t[pos / 4][pos % 4];
        }
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

/* B^T d B: the 1-D transform (d0, d1, d2, d3) -> (d0 - d2, d1 + d2, d2 - d1, d1 - d3) down
 * the patch's columns, then along its rows. */
TILE_INLINE void input_tile(const __m256 d[4][4], __m256 v[4][4]) {
    __m256 t[4][4];
    for (int j = 0; j < 4; j++) {
        t[0][j] = _mm256_sub_ps(d[0][j], d[2][j]);
        t[1][j] = _mm256_add_ps(d[1][j], d[2][j]);
        t[2][j] = _mm256_sub_ps(d[2][j], d[1][j]);
        t[3][j] = _mm256_sub_ps(d[1][j], d[3][j]);
    }
    for (int i = 0; i < 4; i++) {
        v[i][0] = _mm256_sub_ps(t[i][0], t[i][2]);
        v[i][1] = _mm256_add_ps(t[i][1], t[i][2]);
        v[i][2] = _mm256_sub_ps(t[i][2], t[i][1]);
        v[i][3] = _mm256_sub_ps(t[i][1], t[i][3]);
    }
}

/* v [16][pstride][c], slots [slot, slot + tw) = B^T d B of the tile row (b, ty)'s tiles. */
WINO_TARGET static void transform_input_row(const wgrid *g, const float *x, int64_t b, int64_t ty, float *v,
                                            int64_t pstride, int64_t slot, float *rows) {
    int64_t rs = g->wpad * g->c;
    for (int i = 0; i < 4; i++) stage_input_row(g, x, b, 2 * ty + i - g->ph, rows + i * rs);
    for (int64_t tx = 0; tx < g->tw; tx++)
        for (int64_t c0 = 0; c0 < g->c; c0 += LANES) {
            __m256 d[4][4], t[4][4];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) d[i][j] = _mm256_loadu_ps(rows + i * rs + (2 * tx + j) * g->c + c0);
            input_tile(d, t);
            for (int pos = 0; pos < POS; pos++)
                _mm256_storeu_ps(v + (pos * pstride + slot + tx) * g->c + c0, t[pos / 4][pos % 4]);
        }
}

/* A^T m A (2x2) with A^T = [1 1 1 0; 0 1 -1 -1]. */
TILE_INLINE void output_tile(const __m256 m[4][4], __m256 y[2][2]) {
    __m256 s[2][4];
    for (int j = 0; j < 4; j++) {
        s[0][j] = _mm256_add_ps(_mm256_add_ps(m[0][j], m[1][j]), m[2][j]);
        s[1][j] = _mm256_sub_ps(_mm256_sub_ps(m[1][j], m[2][j]), m[3][j]);
    }
    for (int a = 0; a < 2; a++) {
        y[a][0] = _mm256_add_ps(_mm256_add_ps(s[a][0], s[a][1]), s[a][2]);
        y[a][1] = _mm256_sub_ps(_mm256_sub_ps(s[a][1], s[a][2]), s[a][3]);
    }
}

/* The tile row (b, ty) of y [n][co][ho][wo] (plus the bias) from m [16][tb][co], its
 * tiles at slots [slot, slot + tw). */
WINO_TARGET static void transform_output_row(const wgrid *g, const float *m, int64_t slot, int64_t b, int64_t ty,
                                             const float *bias, float *y, float *rows) {
    int64_t rs = 2 * g->tw * g->co;
    for (int64_t tx = 0; tx < g->tw; tx++)
        for (int64_t c0 = 0; c0 < g->co; c0 += LANES) {
            __m256 t[4][4], o[2][2], add = bias ? _mm256_loadu_ps(bias + c0) : _mm256_setzero_ps();
            for (int pos = 0; pos < POS; pos++)
                t[pos / 4][pos % 4] = _mm256_loadu_ps(m + (pos * g->tb + slot + tx) * g->co + c0);
            output_tile(t, o);
            for (int a = 0; a < 2; a++)
                for (int k = 0; k < 2; k++)
                    _mm256_storeu_ps(rows + a * rs + (2 * tx + k) * g->co + c0, _mm256_add_ps(o[a][k], add));
        }
    for (int a = 0; a < 2 && 2 * ty + a < g->ho; a++)
        from_channels_last(rows + a * rs, g->co, g->wo, y + (b * g->co * g->ho + 2 * ty + a) * g->wo, g->ho * g->wo);
}

/* A dY A^T (4x4) of a 2x2 gradient tile: (d0, d1) -> (d0, d0 + d1, d0 - d1, -d1) along its
 * rows, then down its columns. */
TILE_INLINE void grad_tile(const __m256 d[2][2], __m256 v[4][4]) {
    __m256 zero = _mm256_setzero_ps(), r[2][4];
    for (int a = 0; a < 2; a++) {
        r[a][0] = d[a][0];
        r[a][1] = _mm256_add_ps(d[a][0], d[a][1]);
        r[a][2] = _mm256_sub_ps(d[a][0], d[a][1]);
        r[a][3] = _mm256_sub_ps(zero, d[a][1]);
    }
    for (int j = 0; j < 4; j++) {
        v[0][j] = r[0][j];
        v[1][j] = _mm256_add_ps(r[0][j], r[1][j]);
        v[2][j] = _mm256_sub_ps(r[0][j], r[1][j]);
        v[3][j] = _mm256_sub_ps(zero, r[1][j]);
    }
}

/* mg [16][pstride][co], slots [slot, slot + tw) = A dY A^T of the tile row (b, ty)'s
 * gradient tiles of grad [n][co][ho][wo] (zero past ho and wo). */
WINO_TARGET static void transform_grad_row(const wgrid *g, const float *grad, int64_t b, int64_t ty, float *mg,
                                           int64_t pstride, int64_t slot, float *rows) {
    int64_t rs = 2 * g->tw * g->co;
    for (int a = 0; a < 2; a++) {
        float *row = rows + a * rs;
        int64_t oy = 2 * ty + a;
        if (oy < g->ho) to_channels_last(grad + (b * g->co * g->ho + oy) * g->wo, g->ho * g->wo, g->co, g->wo, row);
        int64_t from = oy < g->ho ? g->wo : 0;
        memset(row + from * g->co, 0, (size_t)((2 * g->tw - from) * g->co) * sizeof(float));
    }
    for (int64_t tx = 0; tx < g->tw; tx++)
        for (int64_t c0 = 0; c0 < g->co; c0 += LANES) {
            __m256 d[2][2], t[4][4];
            for (int a = 0; a < 2; a++)
                for (int k = 0; k < 2; k++) d[a][k] = _mm256_loadu_ps(rows + a * rs + (2 * tx + k) * g->co + c0);
            grad_tile(d, t);
            for (int pos = 0; pos < POS; pos++)
                _mm256_storeu_ps(mg + (pos * pstride + slot + tx) * g->co + c0, t[pos / 4][pos % 4]);
        }
}

/* ======================= products ======================= */

/* out [6][ostride] = sum over input channels ci of a [6][astride] (broadcast a[r][ci]) times
 * b [ci][bstride] (8 vecs outputs): 6 x vecs accumulators, one FMA chain each in order. */
TILE_INLINE void product_tile(int vecs, int rows, int64_t k, const float *a, int64_t astride, const float *b,
                              int64_t bstride, float *out, int64_t ostride, bool accumulate) {
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
            __m256 av = _mm256_broadcast_ss(a + r * astride + i);
#pragma GCC unroll 2
            for (int v = 0; v < vecs; v++) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 2
        for (int v = 0; v < vecs; v++) _mm256_storeu_ps(out + r * ostride + v * LANES, acc[r][v]);
}

/* m [16][tb][co] = the block's 16 products V [pos] U [pos]: rows of 6 tiles against 16
 * (or the last 8) output channels, summed over the input channels. */
WINO_TARGET static void multiply_block(const wgrid *g, const float *v, const float *u, float *m) {
    for (int pos = 0; pos < POS; pos++)
        for (int64_t t0 = 0; t0 < g->tb; t0 += TILE_ROWS) {
            const float *vp = v + (pos * g->tb + t0) * g->c;
            for (int64_t o0 = 0; o0 < g->co; o0 += MAX_VECS * LANES) {
                const float *up = u + pos * g->c * g->co + o0;
                float *mp = m + (pos * g->tb + t0) * g->co + o0;
                if (g->co - o0 >= 2 * LANES) product_tile(2, 6, g->c, vp, g->c, up, g->co, mp, g->co, false);
                else product_tile(1, 6, g->c, vp, g->c, up, g->co, mp, g->co, false);
            }
        }
}

/* du [cin][co] (position pos's) += sum over tiles [t0, t1) of v [t][ci] mg [t][co]: rows of
 * 6 input channels against 16 (or the last 8) output channels. The products' "k" runs over
 * tiles, so a's rows are channels (stride 1 apart along a tile's c values: astride 1, and
 * consecutive tiles c apart). */
TILE_INLINE void gradient_rows(int vecs, int rows, int64_t span, const float *v, int64_t c, const float *mg, int64_t co,
                               float *out) {
    __m256 acc[TILE_ROWS][MAX_VECS];
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 2
        for (int k = 0; k < vecs; k++) acc[r][k] = _mm256_loadu_ps(out + r * co + k * LANES);
    for (int64_t t = 0; t < span; t++) {
        __m256 gv[MAX_VECS];
#pragma GCC unroll 2
        for (int k = 0; k < vecs; k++) gv[k] = _mm256_loadu_ps(mg + t * co + k * LANES);
#pragma GCC unroll 6
        for (int r = 0; r < rows; r++) {
            __m256 xv = _mm256_broadcast_ss(v + t * c + r);
#pragma GCC unroll 2
            for (int k = 0; k < vecs; k++) acc[r][k] = _mm256_fmadd_ps(xv, gv[k], acc[r][k]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 2
        for (int k = 0; k < vecs; k++) _mm256_storeu_ps(out + r * co + k * LANES, acc[r][k]);
}

/* du [cin][co] += position pos's sums over the slots [t0, t1) of v [pstride][c] and
 * mg [pstride][co] (both already at pos). */
WINO_TARGET static void gradient_span(const wgrid *g, const float *v, const float *mg, int64_t t0, int64_t t1,
                                      float *du) {
    int64_t span = t1 - t0;
    const float *vp = v + t0 * g->c, *mp = mg + t0 * g->co;
    for (int64_t c0 = 0; c0 < g->c; c0 += TILE_ROWS) {
        int rows = (int)min64(TILE_ROWS, g->c - c0);
        for (int64_t o0 = 0; o0 < g->co; o0 += MAX_VECS * LANES) {
            float *out = du + c0 * g->co + o0;
            bool two = g->co - o0 >= 2 * LANES;
            switch (rows) { /* constant row counts, so the accumulators stay in registers */
            case 6:
                two ? gradient_rows(2, 6, span, vp + c0, g->c, mp + o0, g->co, out)
                    : gradient_rows(1, 6, span, vp + c0, g->c, mp + o0, g->co, out);
                break;
            case 4:
                two ? gradient_rows(2, 4, span, vp + c0, g->c, mp + o0, g->co, out)
                    : gradient_rows(1, 4, span, vp + c0, g->c, mp + o0, g->co, out);
                break;
            default: /* c is a multiple of 8: 6-row blocks leave 2 or 4 */
                two ? gradient_rows(2, 2, span, vp + c0, g->c, mp + o0, g->co, out)
                    : gradient_rows(1, 2, span, vp + c0, g->c, mp + o0, g->co, out);
                break;
            }
        }
    }
}
#else
/* tg_cpu_winograd_conv_applies is false here: nothing below runs. */
static void transform_input_row(const wgrid *g, const float *x, int64_t b, int64_t ty, float *v, int64_t pstride,
                                int64_t slot, float *rows) {
    (void)g, (void)x, (void)b, (void)ty, (void)v, (void)pstride, (void)slot, (void)rows;
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

/* Zeros in slots [from, to) of every position of a [16][pstride][c]. */
static void zero_slots(float *a, int64_t pstride, int64_t c, int64_t from, int64_t to) {
    if (to > from)
        for (int pos = 0; pos < POS; pos++)
            memset(a + (pos * pstride + from) * c, 0, (size_t)((to - from) * c) * sizeof(float));
}

/* ======================= forward and input gradient ======================= */

static int64_t weight_size(const wgrid *g) { return POS * g->c * g->co; }
static int64_t block_work_size(const wgrid *g) { return POS * g->tb * (g->c + g->co) + scratch_size(g); }
static int64_t conv_work_size(const wgrid *g) { return weight_size(g) + task_count(g->blocks) * block_work_size(g); }

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
        float *v = j->work + t * block_work_size(g), *m = v + POS * g->tb * g->c, *rows = m + POS * g->tb * g->co;
        int64_t k0, k1;
        task_range(t, j->tasks, g->blocks, &k0, &k1);
        for (int64_t k = k0; k < k1; k++) {
            int64_t r0 = k * g->rows, r1 = min64(r0 + g->rows, g->n * g->th);
            for (int64_t r = r0; r < r1; r++)
                transform_input_row(g, j->x, r / g->th, r % g->th, v, g->tb, (r - r0) * g->tw, rows);
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
    conv_job j = {g, x, work, bias, y, work + weight_size(g), task_count(g->blocks)};
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
 * transformed (in parallel over its blocks) into v [16][span][c] and mg [16][span][co], then
 * each position's sums du [16][c][co] go on (in parallel over the 16 positions) over the
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
    return POS * (gr.c + gr.co) * per_chunk * gr.tb + weight_size(&gr) + task_count(per_chunk) * scratch_size(&gr);
}

static void weight_transform_tasks(int64_t t0, int64_t t1, void *arg) {
    const weight_job *j = arg;
    const wgrid *g = j->g;
    for (int64_t t = t0; t < t1; t++) {
        float *rows = j->scratch + t * scratch_size(g);
        int64_t k0, k1;
        task_range(t, j->tasks, j->chunk_blocks, &k0, &k1);
        for (int64_t k = k0; k < k1; k++) {
            int64_t r0 = (j->chunk0 + k) * g->rows, r1 = min64(r0 + g->rows, g->n * g->th);
            for (int64_t r = r0; r < r1; r++) {
                int64_t slot = k * g->tb + (r - r0) * g->tw;
                transform_input_row(g, j->x, r / g->th, r % g->th, j->v, j->span, slot, rows);
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
    int64_t tasks = task_count(per_chunk);
    for (j.chunk0 = 0; j.chunk0 < gr.blocks; j.chunk0 += per_chunk) {
        j.chunk_blocks = min64(per_chunk, gr.blocks - j.chunk0);
        j.tasks = min64(tasks, j.chunk_blocks);
        tg_parallel_for(j.tasks, 1, weight_transform_tasks, &j);
        tg_parallel_for(POS, 1, weight_product_tasks, &j);
    }
    for (int64_t co = 0; co < gr.co; co++)
        for (int64_t ci = 0; ci < gr.c; ci++) {
            double du[4][4];
            for (int pos = 0; pos < POS; pos++) du[pos / 4][pos % 4] = j.du[(pos * gr.c + ci) * gr.co + co];
            filter_gradient(du, gw + (co * gr.c + ci) * 9);
        }
}
