#include "core/storage.h"

#include <stdbool.h>

#include "core/thread_exit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long live_storages;
static atomic_long fail_after = -1;

static _Thread_local size_t thread_bytes;

long tg_live_storages(void) { return atomic_load(&live_storages); }
size_t tg_thread_bytes_allocated(void) { return thread_bytes; }
void tg_debug_fail_allocations_after(long n) { atomic_store(&fail_after, n); }

static bool simulated_failure(void) {
    long n = atomic_load(&fail_after);
    while (n >= 0) {
        if (n == 0) return true;
        if (atomic_compare_exchange_weak(&fail_after, &n, n - 1)) return false;
    }
    return false;
}

/* ---- CPU caching allocator ----
 * Size classes: four per power of two (at most 25% slack), from 64 bytes up.
 * A freed block goes to its class's free list; blocks are returned to the system
 * by tg_cpu_empty_cache, when the cache would pass its cap, or at once when larger
 * than MAX_CACHED_BLOCK. */
#define NUM_CLASSES 200
#define CACHE_CAP ((size_t)1 << 30)
/* Larger blocks go back to the system at once: a training step's tensors are far
 * smaller, and keeping a freed dataset-sized block would only inflate the RSS. */
#define MAX_CACHED_BLOCK ((size_t)32 << 20)

typedef struct block {
    struct block *next;
} block;

/* The shared lists, under cpu_lock. */
static pthread_mutex_t cpu_lock = PTHREAD_MUTEX_INITIALIZER;
static block *free_lists[NUM_CLASSES];

/* The statistics are atomics rather than fields under cpu_lock, so that the thread
 * caches below keep them exact without taking the lock. Each counter is exact; a
 * read while other threads allocate may pair values from slightly different moments. */
static atomic_size_t stat_allocated, stat_cached, stat_peak, stat_system_allocs;

static void count_allocated(size_t rounded) {
    size_t now = atomic_fetch_add_explicit(&stat_allocated, rounded, memory_order_relaxed) + rounded;
    size_t peak = atomic_load_explicit(&stat_peak, memory_order_relaxed);
    while (now > peak &&
           !atomic_compare_exchange_weak_explicit(&stat_peak, &peak, now, memory_order_relaxed, memory_order_relaxed)) {
    }
}

/* A per-thread cache of small blocks in front of the shared lists: a thread that
 * frees and allocates small tensors op after op (the per-op overhead, bench/overhead.c)
 * takes no lock. Only blocks of at most 4 KiB, and at most THREAD_CACHE_BYTES of them
 * per thread (a chain of ops keeps its thousand small outputs alive until backward
 * frees them all, so a few blocks per class would not do); what does not fit goes to
 * the shared lists, and the whole cache goes there when its thread exits. Its blocks
 * count as cached. */
#define THREAD_CACHE_BYTES ((size_t)1 << 20)
#define THREAD_CACHE_CLASSES 28 /* the classes of blocks up to 4 KiB */
static _Thread_local block *thread_lists[THREAD_CACHE_CLASSES];
static _Thread_local size_t thread_cached_bytes;
static _Thread_local bool thread_cache_registered;

static int size_class(size_t nbytes, size_t *rounded) {
    size_t size = nbytes < 64 ? 64 : nbytes;
    int log2 = 63 - __builtin_clzll((size - 1) | 1); /* floor(log2(size - 1)) */
    if (size <= 64) log2 = 5;
    size_t base = (size_t)1 << log2, step = base / 4;
    size_t quarters = (size - base + step - 1) / step; /* 1..4 */
    if (quarters == 0) quarters = 1;
    *rounded = (base + quarters * step + 63) & ~(size_t)63; /* aligned_alloc wants a multiple of 64 */
    return (log2 - 5) * 4 + (int)quarters - 1;
}

/* The block size of class c (size_class's inverse). */
static size_t class_bytes(int c) {
    size_t base = (size_t)1 << (c / 4 + 5), step = base / 4;
    return (base + (size_t)(c % 4 + 1) * step + 63) & ~(size_t)63;
}

/* Moves this thread's cached blocks to the shared lists (at thread exit, and before
 * tg_cpu_empty_cache empties those). */
static void flush_thread_cache(void) {
    pthread_mutex_lock(&cpu_lock);
    for (int c = 0; c < THREAD_CACHE_CLASSES; c++) {
        while (thread_lists[c]) {
            block *b = thread_lists[c];
            thread_lists[c] = b->next;
            b->next = free_lists[c];
            free_lists[c] = b;
        }
    }
    thread_cached_bytes = 0;
    pthread_mutex_unlock(&cpu_lock);
}

static void *cpu_alloc(size_t nbytes) {
    size_t rounded;
    int cls = size_class(nbytes, &rounded);
    void *p = NULL;
    if (cls < THREAD_CACHE_CLASSES && thread_lists[cls]) { /* the common case in a training loop: no lock */
        block *b = thread_lists[cls];
        thread_lists[cls] = b->next;
        thread_cached_bytes -= rounded;
        p = b;
    } else {
        pthread_mutex_lock(&cpu_lock);
        if (cls < NUM_CLASSES && free_lists[cls]) {
            p = free_lists[cls];
            free_lists[cls] = free_lists[cls]->next;
        }
        pthread_mutex_unlock(&cpu_lock);
    }
    if (p) {
        atomic_fetch_sub_explicit(&stat_cached, rounded, memory_order_relaxed);
        count_allocated(rounded);
        return p;
    }
    p = aligned_alloc(64, rounded);
    if (!p) return NULL;
    atomic_fetch_add_explicit(&stat_system_allocs, 1, memory_order_relaxed);
    count_allocated(rounded);
    return p;
}

