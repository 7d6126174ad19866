/* OpenBLAS, loaded at the first product and held to one thread (ops/cpu/blas.h).
 *
 * Loaded with dlopen rather than linked: a linked OpenBLAS (the pthread build) starts
 * its worker threads before main, each mapping a 128 MiB work buffer; under a memory
 * limit (`ulimit -v`) a worker's mapping fails, OpenBLAS retries it forever, and at exit
 * its destructor waits for that worker: the program hung after printing its error.
 * Loaded here, by a constructor, with OPENBLAS_NUM_THREADS=1 in the environment (the
 * user's value put back right after), it starts no thread at all; tapegrad's pool splits large products
 * instead (ops/cpu/gemm.c). Debian's pthread build is the one loaded: its buffer pool is
 * locked, so concurrent calls are safe (the serial build gave wrong results when two
 * threads called dgemm at once).
 *
 * OpenBLAS picks its kernels by the CPU's model number, and a model newer than its table
 * gets the SSE3 "Prescott" kernels: Debian 12's 0.3.21 on an Emerald Rapids Xeon (family 6,
 * model 207) ran every float32 product at a third of the AVX-512 kernels' speed (the GPT
 * lesson's step 416 against 148 ms). So when the user has not chosen OPENBLAS_CORETYPE and
 * the core loaded has no AVX2 kernels on a CPU that has AVX2 and FMA, OpenBLAS is loaded
 * again with the core this CPU's features call for. */
#include "ops/cpu/blas.h"

#include <cblas.h> /* the enums; the functions come from dlsym */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/parallel.h"

typedef void (*sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, int, int, int, float,
                         const float *, int, const float *, int, float, float *, int);
typedef void (*dgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, int, int, int, double,
                         const double *, int, const double *, int, double, double *, int);

static struct {
    sgemm_fn sgemm;
    dgemm_fn dgemm;
    char core_name[40]; /* openblas_get_corename's, "" when it has none */
    char error[400];    /* why it could not be loaded, for tg_kernel_fail */
} blas;
static _Atomic bool loaded; /* sgemm and dgemm are set */
static bool missing;        /* no OpenBLAS on this machine: no use trying again */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/* Debian's pthread build first (see above), then whatever the loader finds. */
static const char *const library_names[] = {
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "libopenblas.so.0",
    "libopenblas.so",
};

/* Cores of OpenBLAS 0.3.x that have AVX2 kernels (openblas_get_corename's names). */
static bool core_has_avx2_kernels(const char *name) {
    static const char *const names[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcasecmp(name, names[i]) == 0) return true;
    return false;
}

/* The OpenBLAS core for this CPU's vector features, or NULL when it lacks AVX2 + FMA
 * (OpenBLAS's own choice then stands). */
static const char *core_for_this_cpu(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return NULL;
    bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512cd");
    if (avx512 && __builtin_cpu_supports("avx512bf16")) return "COOPERLAKE";
    return avx512 ? "SKYLAKEX" : "HASWELL";
}

static const char *loaded_core_name(void *handle) {
    char *(*corename)(void) = (char *(*)(void))dlsym(handle, "openblas_get_corename");
    return corename ? corename() : NULL;
}

/* OpenBLAS loaded again with OPENBLAS_CORETYPE set when its own choice has no AVX2
 * kernels on a CPU that has AVX2 (see the top); the handle to use. */
static void *load_with_fitting_core(void *handle, const char *library) {
    if (getenv("OPENBLAS_CORETYPE")) return handle; /* the user's choice */
    const char *name = loaded_core_name(handle), *fitting = core_for_this_cpu();
    if (!name || !fitting || core_has_avx2_kernels(name)) return handle;
    dlclose(handle);
    setenv("OPENBLAS_CORETYPE", fitting, 1);
    void *again = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    unsetenv("OPENBLAS_CORETYPE");
    return again ? again : dlopen(library, RTLD_NOW | RTLD_LOCAL);
}

