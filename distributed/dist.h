/* Collectives across processes (torch.distributed): the same program launched N times,
 * one rank per process, CPU tensors through MPI, CUDA tensors through NCCL.
 *
 *     mpirun -np 2 ./train          (as root: add --allow-run-as-root; more ranks than
 *                                    cores: --oversubscribe; docs/distributed.md)
 *
 *     if (tg_dist_init() != TG_OK) return 1;       // reads mpirun's environment
 *     tg_dist_all_reduce(t, TG_DIST_AVG);          // t now holds the mean over ranks
 *     tg_dist_finalize();
 *
 * Launch: the ranks find each other through MPI, so they are started by `mpirun`
 * (Open MPI) or another MPI launcher. torchrun-style variables RANK, WORLD_SIZE and
 * LOCAL_RANK are read when set, and must agree with MPI's (a program started N times
 * by torchrun without mpirun has no MPI world to join, and tg_dist_init says so);
 * LOCAL_RANK (else Open MPI's OMPI_COMM_WORLD_LOCAL_RANK) picks the GPU. MASTER_ADDR
 * and MASTER_PORT are not needed: MPI's launcher is the rendezvous. A program run
 * without a launcher is a world of one rank (MPI's singleton).
 *
 * Tensors: every call is collective (all ranks call it, in the same order, with
 * tensors of the same shape and dtype) and works on contiguous tensors, in place
 * where PyTorch's does. Dtypes: float32, float64, int32, int64 (uint8 for broadcast
 * and all_gather). CPU tensors go through MPI; CUDA tensors through NCCL (the
 * communicator is made on the first CUDA collective, NCCL's unique id sent from rank
 * 0 over MPI); a build without NCCL refuses CUDA tensors with a message.
 *
 * Same calls on every rank: before its data moves, each collective compares its call
 * number, kind, dtype, element count, reduction and root with the other ranks' (one
 * small all-reduce). When they differ, every rank's call fails with a message listing
 * each rank's call (tensors untouched, the group still usable), instead of MPI pairing
 * mismatched calls: sizes that differ, a rank one call ahead, a broadcast met by an
 * all-reduce. tg_dist_label_next names a call in those messages.
 *
 * Errors, not hangs: every blocking call waits at most TG_DIST_TIMEOUT seconds
 * (default 600, PyTorch's NCCL process-group timeout; fractions allowed) for the
 * other ranks, polling a non-blocking MPI request (or the NCCL stream), then fails
 * with a message naming the call, the rank and the timeout. A rank that has failed
 * (timeout, MPI error) leaves the group broken: later collectives fail at once, and
 * the program should exit non-zero. Under mpirun a rank that exits non-zero or dies
 * makes mpirun stop the others: they print "tg_dist: rank R of W stopped by the
 * launcher" before ending, so the failing rank's own message is the one to look for.
 *
 * Threads: call from one thread at a time (MPI_THREAD_SERIALIZED). */
#ifndef TG_DISTRIBUTED_DIST_H
#define TG_DISTRIBUTED_DIST_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TG_DIST_SUM = 0,
    TG_DIST_AVG, /* the sum divided by the world size (floating dtypes only) */
    TG_DIST_MAX,
} tg_dist_op;

/* Joins the group: MPI_Init (unless the program did it), a private communicator whose
 * errors are returned, not fatal, and the rank/size checks against RANK/WORLD_SIZE.
 * Fails when called twice without tg_dist_finalize, when RANK/WORLD_SIZE disagree
 * with MPI's world, or on a bad TG_DIST_TIMEOUT. */
tg_status tg_dist_init(void);
/* Leaves the group (MPI_Finalize if tg_dist_init called MPI_Init; it waits for every
 * rank to get there). Like a collective, it fails on every rank when another rank is
 * making a collective instead (a step more), and still leaves the group. After an error a program may instead exit non-zero at once:
 * mpirun then stops the other ranks. */
tg_status tg_dist_finalize(void);
bool tg_dist_is_initialized(void);
/* 0 and 1 before tg_dist_init (one process on its own). */
int tg_dist_rank(void);
int tg_dist_world_size(void);
/* The rank among the processes of this machine (LOCAL_RANK, else Open MPI's), for
 * the choice of GPU: tg_cuda(tg_dist_local_rank()). */
int tg_dist_local_rank(void);
/* The timeout of blocking calls, in seconds (TG_DIST_TIMEOUT); settable per program. */
double tg_dist_timeout(void);
void tg_dist_set_timeout(double seconds);

/* Names the calling thread's next collective in mismatch messages (label, copied; up
 * to 79 characters) and adds `tag`, a number every rank's call must match (DDP passes
 * its step, so a rank that skipped a step fails at the next one). Cleared by that call. */
void tg_dist_label_next(int64_t tag, const char *label);

tg_status tg_dist_barrier(void);
/* t on every rank gets root's values. */
tg_status tg_dist_broadcast(tg_tensor *t, int root);
/* t on every rank gets the elementwise reduction over ranks. */
tg_status tg_dist_all_reduce(tg_tensor *t, tg_dist_op op);
/* all_gather_into_tensor: the ranks' t [d0, ...] stacked along dim 0 in rank order,
 * [world_size * d0, ...]; a new tensor (owned by the innermost scope). */
tg_tensor *tg_dist_all_gather(tg_tensor *t);
/* reduce_scatter_tensor: t [world_size * d, ...] reduced over ranks; rank r gets rows
 * [r*d, (r+1)*d), a new tensor [d, ...]. Fails when dim 0 is not divisible. */
tg_tensor *tg_dist_reduce_scatter(tg_tensor *t, tg_dist_op op);

/* Non-blocking all_reduce (the DDP buckets): started now, progressed by
 * tg_dist_test and finished by tg_dist_wait. t must stay alive and untouched until
 * then. Returns NULL + error when it cannot start. */
typedef struct tg_dist_work tg_dist_work;
tg_dist_work *tg_dist_all_reduce_start(tg_tensor *t, tg_dist_op op);
/* Lets MPI progress the work (Open MPI moves non-blocking collectives forward only
 * inside MPI calls); true when it has finished. */
bool tg_dist_test(tg_dist_work *w);
/* Waits (at most the timeout), applies AVG's division, frees w. NULL-safe (TG_OK). */
tg_status tg_dist_wait(tg_dist_work *w);

#ifdef __cplusplus
}
#endif
#endif
