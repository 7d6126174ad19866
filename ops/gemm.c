/* CPU GEMM split over the thread pool (ops/gemm.h). */
#include "ops/gemm.h"

#include <cblas.h>
#include <pthread.h>

#include "core/parallel.h"

#define BLOCK_ALIGN 16 /* block edges on a multiple of the micro-kernels' tile sizes */

typedef struct {
    bool f64, trans_a, trans_b, by_rows;
    int64_t m, n, k, lda, ldb, ldc;
    double alpha, beta;
    const void *a, *b;
    void *c;
} gemm_job;

static void call_blas(const gemm_job *g, int64_t m, int64_t n, const void *a, const void *b, void *c) {
    CBLAS_TRANSPOSE ta = g->trans_a ? CblasTrans : CblasNoTrans, tb = g->trans_b ? CblasTrans : CblasNoTrans;
    if (g->f64)
        cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)g->k, g->alpha, a, (int)g->lda, b, (int)g->ldb,
                    g->beta, c, (int)g->ldc);
    else
        cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)g->k, (float)g->alpha, a, (int)g->lda, b,
                    (int)g->ldb, (float)g->beta, c, (int)g->ldc);
}

/* Units [u0, u1) of BLOCK_ALIGN rows (or columns) of C. */
static void gemm_block(int64_t u0, int64_t u1, void *arg) {
    const gemm_job *g = arg;
    int64_t es = g->f64 ? 8 : 4, dim = g->by_rows ? g->m : g->n;
    int64_t lo = u0 * BLOCK_ALIGN, hi = u1 * BLOCK_ALIGN < dim ? u1 * BLOCK_ALIGN : dim;
    const char *a = g->a, *b = g->b;
    char *c = g->c;
    if (g->by_rows)
        call_blas(g, hi - lo, g->n, a + (g->trans_a ? lo : lo * g->lda) * es, b, c + lo * g->ldc * es);
    else
        call_blas(g, g->m, hi - lo, a, b + (g->trans_b ? lo * g->ldb : lo) * es, c + lo * es);
}

/* OpenBLAS's pthread build, on one thread: concurrent calls are safe (its memory pool is
 * locked) and its own threads never run; our pool splits the work instead. */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_single_thread(void) { openblas_set_num_threads(1); }

static void gemm(gemm_job *g) {
    pthread_once(&blas_once, blas_single_thread);
    if (g->m <= 0 || g->n <= 0) return;
    int threads = tg_get_num_threads();
    if (threads <= 1 || g->m * g->n * g->k < TG_GEMM_PARALLEL_MIN || tg_in_parallel_region()) {
        call_blas(g, g->m, g->n, g->a, g->b, g->c);
        return;
    }
    /* One block per thread along the longer dim of C: the other operand is packed once per
     * block, so few large blocks (OpenBLAS packs B's panel per call). */
    g->by_rows = g->m >= g->n;
    int64_t units = ((g->by_rows ? g->m : g->n) + BLOCK_ALIGN - 1) / BLOCK_ALIGN;
    tg_parallel_for(units, (units + threads - 1) / threads, gemm_block, g);
}

void tg_gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                 int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    gemm_job g = {false, trans_a, trans_b, false, m, n, k, lda, ldb, ldc, alpha, beta, a, b, c};
    gemm(&g);
}

void tg_gemm_f64(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                 int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc) {
    gemm_job g = {true, trans_a, trans_b, false, m, n, k, lda, ldb, ldc, alpha, beta, a, b, c};
    gemm(&g);
}
