// The CUDA backend table (core/device.h) and the per-device context: one stream,
// one cuBLAS handle and one caching allocator per device, created on first use.
//
// Ordering note (STREAM ORDER): every kernel, copy and memset tapegrad queues for
// cuda:i goes on cuda:i's one stream, so work runs in the order it was queued. That
// is what lets the allocator hand a freed block to the next allocation at once
// without waiting: any later use of the block is queued after every earlier use.
// The host waits only where it reads device memory (copies to the host, which
// tg_item and printing use) and in tg_cuda_synchronize.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include <atomic>
#include <type_traits>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/device.h"
#include "core/tensor_impl.h"
#include "core/cuda/internal.h"
#include "core/cuda/runtime.h"

// ============================ kernels ============================

// dst[i] = cast(src[i]) over dst's shape; src broadcast by stride 0.
// ix: operand 0 dst, operand 1 src; dst/src point at each tensor's first element.
template <typename D, typename S> __global__ void copy_strided_kernel(tg_indexer<2> ix, D *dst, const S *src) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < ix.numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[2];
        ix.offsets(i, off);
        dst[off[0]] = tg_cast_value<D>(src[off[1]]);
    }
}

// Contiguous cast: dst[i] = cast(src[i]), i < n.
template <typename D, typename S> __global__ void cast_contiguous_kernel(int64_t n, D *dst, const S *src) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = tg_cast_value<D>(src[i]);
}

// Fill with one element's bits (E: an unsigned type of the element's size).
template <typename E> __global__ void fill_contiguous_kernel(int64_t n, E *dst, E value) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = value;
}

template <typename E> __global__ void fill_strided_kernel(tg_indexer<1> ix, E *dst, E value) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < ix.numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[1];
        ix.offsets(i, off);
        dst[off[0]] = value;
    }
}

// ============================ context ============================

#define MAX_DEVICES 64

namespace {

struct device_context {
    std::mutex lock;
    bool ready = false;
    cudaStream_t stream = nullptr;
    cublasHandle_t cublas = nullptr;
    bool cublas_tf32 = false; // math mode currently set on `cublas`
    int sm_count = 1;
    // Caching allocator: freed blocks by rounded size (see size_class_bytes).
    std::unordered_map<size_t, std::vector<void *>> free_blocks;
    tg_cuda_allocator_stats stats = {};
};

// Never destroyed: tensors freed during process exit still find their allocator.
device_context *const contexts = new device_context[MAX_DEVICES];
std::atomic<bool> allow_tf32{false};

int count_devices() {
    static std::once_flag once;
    static int count = 0;
    std::call_once(once, [] {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0; // no driver / no GPU: not an error
        cudaGetLastError();                               // clear the sticky "no device" state
        count = n < 0 ? 0 : n > MAX_DEVICES ? MAX_DEVICES : n;
    });
    return count;
}

// Blocks are rounded up to 512 bytes, then to a quarter of their power of two (at
// most 25% slack), so the sizes of a training step fall into a few reusable classes.
size_t size_class_bytes(size_t nbytes) {
    if (nbytes <= 512) return 512;
    if (nbytes <= ((size_t)1 << 20)) return (nbytes + 511) / 512 * 512;
    int log2 = 63 - __builtin_clzll((unsigned long long)(nbytes - 1));
    size_t step = ((size_t)1 << log2) / 4;
    return (nbytes + step - 1) / step * step;
}

bool check_device(int device, const char *op) {
    int n = count_devices();
    if (device < 0 || device >= n) {
        tg_error("%s: device cuda:%d requested but %d CUDA device%s present", op, device, n, n == 1 ? " is" : "s are");
        return false;
    }
    return true;
}

// Creates the device's stream and learns its properties (caller holds ctx.lock).
bool init_context(int device, device_context &ctx, const char *op) {
    if (ctx.ready) return true;
    cudaError_t err = cudaSetDevice(device);
    if (err == cudaSuccess) err = cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&ctx.sm_count, cudaDevAttrMultiProcessorCount, device);
    if (err != cudaSuccess) {
        cudaGetLastError();
        tg_cuda_error(op, "initialising the CUDA device", err);
        return false;
    }
    if (ctx.sm_count < 1) ctx.sm_count = 1;
    ctx.ready = true;
    return true;
}