/* One try (under load_lock). A library that is there but cannot be mapped (a memory
 * limit) is out of memory, tried again by the next product; one that is not there
 * is not. */
static void load(void) {
    const char *user = getenv("OPENBLAS_NUM_THREADS");
    char *saved = user ? strdup(user) : NULL;
    setenv("OPENBLAS_NUM_THREADS", "1", 1); /* read by OpenBLAS's constructor, during dlopen */
    void *handle = NULL;
    char why[240] = "";
    for (size_t i = 0; !handle && i < sizeof library_names / sizeof *library_names; i++) {
        handle = dlopen(library_names[i], RTLD_NOW | RTLD_LOCAL);
        const char *text = handle ? NULL : dlerror(); /* copied at once: the next dlopen reuses it */
        if (!handle && i == 0 && text) snprintf(why, sizeof why, "%s", text);
        if (handle) handle = load_with_fitting_core(handle, library_names[i]);
    }
    if (saved) {
        setenv("OPENBLAS_NUM_THREADS", saved, 1);
        free(saved);
    } else {
        unsetenv("OPENBLAS_NUM_THREADS");
    }
    if (!handle) {
        missing = access(library_names[0], R_OK) != 0;
        if (missing)
            snprintf(blas.error, sizeof blas.error,
                     "OpenBLAS is not installed (%s; Debian's libopenblas0-pthread, which ./bazelw installs)", why);
        else snprintf(blas.error, sizeof blas.error, "out of memory loading OpenBLAS (%s)", why);
        return;
    }
    void (*set_threads)(int) = (void (*)(int))dlsym(handle, "openblas_set_num_threads");
    /* Loaded earlier by the program itself, it has worker threads already: one thread,
     * and the idle workers ended (their buffers go back to the pool). */
    void (*shutdown)(void) = (void (*)(void))dlsym(handle, "blas_thread_shutdown_");
    if (set_threads) set_threads(1);
    if (shutdown) shutdown();
    blas.sgemm = (sgemm_fn)dlsym(handle, "cblas_sgemm");
    blas.dgemm = (dgemm_fn)dlsym(handle, "cblas_dgemm");
    const char *core = loaded_core_name(handle);
    snprintf(blas.core_name, sizeof blas.core_name, "%s", core ? core : "");
    if (!blas.sgemm || !blas.dgemm) {
        missing = true;
        snprintf(blas.error, sizeof blas.error, "the OpenBLAS that was loaded has no cblas_sgemm / cblas_dgemm");
        return;
    }
    atomic_store(&loaded, true);
}

/* Loaded as the program starts, while memory is plentiful and no other thread reads
 * the environment: loaded under a memory limit later, libgfortran's initialisation
 * (OpenBLAS needs it) recursed on its own allocation failure until the stack overflowed.
 * A failure here is tried again by the first product. */
__attribute__((constructor)) static void load_at_start(void) {
    pthread_mutex_lock(&load_lock);
    if (!atomic_load(&loaded) && !missing) load();
    pthread_mutex_unlock(&load_lock);
}

/* True when OpenBLAS is there; else false after tg_kernel_fail with the reason. */
static bool ensure_loaded(void) {
    if (atomic_load(&loaded)) return true;
    pthread_mutex_lock(&load_lock);
    if (!atomic_load(&loaded) && !missing) load();
    bool ok = atomic_load(&loaded);
    pthread_mutex_unlock(&load_lock);
    if (!ok) tg_kernel_fail(blas.error);
    return ok;
}

const char *tg_blas_core_name(void) {
    if (!ensure_loaded()) return NULL;
    return blas.core_name;
}