static void cpu_free(void *p, size_t nbytes) {
    size_t rounded;
    int cls = size_class(nbytes, &rounded);
    atomic_fetch_sub_explicit(&stat_allocated, rounded, memory_order_relaxed);
    bool keep = cls < NUM_CLASSES && rounded <= MAX_CACHED_BLOCK &&
                atomic_load_explicit(&stat_cached, memory_order_relaxed) + rounded <= CACHE_CAP;
    if (!keep) {
        free(p);
        return;
    }
    atomic_fetch_add_explicit(&stat_cached, rounded, memory_order_relaxed);
    block *b = p;
    if (cls < THREAD_CACHE_CLASSES && thread_cached_bytes + rounded <= THREAD_CACHE_BYTES) {
        if (!thread_cache_registered) {
            thread_cache_registered = true;
            tg_at_thread_exit(flush_thread_cache);
        }
        b->next = thread_lists[cls];
        thread_lists[cls] = b;
        thread_cached_bytes += rounded;
        return;
    }
    pthread_mutex_lock(&cpu_lock);
    b->next = free_lists[cls];
    free_lists[cls] = b;
    pthread_mutex_unlock(&cpu_lock);
}

tg_memory_stats tg_cpu_memory_stats(void) {
    return (tg_memory_stats){
        .allocated = atomic_load(&stat_allocated),
        .cached = atomic_load(&stat_cached),
        .peak = atomic_load(&stat_peak),
        .system_allocs = atomic_load(&stat_system_allocs),
    };
}

void tg_cpu_reset_peak_memory_stats(void) { atomic_store(&stat_peak, atomic_load(&stat_allocated)); }

/* The calling thread's cache is emptied too; another thread's (at most
 * THREAD_CACHE_BYTES) stays until that thread exits. */
void tg_cpu_empty_cache(void) {
    flush_thread_cache();
    pthread_mutex_lock(&cpu_lock);
    for (int c = 0; c < NUM_CLASSES; c++) {
        while (free_lists[c]) {
            block *b = free_lists[c];
            free_lists[c] = b->next;
            atomic_fetch_sub(&stat_cached, class_bytes(c));
            free(b);
        }
    }
    pthread_mutex_unlock(&cpu_lock);
}

/* Storage structs are recycled per thread, like tensor structs (core/scope.c): a
 * list through the freed structs' data field, capped. */
#define FREE_STORAGES_MAX 65536
#define FREE_STORAGES_KEPT (TG_RECYCLE_STRUCTS ? FREE_STORAGES_MAX : 0)
static _Thread_local tg_storage *free_storages;
static _Thread_local int free_storage_count;

static _Thread_local bool cache_registered;

static void free_storage_cache(void) {
    while (free_storages) {
        tg_storage *s = free_storages;
        free_storages = s->data;
        free(s);
    }
    free_storage_count = 0;
}

static tg_storage *storage_struct_alloc(void) {
    if (!cache_registered) {
        cache_registered = true;
        tg_at_thread_exit(free_storage_cache);
    }
    tg_storage *s = free_storages;
    if (!s) return malloc(sizeof(tg_storage));
    free_storages = s->data;
    free_storage_count--;
    return s;
}

static void storage_struct_free(tg_storage *s) {
    if (!s) return;
    if (free_storage_count < FREE_STORAGES_KEPT) {
        s->data = free_storages;
        free_storages = s;
        free_storage_count++;
    } else free(s);
}

tg_storage *tg_storage_new(size_t nbytes, tg_device device, const char *op) {
    char dev[16];
    const tg_device_backend *backend = NULL;
    if (device.kind != TG_DEVICE_CPU && !(backend = tg_backend_for(device, op))) return NULL;
    tg_storage *s = storage_struct_alloc();
    if (!s || simulated_failure()) {
        storage_struct_free(s);
        tg_error("%s: out of memory allocating %zu bytes on %s", op, nbytes, tg_device_str(device, dev));
        return NULL;
    }
    s->data = backend ? backend->alloc(device.index, nbytes) : cpu_alloc(nbytes);
    if (!s->data) {
        storage_struct_free(s);
        if (!backend) /* the CUDA backend writes its own message with the free bytes */
            tg_error("%s: out of memory allocating %zu bytes on cpu", op, nbytes);
        return NULL;
    }
    s->nbytes = nbytes;
    thread_bytes += nbytes;
    s->device = device;
    s->refcount = 1;
    s->version = 0;
    atomic_fetch_add(&live_storages, 1);
    return s;
}

void tg_storage_retain(tg_storage *s) { s->refcount++; }

void tg_storage_release(tg_storage *s) {
    if (!s || --s->refcount > 0) return;
    if (s->device.kind == TG_DEVICE_CPU) cpu_free(s->data, s->nbytes);
    else tg_cuda_backend()->free(s->device.index, s->data, s->nbytes);
    storage_struct_free(s);
    atomic_fetch_sub(&live_storages, 1);
}

tg_status tg_copy_bytes(void *dst, tg_device dst_device, const void *src, tg_device src_device, size_t nbytes,
                        const char *op) {
    if (nbytes == 0) return TG_OK;
    if (dst_device.kind == TG_DEVICE_CPU && src_device.kind == TG_DEVICE_CPU) {
        memcpy(dst, src, nbytes);
        return TG_OK;
    }
    const tg_device_backend *b = tg_backend_for(dst_device.kind == TG_DEVICE_CUDA ? dst_device : src_device, op);
    return b ? b->copy(dst, dst_device, src, src_device, nbytes) : TG_ERROR;
}
