/* A shuffling batch loader (torch.utils.data.DataLoader) over an in-memory data set
 * (TensorDataset: tg_loader_new) or a per-sample one (Dataset: tg_loader_new_dataset,
 * e.g. an image folder), with per-sample transforms and optional worker threads.
 *
 * The in-memory data set is a pair of tensors whose first dimension indexes samples: x
 * [N, ...] and, optionally, y [N, ...] (labels; NULL for unlabelled data). Each epoch visits
 * every sample exactly once, in order or shuffled, in the orders PyTorch's DataLoader
 * draws (per pass a 64-bit base seed for workers, then torch.randperm):
 * - seed != 0: the loader has its own generator, as DataLoader(shuffle=True,
 *   generator=torch.Generator().manual_seed(seed)). The order depends only on (seed,
 *   epoch), not on tg_manual_seed: the same on every machine, and a run resumed at
 *   epoch e sees the batches it would have seen.
 * - seed == 0: DataLoader(shuffle=True) without a generator: each pass draws from the
 *   default generator (core/rng.h) when its first batch is asked for, so
 *   tg_manual_seed(s) and a program in PyTorch's order give PyTorch's batches. As in
 *   PyTorch, every pass then consumes default-generator numbers, even unshuffled.
 *
 *     tg_loader *ld = tg_loader_new(x, y, (tg_loader_opts){.batch_size = 64,
 *                                                         .shuffle = true, .seed = 1});
 *     tg_tensor *bx, *by;
 *     for (int epoch = 0; epoch < 10; epoch++) {
 *         TG_FOR_EACH_BATCH(ld, bx, by) {     // one scope per batch: the batch and
 *             ...                             // every temporary of the step are freed
 *         }                                   // at the end of each iteration
 *     }
 *     tg_loader_free(ld);
 *
 * As with a DataLoader, each pass is the next epoch: after tg_loader_next has said
 * an epoch is over, the next call starts epoch + 1. tg_loader_reset(ld, e) jumps to
 * epoch e (resuming a run).
 *
 * Ownership: the loader holds its own references to x and y (released by
 * tg_loader_free), so the caller may release its references right after
 * tg_loader_new. Batches are NEW references owned by the innermost open scope (else
 * by the caller): call tg_loader_next inside a per-batch scope (TG_FOR_EACH_BATCH does
 * that), or the batches of a whole epoch pile up in the outer scope.
 *
 * Batches are copies (PyTorch's collate also copies): writing to a batch never
 * changes the data set. Only core/ is used. */
#ifndef TG_DATA_LOADER_H
#define TG_DATA_LOADER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/scope.h"
#include "core/tensor.h"
#include "data/transforms.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_loader tg_loader;

/* A data set read one sample at a time (torch.utils.data.Dataset: __len__ and
 * __getitem__), for data that is not two tensors: an image folder
 * (tg_image_folder_dataset), files decoded on demand. get writes sample `index`'s
 * input and target (target NULL for unlabelled data, for every sample alike) as NEW
 * references (in the open scope, as any tapegrad function) and returns TG_OK, or
 * TG_ERROR + an error naming the sample. With num_workers > 0 it is called from the
 * worker threads at once: it must be safe to call concurrently. The loader borrows
 * ctx: keep it alive until tg_loader_free. */
typedef struct {
    int64_t size;
    tg_status (*get)(void *ctx, int64_t index, tg_tensor **x, tg_tensor **y);
    void *ctx;
} tg_dataset;