device_context *context_for(int device, const char *op) {
    if (!check_device(device, op)) return nullptr;
    device_context &ctx = contexts[device];
    std::lock_guard<std::mutex> guard(ctx.lock);
    return init_context(device, ctx, op) ? &ctx : nullptr;
}

bool set_device(int device, const char *op) {
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current == device) return true;
    cudaError_t err = cudaSetDevice(device);
    if (err != cudaSuccess) {
        cudaGetLastError();
        tg_cuda_error(op, "cudaSetDevice", err);
        return false;
    }
    return true;
}

// Returns every cached block of ctx to the driver (caller holds ctx.lock and has
// made the device current). Waits for the stream first: a cached block may still be
// read by queued work (see STREAM ORDER).
void release_cached(device_context &ctx) {
    if (ctx.stream) cudaStreamSynchronize(ctx.stream);
    for (auto &entry : ctx.free_blocks) {
        for (void *p : entry.second) {
            cudaFree(p);
            ctx.stats.num_frees++;
        }
        entry.second.clear();
    }
    ctx.free_blocks.clear();
    ctx.stats.cached = 0;
}

} // namespace

// ============================ context API (internal.h) ============================

tg_status tg_cuda_error(const char *op, const char *what, cudaError_t err) {
    return tg_error("%s: %s failed: %s (%s)", op, what, cudaGetErrorString(err), cudaGetErrorName(err));
}

tg_status tg_cuda_check_launch(const char *op) {
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) return TG_OK;
    return tg_error("%s: CUDA kernel launch failed: %s (%s)", op, cudaGetErrorString(err), cudaGetErrorName(err));
}

bool tg_cuda_enter(int device, const char *op, cudaStream_t *stream) {
    device_context *ctx = context_for(device, op);
    if (!ctx || !set_device(device, op)) return false;
    *stream = ctx->stream;
    return true;
}

