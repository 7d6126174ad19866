/* Storage: a reference-counted buffer on one device, shared by a tensor and its views.
 *
 * CPU buffers are 64-byte aligned and come from a caching allocator (freed blocks are
 * kept by size class and reused, so steady-state training steps fault no fresh pages);
 * CUDA buffers come from the device backend's caching allocator. The storage also
 * carries the version counter shared by all views (bumped by in-place ops). */
#ifndef TG_CORE_STORAGE_H
#define TG_CORE_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "core/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_storage {
    void *data;
    size_t nbytes;
    tg_device device;
    long refcount;
    uint64_t version; /* bumped by every in-place write through any view */
} tg_storage;

/* A new storage with refcount 1, or NULL + error (names `op`, the bytes and the device). */
tg_storage *tg_storage_new(size_t nbytes, tg_device device, const char *op);
void tg_storage_retain(tg_storage *s);
void tg_storage_release(tg_storage *s);

/* Copies bytes between any two devices (host<->device, device<->device, host<->host). */
tg_status tg_copy_bytes(void *dst, tg_device dst_device, const void *src, tg_device src_device, size_t nbytes,
                        const char *op);

/* Bytes this thread has allocated for storages so far (never decreases; the profiler
 * reads differences). */
size_t tg_thread_bytes_allocated(void);

/* Number of live storages (tests assert zero leaks). */
long tg_live_storages(void);

/* CPU caching allocator statistics, in bytes. */
typedef struct {
    size_t allocated;     /* held by live storages */
    size_t cached;        /* freed, kept for reuse */
    size_t peak;          /* highest `allocated` so far */
    size_t system_allocs; /* blocks ever taken from the system (a warmed-up training step takes none) */
} tg_memory_stats;
tg_memory_stats tg_cpu_memory_stats(void);
/* torch.cuda.reset_peak_memory_stats, for the CPU allocator: `peak` restarts from what
 * is allocated now, so that a later read gives the peak of what ran in between (the
 * tutorials' activation peak of a training step). Process-wide. */
void tg_cpu_reset_peak_memory_stats(void);
/* Returns every cached CPU block to the system. */
void tg_cpu_empty_cache(void);

/* Test hook: after `n` more successful allocations, every allocation fails (as if out
 * of memory) until called again with n < 0. Process-wide. */
void tg_debug_fail_allocations_after(long n);

#ifdef __cplusplus
}
#endif
#endif
