/* CPU GEMM for the ops (matmul, linear, conv2d): OpenBLAS held to one thread, spread
 * over tapegrad's thread pool (core/parallel.h) by blocks of C when large, with oneDNN's
 * sgemm for the large float32 products where Debian's libdnnl2 is installed
 * (ops/cpu/onednn_gemm.h); and our own bfloat16 GEMM (AVX512-BF16) for matmul and linear,
 * split the same way. */
#ifndef TG_OPS_CPU_GEMM_H
#define TG_OPS_CPU_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C [m, n] = alpha * op(A) op(B) + beta * C, all row-major (cblas_?gemm's arguments with
 * CblasRowMajor). A float32 product of m n k > 100^3 runs on oneDNN when it is installed,
 * cut into blocks fixed by its shape whatever the thread count (TG_ONEDNN=0 in the
 * environment keeps OpenBLAS). Below TG_GEMM_PARALLEL_MIN multiply-adds, with one thread, or inside a
 * parallel loop: one cblas call on this thread. Otherwise C is cut into one block of rows
 * (or of columns, whichever dim is longer) per thread, each block its own cblas call; every
 * element of C is still computed by one call over all of k. A small C (at most 1024
 * elements) of A B^T over a long k (at least 256) is ours instead of OpenBLAS's, on one
 * thread: each element a dot product of two rows (a narrow convolution's weight
 * gradient, where OpenBLAS reaches a third of its speed). A B^T with A 16, 32, 48 or 64
 * rows (a linear layer's forward at a training batch) is ours too: A^T copied once, each
 * thread streaming its own rows of B unpacked (ops/cpu/gemm.c, "a short batch times a
 * weight"); each element still summed over all of k by one thread. A B with B not
 * transposed, m or k at most 64, alpha 1 and beta 0 (a linear layer's input gradient g w
 * and weight gradient g^T x at a training batch; a convolution's products with few
 * channels) is ours too: tiles of 6 rows x 64 columns over packed operands, each element
 * one FMA chain over k in k order, so again independent of the thread count (ops/cpu/gemm.c,
 * "a short side times rows of B"). */
#define TG_GEMM_PARALLEL_MIN (INT64_C(1) << 18)
void tg_gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
/* C [m, n] = op(A) op(B) + bias, bias [n] added to every row (a linear layer's forward).
 * On oneDNN's blocks the bias is added to each block right after its product, while the
 * block is in cache; elsewhere C starts as the bias and the product is added (beta 1).
 * Either way each element is the product's sum plus the bias, rounded once more. */
void tg_gemm_f32_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                      const float *b, int64_t ldb, const float *bias, float *c, int64_t ldc);
void tg_gemm_f64(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                 int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc);

/* Several independent products at once, e.g. a layer's input and weight gradients: the
 * threads are shared among them in proportion to their multiply-adds, each product cut
 * into that many blocks of C (at least one). Two mid-sized products on two threads thus
 * run whole, one per thread, instead of one after the other each split thinly (OpenBLAS
 * scales poorly below a few million multiply-adds per thread). Each element of C is
 * still computed by one call over all of k, as by tg_gemm_f32/f64. More than 8 products
 * run one after another. */
typedef struct {
    bool f64, trans_a, trans_b;
    int64_t m, n, k;
    double alpha;
    const void *a;
    int64_t lda;
    const void *b;
    int64_t ldb;
    double beta;
    void *c;
    int64_t ldc;
    /* Optional (float32, m, n, k > 0): set to op(A)'s columns summed over its m rows ([k]),
     * a linear layer's bias gradient beside its dx = g w. Where the product runs in
     * oneDNN's blocks of rows, each block's rows are summed right after its product has
     * read them (in cache) and the blocks' sums are added in block order; elsewhere in one
     * pass after the product. Either way independent of the thread count. */
    float *a_col_sums;
} tg_gemm_args;
void tg_gemm_many(const tg_gemm_args *products, int count);
/* Whether g's a_col_sums would be summed from the blocks its product reads (float32 on
 * oneDNN's blocks of rows): only there does it save a pass; a linear layer asks first and
 * sums its bias gradient apart otherwise (as fast for the small products, whose other
 * kernels read g once anyway). */
bool tg_gemm_sums_a_in_blocks(const tg_gemm_args *g);

/* bfloat16 GEMM (ops/cpu/gemm_bf16.c): C [m, n] (float32, row-major) = A B, plus C's old values
 * when `accumulate`. A [m, k] and B [k, n] are bfloat16 bit patterns read at element
 * strides (row, column), so any 2-D view (a transpose included) is read without a copy.
 * Products of bfloat16 values are exact in float32 and are summed in float32, each C
 * element over all of k in k order (two k at a time, as vdpbf16ps adds them) whatever the
 * thread count; vdpbf16ps treats subnormal inputs as zero and flushes subnormal sums to
 * zero, as oneDNN's bfloat16 kernels do. Split over the thread pool as tg_gemm_f32.
 * Only on CPUs where tg_gemm_bf16_supported() (x86-64 with AVX512-BF16, checked at run
 * time); callers fall back to the float32 GEMM on widened copies elsewhere. */
bool tg_gemm_bf16_supported(void);
/* Where the CPU has AMX (AMX-BF16) and Linux grants the process its tile registers, the
 * same products run on TDPBF16PS tiles (same inputs, float32 sums two k at a time in k
 * order, so the same error bound; the last bits may differ from vdpbf16ps's). TG_AMX=0
 * in the environment keeps the AVX512-BF16 kernel. tg_gemm_bf16_set_amx(false) does so
 * at run time (tests compare the two) and returns the previous setting. */
bool tg_gemm_bf16_amx_available(void);
bool tg_gemm_bf16_set_amx(bool on);
void tg_gemm_bf16(int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t a_rs, int64_t a_cs, const uint16_t *b,
                  int64_t b_rs, int64_t b_cs, bool accumulate, float *c, int64_t ldc);
/* C [m, n] = A B rounded once to bfloat16 (row-major, ldc in elements; no old C), the
 * rounding done by the kernel on its float32 tile, so no float32 C is written: the same
 * bits as tg_gemm_bf16 followed by a cast. Only when k fits one packed slice (k <= 384,
 * or 1024 with AMX: a weight's gradient over a batch, the tutorials' layers) and the CPU
 * has the instructions: tg_gemm_bf16_rounds(k). */
bool tg_gemm_bf16_rounds(int64_t k);
void tg_gemm_bf16_rounded(int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t a_rs, int64_t a_cs,
                          const uint16_t *b, int64_t b_rs, int64_t b_cs, uint16_t *c, int64_t ldc);

/* The general form of the two above, for autocast's linear on float32 weights (ops/matmul.c):
 * B may be float32 (b32 instead of b), rounded to bfloat16 as core/lowp.h's
 * tg_float_to_bf16_bits while it is packed, so the bits of a cast of B first without the
 * cast's pass over it; C is float32 sums (TG_BF16_C_F32, plus C's old values when
 * accumulate), rounded to bfloat16 (TG_BF16_C_BF16, c is uint16_t) or rounded to bfloat16
 * values stored as float32 (TG_BF16_C_ROUNDED_F32: a cast to bfloat16 and back, fused).
 * The two rounded forms need tg_gemm_bf16_rounds(k): all of k in one packed slice of the
 * kernel in use (384 for AVX512-BF16's, 1024 for AMX's). */
typedef enum { TG_BF16_C_F32, TG_BF16_C_BF16, TG_BF16_C_ROUNDED_F32 } tg_bf16_c_kind;
typedef struct {
    int64_t m, n, k;
    const uint16_t *a;
    int64_t a_rs, a_cs;
    const uint16_t *b;
    const float *b32;
    int64_t b_rs, b_cs;
    tg_bf16_c_kind c_kind;
    bool accumulate;
    const uint16_t *bias; /* or NULL: bias[j] (bfloat16) starts column j's sums, as a C filled with it and
                           * accumulated (a linear's bias, without the pass that fills C); not with accumulate */
    void *c;
    int64_t ldc;
} tg_gemm_bf16_args;
void tg_gemm_bf16_general(tg_gemm_bf16_args args);

#ifdef __cplusplus
}
#endif
#endif