cublasHandle_t tg_cuda_cublas(int device, const char *op) {
    device_context *ctx = context_for(device, op);
    if (!ctx) return nullptr;
    std::lock_guard<std::mutex> guard(ctx->lock);
    if (!ctx->cublas) {
        if (!set_device(device, op)) return nullptr;
        cublasStatus_t st = cublasCreate(&ctx->cublas);
        if (st != CUBLAS_STATUS_SUCCESS) {
            ctx->cublas = nullptr;
            tg_error("%s: cublasCreate failed on cuda:%d: %s", op, device, cublasGetStatusString(st));
            return nullptr;
        }
        cublasSetStream(ctx->cublas, ctx->stream);
        cublasSetMathMode(ctx->cublas, CUBLAS_DEFAULT_MATH);
        ctx->cublas_tf32 = false;
    }
    bool want = allow_tf32.load();
    if (want != ctx->cublas_tf32) {
        cublasSetMathMode(ctx->cublas, want ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
        ctx->cublas_tf32 = want;
    }
    return ctx->cublas;
}

int tg_cuda_sm_count(int device) {
    if (device < 0 || device >= MAX_DEVICES || !contexts[device].ready) return 1;
    return contexts[device].sm_count;
}

// ============================ backend table ============================

static int backend_device_count(void) { return count_devices(); }

static void *backend_alloc(int device, size_t nbytes) {
    const char *op = "tg_cuda_alloc";
    if (nbytes > ((size_t)1 << 62)) {
        tg_error("CUDA out of memory: tried to allocate %zu bytes on cuda:%d (more than any device has)", nbytes,
                 device);
        return nullptr;
    }
    device_context *ctx = context_for(device, op);
    if (!ctx) return nullptr;
    size_t rounded = size_class_bytes(nbytes);
    std::lock_guard<std::mutex> guard(ctx->lock);
    void *p = nullptr;
    auto it = ctx->free_blocks.find(rounded);
    if (it != ctx->free_blocks.end() && !it->second.empty()) { // reuse: see STREAM ORDER
        p = it->second.back();
        it->second.pop_back();
        ctx->stats.cached -= rounded;
    } else {
        if (!set_device(device, op)) return nullptr;
        cudaError_t err = cudaMalloc(&p, rounded);
        ctx->stats.num_mallocs++;
        if (err != cudaSuccess) { // give the cache back to the driver and try once more
            cudaGetLastError();
            release_cached(*ctx);
            err = cudaMalloc(&p, rounded);
            ctx->stats.num_mallocs++;
        }
        if (err != cudaSuccess) {
            cudaGetLastError();
            size_t free_bytes = 0, total_bytes = 0;
            cudaMemGetInfo(&free_bytes, &total_bytes);
            cudaGetLastError();
            tg_error("CUDA out of memory: tried to allocate %zu bytes on cuda:%d (%zu bytes free of %zu; "
                     "tapegrad holds %zu bytes in live tensors)",
                     nbytes, device, free_bytes, total_bytes, ctx->stats.allocated);
            return nullptr;
        }
    }
    ctx->stats.allocated += rounded;
    if (ctx->stats.allocated > ctx->stats.peak) ctx->stats.peak = ctx->stats.allocated;
    return p;
}

static void backend_free(int device, void *ptr, size_t nbytes) {
    if (!ptr || device < 0 || device >= MAX_DEVICES) return;
    device_context &ctx = contexts[device];
    size_t rounded = size_class_bytes(nbytes);
    std::lock_guard<std::mutex> guard(ctx.lock);
    ctx.free_blocks[rounded].push_back(ptr); // kept for reuse; see STREAM ORDER
    ctx.stats.allocated -= rounded;
    ctx.stats.cached += rounded;
}

static tg_status backend_copy(void *dst, tg_device dst_device, const void *src, tg_device src_device, size_t nbytes) {
    const char *op = "tg_copy";
    if (nbytes == 0) return TG_OK;
    bool dst_cuda = dst_device.kind == TG_DEVICE_CUDA, src_cuda = src_device.kind == TG_DEVICE_CUDA;
    cudaStream_t stream;
    cudaError_t err;
    if (dst_cuda && !src_cuda) { // host -> device: returns once the host buffer is staged
        if (!tg_cuda_enter(dst_device.index, op, &stream)) return TG_ERROR;
        err = cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, stream);
        return err == cudaSuccess ? TG_OK : tg_cuda_error(op, "host-to-device copy", err);
    }
    if (src_cuda && !dst_cuda) { // device -> host: the host reads it, so wait
        if (!tg_cuda_enter(src_device.index, op, &stream)) return TG_ERROR;
        err = cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream);
        if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
        return err == cudaSuccess ? TG_OK
                                  : tg_cuda_error(op, "device-to-host copy (or a kernel queued before it)", err);
    }
    if (dst_device.index == src_device.index) {
        if (!tg_cuda_enter(dst_device.index, op, &stream)) return TG_ERROR;
        err = cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, stream);
        return err == cudaSuccess ? TG_OK : tg_cuda_error(op, "device-to-device copy", err);
    }
    // Between two devices: the destination's earlier work must be done before the
    // copy overwrites its memory, and the copy done before either stream moves on.
    cudaStream_t dst_stream;
    if (!tg_cuda_enter(dst_device.index, op, &dst_stream)) return TG_ERROR;
    err = cudaStreamSynchronize(dst_stream);
    if (err == cudaSuccess && !tg_cuda_enter(src_device.index, op, &stream)) return TG_ERROR;
    if (err == cudaSuccess) err = cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, nbytes, stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    return err == cudaSuccess ? TG_OK : tg_cuda_error(op, "copy between CUDA devices", err);
}

