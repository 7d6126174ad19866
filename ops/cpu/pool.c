/* CPU kernels of 2-D pooling (ops/cpu/pool.h): max (forward, the index scatter of its
 * backward, the gather of its double backward) and average (forward, backward), for
 * float32 and float64 from one body each (ops/cpu/pool_kernels.h), and bfloat16 max
 * pooling through the float32 kernels a plane at a time. */
#include "ops/cpu/pool.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/lowp.h"
#include "core/parallel.h"
#include "ops/cpu/max_pool2x2.h"

/* Elements per task of the average and gather loops. */
#define POOL_GRAIN 16384
/* Elements of input planes above which max pooling goes parallel (per-plane work is tiny). */
#ifndef POOL_PAR_MIN
#define POOL_PAR_MIN 262144
#endif

/* Kernel 2, stride 2, no padding or dilation, every window whole: the 2x2 loops. */
static inline bool whole_2x2(const tg_pool_geometry *q) {
    return q->kh == 2 && q->kw == 2 && q->sh == 2 && q->sw == 2 && q->ph == 0 && q->pw == 0 && q->dh == 1 &&
           q->dw == 1 && 2 * q->ho <= q->h && 2 * q->wo <= q->w;
}

/* The AVX-512 2x2 planes (false: not run, or a NaN met) for float32; none for float64. */
static inline bool vector_2x2_f32(const float *x, int64_t h, int64_t w, int64_t ho, int64_t wo, float *y,
                                  int64_t *idx) {
    return tg_max_pool2x2_available() && tg_max_pool2x2_plane_f32(x, h, w, ho, wo, y, idx);
}
static inline bool vector_2x2_f64(const double *x, int64_t h, int64_t w, int64_t ho, int64_t wo, double *y,
                                  int64_t *idx) {
    return false;
}

#define T float
#define NAME(f) f##_f32
#include "ops/cpu/pool_kernels.h"

#define T double
#define NAME(f) f##_f64
#include "ops/cpu/pool_kernels.h"

/* bfloat16 on the CPU (what autocast gives after a bfloat16 convolution): each task widens
 * one plane at a time into a float32 buffer of its own and runs the float32 kernel on it,
 * so no float32 copy of the whole tensor is made. Max pooling picks elements, so the
 * results are the float32 op's on the widened tensor, rounded exactly; its backward adds
 * the gradient in float32 per plane and rounds each element once, as the float32 op
 * followed by a cast. Double backward (max_gather) stays the widened float32 op. */
typedef struct {
    const tg_pool_geometry *q;
    const uint16_t *src; /* x (forward) or g (backward) */
    uint16_t *dst;
    const int64_t *idx_in;
    int64_t *idx_out;
} max_bf16_job;

static void widen_plane(const uint16_t *src, int64_t n, float *dst) {
    for (int64_t i = 0; i < n; i++) dst[i] = tg_bf16_bits_to_float(src[i]);
}
static void round_plane(const float *src, int64_t n, uint16_t *dst) {
    for (int64_t i = 0; i < n; i++) dst[i] = tg_float_to_bf16_bits(src[i]);
}

/* Whether the AVX-512 2x2 planes (ops/cpu/max_pool2x2.c) apply: max_forward_chunk_f32's k2. */
static bool vector_2x2(const tg_pool_geometry *q) { return whole_2x2(q) && tg_max_pool2x2_available(); }

static void max_forward_bf16_planes(int64_t lo, int64_t hi, void *arg) {
    const max_bf16_job *j = arg;
    const tg_pool_geometry *q = j->q;
    int64_t in_hw = q->h * q->w, out_hw = q->ho * q->wo;
    bool vec = vector_2x2(q);
    float *buf = NULL; /* for the planes the vector kernel leaves: a NaN, or another window */
    for (int64_t pl = lo; pl < hi; pl++) {
        if (vec && tg_max_pool2x2_plane_bf16(j->src + pl * in_hw, q->h, q->w, q->ho, q->wo, j->dst + pl * out_hw,
                                             j->idx_out + pl * out_hw))
            continue;
        if (!buf) buf = malloc((size_t)(in_hw + out_hw) * sizeof(float));
        TG_ASSERT(buf != NULL);
        widen_plane(j->src + pl * in_hw, in_hw, buf);
        max_forward_job_f32 one = {q, buf, buf + in_hw, j->idx_out + pl * out_hw};
        max_forward_chunk_f32(0, 1, &one); /* the float32 kernel on this plane */
        round_plane(buf + in_hw, out_hw, j->dst + pl * out_hw);
    }
    free(buf);
}

static void max_scatter_bf16_planes(int64_t lo, int64_t hi, void *arg) {
    const max_bf16_job *j = arg;
    const tg_pool_geometry *q = j->q;
    int64_t in_hw = q->h * q->w, out_hw = q->ho * q->wo;
    bool vec = vector_2x2(q);
    float *buf = NULL;
    for (int64_t pl = lo; pl < hi; pl++) {
        if (vec && tg_max_unpool2x2_plane_bf16(j->src + pl * out_hw, j->idx_in + pl * out_hw, q->h, q->w, q->ho, q->wo,
                                               j->dst + pl * in_hw))
            continue;
        if (!buf) buf = malloc((size_t)(in_hw + out_hw) * sizeof(float));
        TG_ASSERT(buf != NULL);
        widen_plane(j->src + pl * out_hw, out_hw, buf + in_hw);
        max_index_job_f32 one = {in_hw, out_hw, buf + in_hw, j->idx_in + pl * out_hw, buf};
        max_scatter_chunk_f32(0, 1, &one);
        round_plane(buf, in_hw, j->dst + pl * in_hw);
    }
    free(buf);
}

void tg_cpu_max_pool_bf16(const tg_pool_geometry *q, int64_t planes, const uint16_t *x, uint16_t *y, int64_t *idx) {
    max_bf16_job j = {q, x, y, NULL, idx};
    bool par = planes > 1 && planes * q->h * q->w >= POOL_PAR_MIN; /* tg_cpu_max_pool_f32's split */
    tg_parallel_for(planes, par ? 1 : planes, max_forward_bf16_planes, &j);
}

void tg_cpu_max_unpool_bf16(const tg_pool_geometry *q, int64_t planes, const uint16_t *g, const int64_t *idx,
                            uint16_t *gx) {
    max_bf16_job j = {q, g, gx, idx, NULL};
    bool par = planes > 1 && planes * q->h * q->w >= POOL_PAR_MIN; /* tg_cpu_max_unpool_f32's split */
    tg_parallel_for(planes, par ? 1 : planes, max_scatter_bf16_planes, &j);
}