/* ---- OpenBLAS's buffers under a memory limit ----
 * Each OpenBLAS call running at once takes a work buffer from OpenBLAS's pool, and a
 * call that finds none free maps a new one (128 MiB of address space plus a page,
 * else 129 MiB by malloc; buffers are kept for reuse). When that mapping fails,
 * OpenBLAS 0.3.x (blas_memory_alloc) retries forever: under `ulimit -v` a training
 * step hung there. So a call that may need a new buffer (the first on its thread, or
 * more calls at once than ever before) first maps BUFFER_ROOM of its own and unmaps
 * it, under a lock held through the call, and fails as its op's out-of-memory error
 * when there is no room. The margin over 129 MiB covers small allocations of other
 * threads between the check and OpenBLAS's own mapping. Later calls cost two atomic
 * additions.
 * A thread counts as having its buffer only after a product that surely took one: on the
 * AVX-512 cores (SkylakeX, Cooperlake) OpenBLAS 0.3.x runs products of m n k <= 100^3 with
 * small-matrix kernels that take no buffer, and a thread whose first products were such
 * was let through unchecked to a large one, which then hung under `ulimit -v` (lesson 03's
 * evaluation in CI). Vector products (m or n of 1) are left out too: newer OpenBLAS sends
 * them to gemv. */
#define BUFFER_ROOM ((size_t)(129 + 16) << 20)
#define SMALL_PRODUCT_MAX 1e6 /* m n k of OpenBLAS's small-matrix kernels, 100^3 */
#define NO_ROOM                                                                                            \
    "out of memory: OpenBLAS needs a new work buffer of 128 MiB of address space for this thread and the " \
    "process has no room for it (a memory limit such as ulimit -v?)"

static _Atomic int running_calls;  /* calls now, each of which may take a buffer */
static _Atomic int buffered_calls; /* those of them that surely take one */
static _Atomic int most_running;   /* the most calls at once that surely had their buffers */
static _Thread_local bool ran_here;
static pthread_mutex_t room_lock = PTHREAD_MUTEX_INITIALIZER;

/* OpenBLAS takes its buffer with malloc. On a thread that has not allocated before,
 * glibc first maps a new arena (64 MiB of address space) for it, which the room check
 * does not count: the check passed, the arena took the room, and OpenBLAS's malloc then
 * failed and retried forever (seen under ulimit -v on a pool thread). A small
 * allocation makes the thread's arena now, before the check (or falls back to the
 * main arena when there is no room for one). */
static void warm_thread_arena(void) {
    void *volatile p = malloc(64);
    free(p);
}

static bool room_for_a_buffer(void) {
    void *p = mmap(NULL, BUFFER_ROOM, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    munmap(p, BUFFER_ROOM);
    return true;
}

/* Whether OpenBLAS surely took a work buffer for this product (see above). */
static bool takes_a_buffer(int64_t m, int64_t n, int64_t k) {
    return m > 1 && n > 1 && (double)m * (double)n * (double)k > SMALL_PRODUCT_MAX;
}

static void call(bool f64, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                 int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
    if (f64)
        blas.dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
    else
        blas.sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, (float)alpha, a, (int)lda, b, (int)ldb, (float)beta,
                   c, (int)ldc);
}

bool tg_blas_gemm(bool f64, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                  int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    if (!ensure_loaded()) return false;
    bool ok = true, buffered = takes_a_buffer(m, n, k);
    int running = atomic_fetch_add(&running_calls, 1) + 1;
    int holding = buffered ? atomic_fetch_add(&buffered_calls, 1) + 1 : 0;
    if (ran_here && running <= atomic_load(&most_running)) {
        call(f64, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    } else {
        pthread_mutex_lock(&room_lock);
        warm_thread_arena();
        ok = room_for_a_buffer();
        if (ok) {
            call(f64, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
            ran_here = ran_here || buffered;
            int most = atomic_load(&most_running);
            while (holding > most && !atomic_compare_exchange_weak(&most_running, &most, holding)) {
            }
        } else {
            tg_kernel_fail(NO_ROOM);
        }
        pthread_mutex_unlock(&room_lock);
    }
    if (buffered) atomic_fetch_sub(&buffered_calls, 1);
    atomic_fetch_sub(&running_calls, 1);
    return ok;
}
