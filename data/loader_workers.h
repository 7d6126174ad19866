/* The loader's worker threads and their bounded queue of batches (data/loader.c's
 * num_workers > 0). Internal to data/: not a public header.
 *
 * A pass asks for batches first .. end-1; worker w makes batches first + w, first + w +
 * N, ... (PyTorch's round robin) with its own generator, at most `capacity` = N *
 * prefetch_factor batches ahead of the one the loader takes next, and the loader takes
 * them in order, waiting for the one it needs. Batches made by a worker are references
 * the queue owns until taken (then the taker's). */
#ifndef TG_DATA_LOADER_WORKERS_H
#define TG_DATA_LOADER_WORKERS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"

typedef struct tg_loader_workers tg_loader_workers;

/* Makes batch `batch` on a worker thread: new references the caller owns (no scope is
 * open on a worker), or false with the error recorded on that thread. */
typedef bool (*tg_batch_maker)(void *ctx, int64_t batch, tg_mt19937 *gen, tg_tensor **x, tg_tensor **y);

/* n threads, started now, each with a generator seeded base_seed + w (low 32 bits, as
 * torch.manual_seed). NULL + error when a thread cannot start. */
tg_loader_workers *tg_loader_workers_new(int n, int prefetch_factor, uint64_t base_seed, tg_batch_maker make,
                                         void *ctx);
/* Starts making batches first .. end-1 (stopping any pass in progress first). */
void tg_loader_workers_start(tg_loader_workers *w, int64_t first, int64_t end);
/* Whether a pass is running and `batch` is the one it delivers next. */
bool tg_loader_workers_expects(const tg_loader_workers *w, int64_t batch);
/* Waits for the next batch of the pass and hands it over (*x, *y caller-owned). On a
 * worker's failure: TG_ERROR with "worker W failed on batch B: <its message>"; the
 * batch counts as delivered. */
tg_status tg_loader_workers_take(tg_loader_workers *w, tg_tensor **x, tg_tensor **y);
/* Drops the pass: batches made are released, batches being made are released by their
 * worker when it finishes them. */
void tg_loader_workers_stop(tg_loader_workers *w);
/* Stops, wakes and joins every thread, then frees. NULL-safe. */
void tg_loader_workers_free(tg_loader_workers *w);

#endif