static tg_status backend_memset_zero(int device, void *ptr, size_t nbytes) {
    cudaStream_t stream;
    if (nbytes == 0) return TG_OK;
    if (!tg_cuda_enter(device, "tg_memset_zero", &stream)) return TG_ERROR;
    cudaError_t err = cudaMemsetAsync(ptr, 0, nbytes, stream);
    return err == cudaSuccess ? TG_OK : tg_cuda_error("tg_memset_zero", "cudaMemsetAsync", err);
}

static void backend_synchronize(void) {
    int n = count_devices();
    for (int d = 0; d < n; d++) {
        device_context &ctx = contexts[d];
        if (!ctx.ready) continue;
        cudaSetDevice(d);
        cudaError_t err = cudaStreamSynchronize(ctx.stream);
        if (err != cudaSuccess) tg_cuda_error("tg_cuda_synchronize", "a queued kernel or copy", err);
    }
}

// ---- launchers ----

template <typename D, typename S>
static tg_status launch_copy_strided(tg_tensor *dst, tg_tensor *src, cudaStream_t stream) {
    tg_tensor *ops[2] = {dst, src};
    tg_indexer<2> ix = tg_make_indexer<2>(dst->shape, ops);
    if (ix.numel == 0) return TG_OK;
    int device = tg_cuda_device_of(dst);
    D *d = (D *)tg_elem_ptr(dst);
    const S *s = (const S *)tg_elem_ptr(src);
    if (tg_indexer_contiguous(ix)) {
        if (std::is_same<D, S>::value) {
            cudaError_t err = cudaMemcpyAsync(d, s, (size_t)ix.numel * sizeof(D), cudaMemcpyDeviceToDevice, stream);
            return err == cudaSuccess ? TG_OK : tg_cuda_error("tg_copy_", "device-to-device copy", err);
        }
        cast_contiguous_kernel<D, S><<<tg_cuda_blocks(ix.numel, device), TG_CUDA_THREADS, 0, stream>>>(ix.numel, d, s);
    } else {
        copy_strided_kernel<D, S><<<tg_cuda_blocks(ix.numel, device), TG_CUDA_THREADS, 0, stream>>>(ix, d, s);
    }
    return tg_cuda_check_launch("tg_copy_");
}

template <typename D> static tg_status copy_strided_from(tg_tensor *dst, tg_tensor *src, cudaStream_t stream) {
    switch (src->dtype) {
    case TG_FLOAT32: return launch_copy_strided<D, float>(dst, src, stream);
    case TG_FLOAT64: return launch_copy_strided<D, double>(dst, src, stream);
    case TG_INT64: return launch_copy_strided<D, int64_t>(dst, src, stream);
    case TG_INT32: return launch_copy_strided<D, int32_t>(dst, src, stream);
    case TG_UINT8: return launch_copy_strided<D, uint8_t>(dst, src, stream);
    case TG_BOOL: return launch_copy_strided<D, bool>(dst, src, stream);
    case TG_FLOAT16: return launch_copy_strided<D, tg_half_t>(dst, src, stream);
    case TG_BFLOAT16: return launch_copy_strided<D, tg_bf16_t>(dst, src, stream);
    default: return tg_error("tg_copy_: dtype %s has no CUDA kernel", tg_dtype_name(src->dtype));
    }
}

static tg_status backend_copy_strided(tg_tensor *dst, tg_tensor *src) {
    if (!tg_device_equal(dst->storage->device, src->storage->device)) {
        char a[16], b[16];
        return tg_error("tg_copy_: copy_strided needs one device, got %s and %s",
                        tg_device_str(dst->storage->device, a), tg_device_str(src->storage->device, b));
    }
    TG_CUDA_ENTER("tg_copy_", dst);
    if (dst->dtype == TG_FLOAT16) return copy_strided_from<tg_half_t>(dst, src, stream);
    if (dst->dtype == TG_BFLOAT16) return copy_strided_from<tg_bf16_t>(dst, src, stream);
    TG_CUDA_DISPATCH_ALL("tg_copy_", dst->dtype, return copy_strided_from<scalar_t>(dst, src, stream));
    return TG_OK;
}

