/* Devices and the backend table.
 *
 * A tensor lives on the CPU or on one CUDA device. Memory and copies for a device
 * kind go through a small table of functions (tg_device_backend); the CUDA table is
 * provided by core/cuda/runtime.cu and found through a weak symbol, so a build
 * without CUDA simply has no table and asking for CUDA is a clear error. */
#ifndef TG_CORE_DEVICE_H
#define TG_CORE_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TG_DEVICE_CPU = 0, TG_DEVICE_CUDA = 1, TG_NUM_DEVICE_KINDS } tg_device_kind;

typedef struct {
    tg_device_kind kind;
    int index; /* CUDA ordinal; 0 for the CPU */
} tg_device;

#ifdef __cplusplus
#define TG_CPU (tg_device{TG_DEVICE_CPU, 0})
#else
#define TG_CPU ((tg_device){TG_DEVICE_CPU, 0})
#endif

/* The CUDA device with this ordinal (torch.device("cuda", i)). Not checked here:
 * using a device that does not exist fails at the first allocation. */
tg_device tg_cuda(int index);
bool tg_device_equal(tg_device a, tg_device b);
/* Writes "cpu" or "cuda:N" into buf (at least 16 bytes) and returns buf. */
const char *tg_device_str(tg_device device, char *buf);

/* True when CUDA was compiled in and at least one device is present. */
bool tg_cuda_available(void);
/* Number of CUDA devices (0 without CUDA or without a GPU). */
int tg_cuda_device_count(void);
/* Waits for all queued work on every CUDA device (torch.cuda.synchronize). No-op without CUDA. */
void tg_cuda_synchronize(void);

/* What the library was built with: CUDA version and architectures, OpenBLAS, the thread pool.
 * A static string. */
const char *tg_build_info(void);

struct tg_tensor;

/* ---- backend table (for the library and for new backends) ---- */
typedef struct tg_device_backend {
    const char *name;
    int (*device_count)(void);
    /* Returns NULL and records an error (with the bytes asked and free) on failure. */
    void *(*alloc)(int index, size_t nbytes);
    void (*free)(int index, void *ptr, size_t nbytes);
    /* Copies nbytes between any two devices where at least one is of this kind. */
    tg_status (*copy)(void *dst, tg_device dst_device, const void *src, tg_device src_device, size_t nbytes);
    tg_status (*memset_zero)(int index, void *ptr, size_t nbytes);
    void (*synchronize)(void);
    /* Same-device element copy: src broadcast to dst's shape, cast to dst's dtype, any strides. */
    tg_status (*copy_strided)(struct tg_tensor *dst, struct tg_tensor *src);
    tg_status (*fill)(struct tg_tensor *t, double value);
} tg_device_backend;

/* The backend for a device kind, or NULL with an error naming `op` when that kind
 * was not compiled in or the device ordinal does not exist. */
const tg_device_backend *tg_backend_for(tg_device device, const char *op);

/* Defined by core/cuda/runtime.cu when CUDA is compiled in. */
const tg_device_backend *tg_cuda_backend(void) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
