/* oneDNN's dnnl_sgemm, loaded at the first large float32 product (ops/cpu/onednn_gemm.h).
 *
 * Why: its JIT kernels ran lesson 10's products (k = 128 to 4096, one side 4096) 10-18%
 * faster than OpenBLAS 0.3.21's on one core of an AVX-512 Xeon, and 2-9% faster with
 * AVX2 kernels only (docs/perf.md). Debian's libdnnl2 is used as OpenBLAS is: loaded
 * with dlopen (no header or link dependency; the declarations below are oneDNN's C API,
 * stable since 1.0), and the products keep running on OpenBLAS when it is not there.
 *
 * Debian builds oneDNN with OpenMP. One thread: each call sets the calling thread's
 * OpenMP count to 1 and puts the old count back after, so oneDNN starts no OpenMP team
 * (their spinning threads collapsed a busy machine, see BUILD), tapegrad's pool does the
 * splitting (ops/cpu/gemm.c), and a program's own OpenMP code keeps its thread count.
 *
 * Out of memory: oneDNN sets up its JIT GEMM kernels (about 6 MB) inside the first
 * dnnl_sgemm, under a std::call_once, and there a failed allocation throws std::bad_alloc
 * that nothing catches: the process aborted (seen under `ulimit -v` in
 * tests/reliability/ulimit_test.sh, when the first large product was the evaluation's).
 * So load() makes that first call itself, on a tiny product, right after checking that
 * LOAD_HEADROOM bytes can be allocated; when they cannot, oneDNN is left unused and the
 * products run on OpenBLAS, whose failures are statuses. Later calls allocate only their
 * packing buffers, and report failing to as a status. */
#include "ops/cpu/onednn_gemm.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"

/* oneDNN's dnnl_status_t values used here, and dnnl_sgemm (dnnl.h; dnnl_dim_t is int64_t). */
enum { DNNL_SUCCESS = 0, DNNL_OUT_OF_MEMORY = 1 };
typedef int (*dnnl_sgemm_fn)(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                             int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
typedef void (*omp_set_num_threads_fn)(int);
typedef int (*omp_get_max_threads_fn)(void);

/* Debian 12's library, then newer sonames (the C API is the same). */
static const char *const library_names[] = {"libdnnl.so.2", "libdnnl.so.3"};

static dnnl_sgemm_fn sgemm;
static omp_set_num_threads_fn set_omp_threads;
static omp_get_max_threads_fn get_omp_threads;
static _Atomic int state; /* 0 not tried, 1 loaded, 2 absent or turned off */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/* Twice and a half what oneDNN 2.6's kernel set-up takes: room for other threads' allocations meanwhile. */
#define LOAD_HEADROOM ((size_t)16 << 20)

/* dnnl_sgemm with the calling thread's OpenMP count at 1, put back after; its status. */
static int sgemm_one_thread(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                            int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    int omp_threads = get_omp_threads ? get_omp_threads() : 1;
    if (omp_threads != 1) set_omp_threads(1);
    int status = sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (omp_threads != 1) set_omp_threads(omp_threads);
    return status;
}

/* oneDNN's first call, on an 8 x 8 x 8 product, while LOAD_HEADROOM bytes were free. */
static bool set_up_kernels(void) {
    void *headroom = malloc(LOAD_HEADROOM);
    if (!headroom) return false;
    free(headroom);
    float a[64] = {0}, b[64] = {0}, c[64];
    return sgemm_one_thread('N', 'N', 8, 8, 8, 1.0f, a, 8, b, 8, 0.0f, c, 8) == DNNL_SUCCESS;
}

static void load(void) {
    const char *off = getenv("TG_ONEDNN");
    if (off && strcmp(off, "0") == 0) {
        atomic_store(&state, 2);
        return;
    }
    void *handle = NULL;
    for (size_t i = 0; !handle && i < sizeof library_names / sizeof *library_names; i++)
        handle = dlopen(library_names[i], RTLD_NOW | RTLD_LOCAL);
    sgemm = handle ? (dnnl_sgemm_fn)dlsym(handle, "dnnl_sgemm") : NULL;
    set_omp_threads = handle ? (omp_set_num_threads_fn)dlsym(handle, "omp_set_num_threads") : NULL;
    get_omp_threads = handle ? (omp_get_max_threads_fn)dlsym(handle, "omp_get_max_threads") : NULL;
    if (!set_omp_threads || !get_omp_threads) /* a build without OpenMP: one thread anyway */
        set_omp_threads = NULL, get_omp_threads = NULL;
    atomic_store(&state, sgemm && set_up_kernels() ? 1 : 2);
}

bool tg_onednn_available(void) {
    int s = atomic_load(&state);
    if (s == 0) {
        pthread_mutex_lock(&load_lock);
        if (atomic_load(&state) == 0) load();
        pthread_mutex_unlock(&load_lock);
        s = atomic_load(&state);
    }
    return s == 1;
}

bool tg_onednn_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                     int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    int status =
        sgemm_one_thread(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (status == DNNL_SUCCESS) return true;
    tg_kernel_fail(status == DNNL_OUT_OF_MEMORY ? "out of memory: oneDNN could not allocate its GEMM's packing buffers"
                                                : "oneDNN's dnnl_sgemm failed");
    return false;
}