template <typename E> static tg_status launch_fill(tg_tensor *t, E value, cudaStream_t stream) {
    tg_indexer<1> ix = tg_make_indexer<1>(t->shape, &t);
    if (ix.numel == 0) return TG_OK;
    int device = tg_cuda_device_of(t);
    E *d = (E *)tg_elem_ptr(t);
    if (tg_indexer_contiguous(ix))
        fill_contiguous_kernel<E><<<tg_cuda_blocks(ix.numel, device), TG_CUDA_THREADS, 0, stream>>>(ix.numel, d, value);
    else fill_strided_kernel<E><<<tg_cuda_blocks(ix.numel, device), TG_CUDA_THREADS, 0, stream>>>(ix, d, value);
    return tg_cuda_check_launch("tg_fill_");
}

static tg_status backend_fill(tg_tensor *t, double value) {
    TG_CUDA_ENTER("tg_fill_", t);
    uint64_t bits = 0; // the element, converted on the host as core/convert.h does
    switch (t->dtype) {
    case TG_FLOAT32: {
        float v = (float)value;
        memcpy(&bits, &v, 4);
        break;
    }
    case TG_FLOAT64: memcpy(&bits, &value, 8); break;
    case TG_INT64: {
        int64_t v = (int64_t)value;
        memcpy(&bits, &v, 8);
        break;
    }
    case TG_INT32: {
        int32_t v = (int32_t)value;
        memcpy(&bits, &v, 4);
        break;
    }
    case TG_UINT8: bits = (uint8_t)(int64_t)value; break;
    case TG_BOOL: bits = value != 0; break;
    case TG_FLOAT16: bits = tg_float_to_half_bits((float)value); break;
    case TG_BFLOAT16: bits = tg_float_to_bf16_bits((float)value); break;
    default: return tg_error("tg_fill_: dtype %s has no CUDA kernel", tg_dtype_name(t->dtype));
    }
    switch (tg_dtype_size(t->dtype)) {
    case 1: return launch_fill<uint8_t>(t, (uint8_t)bits, stream);
    case 2: return launch_fill<uint16_t>(t, (uint16_t)bits, stream);
    case 4: return launch_fill<uint32_t>(t, (uint32_t)bits, stream);
    default: return launch_fill<uint64_t>(t, bits, stream);
    }
}

static const tg_device_backend cuda_backend_table = {
    "cuda",       backend_device_count, backend_alloc,       backend_free,
    backend_copy, backend_memset_zero,  backend_synchronize, backend_copy_strided,
    backend_fill,
};

void *tg_cuda_scratch_alloc(int device, size_t nbytes) { return backend_alloc(device, nbytes); }
void tg_cuda_scratch_free(int device, void *ptr, size_t nbytes) { backend_free(device, ptr, nbytes); }

// ============================ entry points ============================

extern "C" const tg_device_backend *tg_cuda_backend(void) { return &cuda_backend_table; }

extern "C" tg_cuda_allocator_stats tg_cuda_memory_stats(int device) {
    tg_cuda_allocator_stats s = {};
    if (device < 0 || device >= count_devices()) return s;
    std::lock_guard<std::mutex> guard(contexts[device].lock);
    return contexts[device].stats;
}

extern "C" void tg_cuda_empty_cache(void) {
    int n = count_devices();
    for (int d = 0; d < n; d++) {
        device_context &ctx = contexts[d];
        std::lock_guard<std::mutex> guard(ctx.lock);
        if (!ctx.ready) continue;
        cudaSetDevice(d);
        release_cached(ctx);
    }
}

extern "C" void tg_set_allow_tf32(bool allow) { allow_tf32.store(allow); }
extern "C" bool tg_get_allow_tf32(void) { return allow_tf32.load(); }

extern "C" void *tg_cuda_stream(int device) {
    cudaStream_t stream;
    return tg_cuda_enter(device, "tg_cuda_stream", &stream) ? (void *)stream : nullptr;
}