/* Zero fields mean the default. */
typedef struct {
    int64_t batch_size; /* 0 means 1 (DataLoader's default); negative is an error */
    bool shuffle;       /* a fresh permutation each epoch */
    uint64_t seed;      /* its own generator's seed; 0: the default generator (see above) */
    bool drop_last;     /* skip the last batch when it is smaller than batch_size */
    /* Where batches are delivered (tg_tensor_to). The zero value (CPU) means "where the
     * data set is", so a data set kept on the GPU is never copied back. Keeping the
     * data set on the CPU and setting .device = tg_cuda(0) moves one batch at a time. */
    tg_device device;
    /* Sharding across ranks (torch.utils.data.DistributedSampler(dataset, num_replicas=
     * world_size, rank=rank, shuffle=shuffle, seed=seed, drop_last=shard_drop_last),
     * set_epoch(epoch) each pass). world_size 0: no sharding. With world_size >= 1 each
     * epoch is this rank's shard: the permutation of torch.randperm(N) with a generator
     * seeded seed + epoch (here 0 is a seed like any other, DistributedSampler's
     * default), padded by repeating its head to a multiple of world_size (or cut to
     * one, shard_drop_last), then every world_size-th index from `rank`; the ranks'
     * shards are disjoint but for the padding. As a DataLoader without a generator, each
     * pass also draws one number from the default generator. See distributed/ (tg_dist_rank). */
    int world_size, rank;
    bool shard_drop_last;
    /* ---- per-sample transforms and worker threads (DataLoader's options) ---- */
    /* Applied to each sample's x before the batch is stacked (a dataset's transform in
     * torchvision), so uint8 images give float batches; count 0: none. The loader keeps a
     * copy. Its random numbers: see num_workers. Needs the samples on the CPU. */
    tg_compose transform;
    /* 0: batches are made on the calling thread when asked for (the loader without
     * workers: same batches, same numbers). N > 0: N threads make batches ahead, batch b
     * by worker b % N (PyTorch's round robin), delivered in order: the same batches
     * whatever N, but for random transforms. Those draw, as in PyTorch, from the default
     * generator with 0 workers, and in worker w from its own generator seeded base_seed +
     * w, where base_seed is the 64-bit number each pass draws (see above); so with random
     * transforms the batches of N > 0 differ from those of 0 workers, and are the same for
     * a given seed and N. A worker's failure is the error of tg_loader_next at its batch
     * ("worker 1 failed on batch 7: ..."), which is then skipped, as PyTorch re-raises. */
    int num_workers;
    int prefetch_factor; /* batches in flight per worker (0 means PyTorch's 2) */
    /* DataLoader's pin_memory: batches in page-locked host memory for fast copies. This
     * build's CUDA runtime has no pinned host allocator, so it changes nothing yet (as
     * PyTorch without CUDA); see docs/data-io.md. */
    bool pin_memory;
    /* Keep the worker threads between passes (their generators carry on; as in
     * PyTorch, only the first pass then draws a base seed). Without it each pass starts
     * its workers and joins them at its end. */
    bool persistent_workers;
} tg_loader_opts;

/* A loader over x [N, ...] and y [N, ...] (y may be NULL). Retains both (a
 * non-contiguous x or y is copied once, contiguous, instead). Positioned at the start
 * of epoch 0. Returns NULL + error when x is NULL or 0-dim, y is 0-dim, x and y have
 * different first sizes, batch_size < 0, or out of memory. Free with tg_loader_free. */
tg_loader *tg_loader_new(tg_tensor *x, tg_tensor *y, tg_loader_opts opts);

/* A loader over a per-sample data set (see tg_dataset): each batch stacks the samples'
 * x (after opts.transform) and y ([B, ...] of one shape and dtype each, as PyTorch's
 * default_collate; a 0-dim label gives [B]); samples of different shapes are an error
 * naming both. Fails on size < 0 or a NULL get. */
tg_loader *tg_loader_new_dataset(tg_dataset dataset, tg_loader_opts opts);

/* Joins the worker threads (also mid-epoch: the batches in flight are dropped),
 * releases the loader's references to the data set and frees it. NULL-safe. */
void tg_loader_free(tg_loader *ld);

/* Starts epoch `epoch` from its first batch (its order is drawn when that batch is
 * asked for). Not needed between epochs run in order: the pass after the end of one
 * is the next (see tg_loader_next). */
void tg_loader_reset(tg_loader *ld, int64_t epoch);

/* The next batch of the current epoch: *x = [B, ...] (same dtype as the data set), *y
 * likewise (NULL when the loader has no y); B = batch_size except for a last partial
 * batch. New references (see Ownership above). Returns false with *x = *y = NULL at
 * the end of the epoch, and the call after that starts the next epoch (reshuffled)
 * and returns its first batch, as a new `for x, y in loader` would; or false on
 * failure (out of memory, device copy): then an error is recorded (tg_error_count
 * changes). */
