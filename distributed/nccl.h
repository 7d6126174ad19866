/* The NCCL half of dist/ (distributed/nccl.cu), used by distributed/dist.c for CUDA tensors. The
 * functions are weak: a build without CUDA (or without NCCL) has none, and dist.c
 * refuses CUDA tensors with a message. Library-internal, not installed.
 *
 * Collectives run on a stream of their own (one per communicator), ordered after the
 * work already queued on tapegrad's stream (an event), so a DDP bucket's all-reduce
 * overlaps the rest of the backward; finishing one makes tapegrad's stream wait for it. */
#ifndef TG_DISTRIBUTED_NCCL_H
#define TG_DISTRIBUTED_NCCL_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_NCCL_UNIQUE_ID_BYTES 128 /* sizeof(ncclUniqueId) */

typedef enum { TG_NCCL_ALL_REDUCE, TG_NCCL_BROADCAST, TG_NCCL_ALL_GATHER, TG_NCCL_REDUCE_SCATTER } tg_nccl_kind;

/* rank 0 makes the id (ncclGetUniqueId); dist.c broadcasts it over MPI. */
tg_status tg_nccl_unique_id(unsigned char id[TG_NCCL_UNIQUE_ID_BYTES]) __attribute__((weak));
/* ncclCommInitRank on `device` (non-blocking init, polled until `deadline_s` of
 * CLOCK_MONOTONIC). */
tg_status tg_nccl_init(const unsigned char id[TG_NCCL_UNIQUE_ID_BYTES], int rank, int world_size, int device,
                       double deadline_s) __attribute__((weak));
/* Queues one collective: `count` elements of `dtype` (per rank: all_gather's input,
 * reduce_scatter's output). reduce: 0 sum, 1 avg, 2 max. Returns a handle for
 * tg_nccl_query / tg_nccl_finish, or NULL + error. */
void *tg_nccl_start(tg_nccl_kind kind, const void *send, void *recv, size_t count, tg_dtype dtype, int reduce, int root)
    __attribute__((weak));
/* 1 finished, 0 running, -1 failed (error recorded: NCCL's asynchronous error). */
int tg_nccl_query(void *work) __attribute__((weak));
/* tapegrad's stream waits for the work; frees the handle. */
tg_status tg_nccl_finish(void *work) __attribute__((weak));
/* ncclCommAbort (after a timeout: the communicator cannot be trusted) / destroy. */
void tg_nccl_shutdown(int abort) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
