// NCCL collectives for CUDA tensors (distributed/nccl.h). One communicator per process
// (one GPU per rank), made non-blocking (config.blocking = 0) so that its set-up and
// every wait can be bounded by dist.c's deadline; collectives on a stream of their own,
// ordered after tapegrad's stream by an event.
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distributed/nccl.h"
#include "core/cuda/runtime.h"

static_assert(sizeof(ncclUniqueId) == TG_NCCL_UNIQUE_ID_BYTES, "ncclUniqueId size");

namespace {

ncclComm_t comm = nullptr;
cudaStream_t comm_stream = nullptr;
int comm_device = -1;

struct Work {
    cudaEvent_t done;
};

double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

tg_status nccl_failed(const char *what, ncclResult_t r) {
    return tg_error("tg_dist (NCCL): %s failed: %s%s%s", what, ncclGetErrorString(r), comm ? " (" : "",
                    comm ? ncclGetLastError(comm) : "");
}

tg_status cuda_failed(const char *what, cudaError_t e) {
    return tg_error("tg_dist (NCCL): %s failed: %s", what, cudaGetErrorString(e));
}

bool nccl_dtype(tg_dtype dtype, ncclDataType_t *out) {
    switch (dtype) {
    case TG_FLOAT32: *out = ncclFloat32; return true;
    case TG_FLOAT64: *out = ncclFloat64; return true;
    case TG_INT32: *out = ncclInt32; return true;
    case TG_INT64: *out = ncclInt64; return true;
    case TG_UINT8:
    case TG_BOOL: *out = ncclUint8; return true;
    default: return false;
    }
}

} // namespace

extern "C" tg_status tg_nccl_unique_id(unsigned char id[TG_NCCL_UNIQUE_ID_BYTES]) {
    ncclUniqueId unique;
    ncclResult_t r = ncclGetUniqueId(&unique);
    if (r != ncclSuccess) return nccl_failed("ncclGetUniqueId", r);
    memcpy(id, &unique, sizeof unique);
    return TG_OK;
}

extern "C" tg_status tg_nccl_init(const unsigned char id[TG_NCCL_UNIQUE_ID_BYTES], int rank, int world_size, int device,
                                  double deadline_s) {
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) return cuda_failed("cudaSetDevice", e);
    e = cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) return cuda_failed("cudaStreamCreate", e);
    ncclUniqueId unique;
    memcpy(&unique, id, sizeof unique);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&comm, world_size, unique, rank, &config);
    while (r == ncclInProgress || r == ncclSuccess) {
        ncclResult_t state = ncclSuccess;
        ncclCommGetAsyncError(comm, &state);
        if (state == ncclSuccess) break;
        if (state != ncclInProgress) {
            r = state;
            break;
        }
        if (now_s() > deadline_s) {
            ncclCommAbort(comm);
            comm = nullptr;
            return tg_error("tg_dist (NCCL): rank %d of %d timed out setting up the communicator "
                            "(TG_DIST_TIMEOUT)",
                            rank, world_size);
        }
    }
    if (r != ncclSuccess && r != ncclInProgress) {
        tg_status s = nccl_failed("ncclCommInitRankConfig", r);
        if (comm) ncclCommAbort(comm);
        comm = nullptr;
        return s;
    }
    comm_device = device;
    return TG_OK;
}

extern "C" void *tg_nccl_start(tg_nccl_kind kind, const void *send, void *recv, size_t count, tg_dtype dtype,
                               int reduce, int root) {
    ncclDataType_t type;
    if (!comm) return tg_error("tg_dist (NCCL): no communicator"), nullptr;
    if (!nccl_dtype(dtype, &type)) return tg_error("tg_dist (NCCL): unsupported dtype"), nullptr;
    ncclRedOp_t op = reduce == 2 ? ncclMax : reduce == 1 ? ncclAvg : ncclSum;
    cudaStream_t compute = (cudaStream_t)tg_cuda_stream(comm_device);
    Work *w = (Work *)calloc(1, sizeof(Work));
    if (!w) return tg_error("tg_dist (NCCL): out of memory"), nullptr;
    // The collective reads what tapegrad's stream has queued so far (the gradients).
    cudaEvent_t ready;
    cudaError_t e = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(ready, compute);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(comm_stream, ready, 0);
    if (e == cudaSuccess) cudaEventDestroy(ready);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&w->done, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        free(w);
        return cuda_failed("ordering the NCCL stream", e), nullptr;
    }
    ncclResult_t r = ncclSuccess;
    switch (kind) {
    case TG_NCCL_ALL_REDUCE: r = ncclAllReduce(send, recv, count, type, op, comm, comm_stream); break;
    case TG_NCCL_BROADCAST: r = ncclBroadcast(send, recv, count, type, root, comm, comm_stream); break;
    case TG_NCCL_ALL_GATHER: r = ncclAllGather(send, recv, count, type, comm, comm_stream); break;
    case TG_NCCL_REDUCE_SCATTER: r = ncclReduceScatter(send, recv, count, type, op, comm, comm_stream); break;
    }
    if (r != ncclSuccess && r != ncclInProgress) {
        cudaEventDestroy(w->done);
        free(w);
        return nccl_failed("the collective", r), nullptr;
    }
    e = cudaEventRecord(w->done, comm_stream);
    if (e != cudaSuccess) {
        cudaEventDestroy(w->done);
        free(w);
        return cuda_failed("cudaEventRecord", e), nullptr;
    }
    return w;
}

extern "C" int tg_nccl_query(void *work) {
    Work *w = (Work *)work;
    ncclResult_t state = ncclSuccess;
    if (comm) ncclCommGetAsyncError(comm, &state);
    if (state != ncclSuccess && state != ncclInProgress) {
        nccl_failed("the collective (asynchronous error)", state);
        return -1;
    }
    cudaError_t e = cudaEventQuery(w->done);
    if (e == cudaSuccess) return 1;
    if (e == cudaErrorNotReady) return 0;
    cuda_failed("waiting for the collective", e);
    return -1;
}

extern "C" tg_status tg_nccl_finish(void *work) {
    Work *w = (Work *)work;
    cudaError_t e = cudaStreamWaitEvent((cudaStream_t)tg_cuda_stream(comm_device), w->done, 0);
    cudaEventDestroy(w->done);
    free(w);
    return e == cudaSuccess ? TG_OK : cuda_failed("cudaStreamWaitEvent", e);
}

extern "C" void tg_nccl_shutdown(int abort) {
    if (comm) {
        if (abort) ncclCommAbort(comm);
        else ncclCommDestroy(comm);
    }
    comm = nullptr;
    if (comm_stream) cudaStreamDestroy(comm_stream);
    comm_stream = nullptr;
    comm_device = -1;
}
