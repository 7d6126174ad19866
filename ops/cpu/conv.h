/* CPU kernels of ops/conv.c: the chunked im2col + GEMM drivers of conv2d's three
 * functions (forward, input gradient, weight gradient) for float32, float64 and
 * bfloat16 operands, on contiguous NCHW tensors, with per-call workspaces the caller
 * allocates (ops/conv.c's workspaces()). */
#ifndef TG_OPS_CPU_CONV_H
#define TG_OPS_CPU_CONV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Elements above which a loop is split across threads. */
#define TG_CONV_GRAIN 32768

/* One conv2d call's attributes (what its tg_functions carry). */
typedef struct {
    int sh, sw, ph, pw, dh, dw, groups;
    int64_t kh, kw; /* weight's spatial size (weight_grad makes the weight) */
    int64_t h, w;   /* input's spatial size (input_grad makes the input) */
} tg_conv_params;

/* The sizes one kernel call works on. */
typedef struct {
    int64_t n, c, h, w; /* input */
    int64_t co, kh, kw; /* weight [co, c / groups, kh, kw] */
    int64_t ho, wo;     /* output */
    int sh, sw, ph, pw, dh, dw, groups;
} tg_conv_geom;

/* How a call splits the batch: `threads` tasks each take a block of whole chunks of `chunk`
 * images (im2col, a single-threaded GEMM -- ops/cpu/gemm.h runs serially inside a parallel
 * loop -- and the copy out), with a workspace each; threads == 1 runs the
 * chunks in order with the parallelism inside im2col and the GEMM instead. Small images
 * make small GEMMs whose threading overhead outweighs them, so splitting by images wins
 * when there are enough of them (note "conv chunks"). */
typedef struct {
    int threads;
    int64_t chunk;
} tg_conv_plan;

tg_conv_geom tg_conv_make_geom(int64_t n, int64_t c, int64_t co, const tg_conv_params *p);
/* elem: the operand's bytes. */
tg_conv_plan tg_conv_make_plan(const tg_conv_geom *g, size_t elem);

/* y [N, Co, Ho, Wo] = conv(x, w) + bias (bias may be NULL). */
void tg_cpu_conv_forward_f32(const tg_conv_geom *g, tg_conv_plan pl, const float *x, const float *w, const float *bias,
                             float *y, void *col_all, void *tmp_all);
void tg_cpu_conv_forward_f64(const tg_conv_geom *g, tg_conv_plan pl, const double *x, const double *w,
                             const double *bias, double *y, void *col_all, void *tmp_all);
void tg_cpu_conv_forward_bf16(const tg_conv_geom *g, tg_conv_plan pl, const uint16_t *x, const uint16_t *w,
                              const float *bias, float *y, void *col_all, void *tmp_all);
/* The bfloat16 forward with a bfloat16 y: each sum (plus the bias) rounded once. */
void tg_cpu_conv_forward_bf16_rounded(const tg_conv_geom *g, tg_conv_plan pl, const uint16_t *x, const uint16_t *w,
                                      const float *bias, uint16_t *y, void *col_all, void *tmp_all);
/* gx [N, C, H, W] = the input gradient of grad [N, Co, Ho, Wo] (zeroed first). */
void tg_cpu_conv_input_grad_f32(const tg_conv_geom *g, tg_conv_plan pl, const float *grad, const float *w, float *gx,
                                void *col_all, void *gmat_all);
void tg_cpu_conv_input_grad_f64(const tg_conv_geom *g, tg_conv_plan pl, const double *grad, const double *w, double *gx,
                                void *col_all, void *gmat_all);
void tg_cpu_conv_input_grad_bf16(const tg_conv_geom *g, tg_conv_plan pl, const uint16_t *grad, const uint16_t *w,
                                 float *gx, void *col_all, void *gmat_all);
/* gw [Co, C/groups, kH, kW] = the weight gradient; part: the partial sums of tasks 1.. */
void tg_cpu_conv_weight_grad_f32(const tg_conv_geom *g, tg_conv_plan pl, const float *x, const float *grad, float *gw,
                                 void *col_all, void *gmat_all, float *part);
void tg_cpu_conv_weight_grad_f64(const tg_conv_geom *g, tg_conv_plan pl, const double *x, const double *grad,
                                 double *gw, void *col_all, void *gmat_all, double *part);
void tg_cpu_conv_weight_grad_bf16(const tg_conv_geom *g, tg_conv_plan pl, const uint16_t *x, const uint16_t *grad,
                                  float *gw, void *col_all, void *gmat_all, float *part);

#ifdef __cplusplus
}
#endif

#endif