bool tg_loader_next(tg_loader *ld, tg_tensor **x, tg_tensor **y);

/* Batches per epoch: ceil(N / B), or floor(N / B) with drop_last (N: this rank's
 * shard when sharded). */
int64_t tg_loader_num_batches(const tg_loader *ld);
/* Moves to batch `batch` of the current epoch (same order, no batches copied):
 * resuming mid-epoch from a checkpoint, or, with tg_loader_num_batches(ld), ending
 * the epoch early from inside TG_FOR_EACH_BATCH (then `continue`). Fails on a
 * negative batch; past the end means the epoch is over. */
tg_status tg_loader_seek(tg_loader *ld, int64_t batch);

/* Samples in the data set (N). */
int64_t tg_loader_num_samples(const tg_loader *ld);
/* The current epoch: set by tg_loader_reset, one more after each finished pass (0 for
 * a new loader). */
int64_t tg_loader_epoch(const tg_loader *ld);

/* Iterates over the rest of the current epoch with one scope per batch:
 *     TG_FOR_EACH_BATCH(ld, bx, by) { ... }
 * bx and by are tg_tensor * variables declared by the caller. `continue` goes to the
 * next batch; `break`, `return` or `goto` out of the body end the batch's scope on the
 * way out (as TG_SCOPE; nothing leaks) and end the pass, as leaving a `for x, y in
 * loader` loop does in PyTorch: the next TG_FOR_EACH_BATCH / tg_loader_next starts
 * the next epoch. (To end the pass early and stay in the loop,
 * tg_loader_seek(ld, tg_loader_num_batches(ld)) then `continue`.) A failing
 * tg_loader_next ends the loop like the end of the epoch. */
typedef struct {
    tg_loader *ld;
    int depth; /* scope depth outside the loop */
    bool more; /* the body has a batch (false: the pass ended or failed) */
} tg_batch_loop_;
tg_batch_loop_ tg_batch_loop_begin_(tg_loader *ld, tg_tensor **x, tg_tensor **y);
void tg_batch_loop_next_(tg_batch_loop_ *l, tg_tensor **x, tg_tensor **y);
void tg_batch_loop_end_(tg_batch_loop_ *l);
#define TG_FOR_EACH_BATCH(ld, bx, by)                                                    \
    for (tg_batch_loop_ TG_CONCAT(tg_batches_, __LINE__)                                 \
             TG_CLEANUP_(tg_batch_loop_end_) = tg_batch_loop_begin_((ld), &(bx), &(by)); \
         TG_CONCAT(tg_batches_, __LINE__).more; tg_batch_loop_next_(&TG_CONCAT(tg_batches_, __LINE__), &(bx), &(by)))

/* The samples of t [N, ...] at `indices` (each in [0, N)), stacked in that order:
 * [count, ...], a new contiguous tensor on t's device (t[indices] in PyTorch, without
 * autograd). For train/validation splits and the loader itself. Fails on an index out
 * of range or a 0-dim t. */
tg_tensor *tg_take_samples(tg_tensor *t, const int64_t *indices, int64_t count);

/* Writes into perm the permutation of 0..n-1 that a shuffling loader with this
 * (non-zero) seed uses in epoch `epoch` (what PyTorch's DataLoader with generator
 * torch.Generator().manual_seed(seed) draws on its epoch+1-th pass); usable on its own
 * for random splits. Costs O(n) per epoch before `epoch`. */
void tg_random_permutation(int64_t *perm, int64_t n, uint64_t seed, uint64_t epoch);

/* DistributedSampler's indices for `rank` in epoch `epoch` (see tg_loader_opts), written
 * to indices (room for ceil(n / world_size); NULL to just count). Returns their count
 * (len(sampler)), 0 for bad arguments, -1 when out of memory. */
int64_t tg_distributed_indices(int64_t *indices, int64_t n, int world_size, int rank, bool shuffle, uint64_t seed,
                               int64_t epoch, bool drop_last);

#ifdef __cplusplus
}
#endif
#endif
