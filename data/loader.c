/* The batch loader (see data/loader.h). */
#include "data/loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng_impl.h"
#include "core/storage.h"
#include "core/tensor_impl.h"
#include "data/loader_workers.h"

struct tg_loader {
    tg_tensor *x;               /* owned reference, contiguous, [N, ...] (NULL for a tg_dataset) */
    tg_tensor *y;               /* owned reference, contiguous, [N, ...], or NULL */
    tg_dataset dataset;         /* get != NULL: samples come from it, one at a time */
    tg_loader_workers *workers; /* num_workers > 0: the threads (NULL until a pass needs them) */
    uint64_t base_seed;         /* this pass's base seed for the workers' generators */
    int64_t passes;             /* passes started (persistent workers: only the first draws a base seed) */
    int64_t n;                  /* samples in the data set */
    int64_t len;                /* samples per epoch: n, or this rank's shard (world_size > 0) */
    tg_loader_opts opts;
    int64_t *order; /* [len] this epoch's sample order */
    int64_t pos;    /* next position in order */
    int64_t epoch;
    bool finished;          /* tg_loader_next said the epoch is over: the next call starts epoch + 1 */
    bool ordered;           /* `order` holds this epoch's order (drawn at its first batch) */
    tg_mt19937 shuffler;    /* the loader's own generator (seed != 0), ready to draw */
    int64_t shuffler_epoch; /* the order of this epoch next (-1: not seeded yet) */
};

/* ---- shuffling ---- */

static int64_t shard_len(int64_t n, int world, bool drop_last) {
    /* DistributedSampler: ceil((n - world) / world) with drop_last, else ceil(n / world). */
    if (drop_last && n % world != 0) return n > world ? (n - 1) / world : 0;
    return (n + world - 1) / world;
}

int64_t tg_distributed_indices(int64_t *indices, int64_t n, int world_size, int rank, bool shuffle, uint64_t seed,
                               int64_t epoch, bool drop_last) {
    if (n <= 0 || world_size <= 0 || rank < 0 || rank >= world_size) return 0;
    int64_t per_rank = shard_len(n, world_size, drop_last);
    int64_t total = per_rank * world_size;
    if (!indices || per_rank == 0) return per_rank;
    int64_t *all = malloc((size_t)(n > total ? n : total) * sizeof *all);
    if (!all) return -1;
    if (shuffle) { /* g = torch.Generator(); g.manual_seed(seed + epoch); torch.randperm(n, generator=g) */
        tg_mt19937 g;
        tg_mt19937_seed(&g, seed + (uint64_t)epoch);
        tg_mt19937_permutation(&g, all, n);
    } else {
        for (int64_t i = 0; i < n; i++) all[i] = i;
    }
    /* Not drop_last: pad by repeating the list from its head until it divides evenly. */
    for (int64_t i = n; i < total; i++) all[i] = all[(i - n) % n];
    for (int64_t i = 0; i < per_rank; i++) indices[i] = all[rank + i * world_size];
    free(all);
    return per_rank;
}

/* DataLoader(shuffle=True, generator=g): each epoch first draws a 64-bit base seed for
 * workers from g, then torch.randperm(n, generator=g). */
static uint64_t shuffle_epoch(tg_mt19937 *g, int64_t *perm, int64_t n, bool base_seed) {
    uint64_t base = base_seed ? tg_mt19937_next64(g) % (1ull << 63) : 0;
    if (n > 0) tg_mt19937_permutation(g, perm, n);
    return base;
}

static void skip_epoch(tg_mt19937 *g, int64_t n, bool base_seed) {
    if (base_seed) (void)tg_mt19937_next64(g);
    for (int64_t i = 0; i + 1 < n; i++) (void)tg_mt19937_next(g);
}

void tg_random_permutation(int64_t *perm, int64_t n, uint64_t seed, uint64_t epoch) {
    if (!perm || n <= 0) return;
    tg_mt19937 g;
    tg_mt19937_seed(&g, seed);
    for (uint64_t e = 0; e < epoch; e++) skip_epoch(&g, n, true);
    shuffle_epoch(&g, perm, n, true);
}

/* ---- gathering samples ---- */

tg_tensor *tg_take_samples(tg_tensor *t, const int64_t *indices, int64_t count) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_take_samples", t, 0), NULL;
    if (tg_ndim(t) == 0) return tg_error("tg_take_samples: the tensor is 0-dim; samples are indexed by dim 0"), NULL;
    if (count < 0 || (count > 0 && !indices))
        return tg_error("tg_take_samples: bad index list (count %lld)", (long long)count), NULL;
    int64_t n = tg_size(t, 0);
    for (int64_t i = 0; i < count; i++)
        if (indices[i] < 0 || indices[i] >= n)
            return tg_error("tg_take_samples: index %lld is out of range for %lld samples", (long long)indices[i],
                            (long long)n),
                   NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *src = tg_is_contiguous(t) ? t : tg_clone_values(t);
        tg_shape shape = tg_shape_of(t);
        shape.dims[0] = count;
        tg_device device = tg_device_of(t);
        tg_tensor *out = src ? tg_empty(shape, (tg_opts){.dtype = tg_dtype_of(t), .device = device}) : NULL;
        if (out) {
            size_t row = n ? (size_t)(tg_numel(t) / n) * tg_dtype_size(tg_dtype_of(t)) : 0;
            const char *from = tg_data_ptr(src);
            char *to = tg_data_ptr(out);
            bool ok = true;
            /* Runs of consecutive indices are copied at once: an unshuffled batch is a
             * single copy, which matters for device memory. */
            for (int64_t i = 0; i < count && ok;) {
                int64_t run = 1;
                while (i + run < count && indices[i + run] == indices[i] + run) run++;
                size_t bytes = (size_t)run * row;
                if (device.kind == TG_DEVICE_CPU) memcpy(to + (size_t)i * row, from + (size_t)indices[i] * row, bytes);
                else
                    ok = !tg_copy_bytes(to + (size_t)i * row, device, from + (size_t)indices[i] * row, device, bytes,
                                        "tg_take_samples");
                i += run;
            }
            if (ok) result = tg_scope_return(out);
        }
    }
    return result;
}

/* ---- the loader ---- */

/* An owned (untracked) contiguous reference to t. */
static tg_tensor *own_contiguous(tg_tensor *t) {
    if (tg_is_contiguous(t)) return tg_retain(t);
    tg_tensor *c = NULL;
    TG_SCOPE {
        c = tg_clone_values(t);
        if (c) tg_retain(c); /* the scope's reference goes at the brace; ours stays */
    }
    return c;
}

static bool check_opts(tg_loader_opts *opts, bool cpu_samples) {
    if (opts->batch_size < 0)
        return tg_error("tg_loader_new: batch_size %lld is negative", (long long)opts->batch_size), false;
    if (opts->world_size < 0 || (opts->world_size > 0 && (opts->rank < 0 || opts->rank >= opts->world_size)) ||
        (opts->world_size == 0 && opts->rank != 0))
        return tg_error("tg_loader_new: rank %d is not in [0, world_size %d)", opts->rank, opts->world_size), false;
    if (opts->num_workers < 0 || opts->prefetch_factor < 0)
        return tg_error("tg_loader_new: num_workers %d and prefetch_factor %d must be >= 0", opts->num_workers,
                        opts->prefetch_factor),
               false;
    if (opts->persistent_workers && opts->num_workers == 0)
        return tg_error("tg_loader_new: persistent_workers needs num_workers > 0 (as DataLoader's ValueError)"), false;
    if (opts->transform.count < 0 || opts->transform.count > TG_COMPOSE_MAX)
        return tg_error("tg_loader_new: the transform has more than %d steps", TG_COMPOSE_MAX), false;
    if (opts->transform.count > 0 && !cpu_samples)
        return tg_error("tg_loader_new: a transform needs the samples on the CPU (transforms run before a batch "
                        "moves to .device)"),
               false;
    if (opts->batch_size == 0) opts->batch_size = 1;
    if (opts->prefetch_factor == 0) opts->prefetch_factor = 2;
    return true;
}

/* The loader of n samples, data set fields left to the caller. */
static tg_loader *loader_alloc(int64_t n, tg_loader_opts opts) {
    tg_loader *ld = calloc(1, sizeof *ld);
    int64_t *order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    if (!ld || !order) {
        free(ld);
        free(order);
        return tg_error("tg_loader_new: out of memory for %lld sample indices", (long long)n), NULL;
    }
    ld->n = n;
    ld->len = opts.world_size > 0 ? shard_len(n, opts.world_size, opts.shard_drop_last) : n;
    ld->opts = opts;
    ld->order = order;
    ld->shuffler_epoch = -1;
    tg_loader_reset(ld, 0);
    return ld;
}

tg_loader *tg_loader_new(tg_tensor *x, tg_tensor *y, tg_loader_opts opts) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_loader_new", x, 0), NULL;
    if (tg_ndim(x) == 0 || (y && tg_ndim(y) == 0))
        return tg_error("tg_loader_new: x and y need a first dimension indexing samples "
                        "(got a 0-dim %s)",
                        tg_ndim(x) == 0 ? "x" : "y"),
               NULL;
    if (y && tg_size(x, 0) != tg_size(y, 0))
        return tg_error("tg_loader_new: x has %lld samples but y has %lld (first dims differ)",
                        (long long)tg_size(x, 0), (long long)tg_size(y, 0)),
               NULL;
    if (!check_opts(&opts, tg_device_of(x).kind == TG_DEVICE_CPU)) return NULL;
    tg_loader *ld = loader_alloc(tg_size(x, 0), opts);
    if (!ld) return NULL;
    ld->x = own_contiguous(x);
    ld->y = y ? own_contiguous(y) : NULL;
    if (!ld->x || (y && !ld->y)) {
        tg_loader_free(ld);
        return NULL;
    }
    return ld;
}

tg_loader *tg_loader_new_dataset(tg_dataset dataset, tg_loader_opts opts) {
    if (dataset.size < 0 || !dataset.get)
        return tg_error("tg_loader_new_dataset: %s", dataset.get ? "size is negative" : "get is NULL"), NULL;
    if (!check_opts(&opts, true)) return NULL;
    tg_loader *ld = loader_alloc(dataset.size, opts);
    if (ld) ld->dataset = dataset;
    return ld;
}

void tg_loader_free(tg_loader *ld) {
    if (!ld) return;
    tg_loader_workers_free(ld->workers); /* joins first: they read x, y and order */
    tg_release(ld->x);
    tg_release(ld->y);
    free(ld->order);
    free(ld);
}

/* Ends the workers' pass: persistent workers wait for the next, others are joined. */
static void end_pass(tg_loader *ld) {
    if (!ld->workers) return;
    if (ld->opts.persistent_workers) {
        tg_loader_workers_stop(ld->workers);
    } else {
        tg_loader_workers_free(ld->workers);
        ld->workers = NULL;
    }
}

void tg_loader_reset(tg_loader *ld, int64_t epoch) {
    if (!ld) return;
    end_pass(ld);
    ld->epoch = epoch;
    ld->pos = 0;
    ld->finished = false;
    ld->ordered = false;
}

/* Whether this pass draws the workers' base seed: every pass does (DataLoader makes a
 * new iterator, whose __init__ draws it), but with persistent workers the iterator is
 * made once and later passes only _reset it. */
static bool pass_draws_base_seed(const tg_loader *ld) { return !(ld->opts.persistent_workers && ld->passes > 0); }

/* The current epoch's order, drawn when its first batch is asked for, as a
 * DataLoader draws when iteration starts: with seed 0 the default generator's numbers
 * then go in PyTorch's sequence wherever the program builds its model. */
static void draw_order(tg_loader *ld) {
    bool base = pass_draws_base_seed(ld);
    ld->passes++;
    if (ld->opts.world_size > 0) {
        /* DataLoader(sampler=DistributedSampler(...)) without a generator: the pass draws
         * the workers' base seed from the default generator; the sampler shuffles with
         * its own torch.Generator seeded seed + epoch. */
        if (base) {
            tg_rng_state *s = tg_rng_lock_cpu();
            ld->base_seed = tg_mt19937_next64(&s->cpu) % (1ull << 63);
            tg_rng_unlock_cpu();
        }
        if (tg_distributed_indices(ld->order, ld->n, ld->opts.world_size, ld->opts.rank, ld->opts.shuffle,
                                   ld->opts.seed, ld->epoch, ld->opts.shard_drop_last) < 0) {
            tg_error("tg_loader_next: out of memory for the %lld indices of the distributed sampler", (long long)ld->n);
            for (int64_t i = 0; i < ld->len; i++) ld->order[i] = (ld->opts.rank + i * ld->opts.world_size) % ld->n;
        }
        ld->ordered = true;
        return;
    }
    uint64_t sampler_seed = 0;
    if (ld->opts.seed == 0) {
        /* DataLoader without a generator: every pass draws the workers' base seed from
         * the default generator (random_() of an int64: 63 bits), even unshuffled; a
         * shuffled one then draws the seed of RandomSampler's own generator. */
        tg_rng_state *s = tg_rng_lock_cpu();
        if (base) ld->base_seed = tg_mt19937_next64(&s->cpu) % (1ull << 63);
        if (ld->opts.shuffle) sampler_seed = tg_mt19937_next64(&s->cpu) % (1ull << 63);
        tg_rng_unlock_cpu();
    }
    if (ld->opts.seed != 0) {
        /* The loader's own generator (DataLoader(generator=g)): each pass draws the base
         * seed from it, then the permutation when shuffled; replayed from epoch 0 when
         * needed. With persistent workers only epoch 0's pass drew a base seed. */
        bool persistent = ld->opts.persistent_workers && ld->opts.num_workers > 0;
        int64_t perm_n = ld->opts.shuffle ? ld->n : 0;
        if (ld->shuffler_epoch < 0 || ld->epoch < ld->shuffler_epoch) { /* from the start */
            tg_mt19937_seed(&ld->shuffler, ld->opts.seed);
            ld->shuffler_epoch = 0;
        }
        for (; ld->shuffler_epoch < ld->epoch; ld->shuffler_epoch++)
            skip_epoch(&ld->shuffler, perm_n, !persistent || ld->shuffler_epoch == 0);
        uint64_t seed = shuffle_epoch(&ld->shuffler, ld->order, perm_n, !persistent || ld->epoch == 0);
        if (base) ld->base_seed = seed;
        ld->shuffler_epoch++;
    } else if (ld->opts.shuffle) {
        tg_mt19937 g;
        tg_mt19937_seed(&g, sampler_seed);
        tg_mt19937_permutation(&g, ld->order, ld->n);
    }
    if (!ld->opts.shuffle)
        for (int64_t i = 0; i < ld->n; i++) ld->order[i] = i;
    ld->ordered = true;
}

static tg_tensor *deliver(const tg_loader *ld, tg_tensor *batch) {
    if (!batch || ld->opts.device.kind == TG_DEVICE_CPU) return batch;
    return tg_tensor_to(batch, ld->opts.device);
}

tg_status tg_loader_seek(tg_loader *ld, int64_t batch) {
    if (!ld) return tg_error("tg_loader_seek: the loader is NULL");
    if (batch < 0) return tg_error("tg_loader_seek: batch %lld is negative", (long long)batch);
    int64_t pos = batch > ld->len / ld->opts.batch_size + 1 ? ld->len : batch * ld->opts.batch_size;
    pos = pos < ld->len ? pos : ld->len;
    if (pos != ld->pos) end_pass(ld); /* the workers restart from the new batch */
    ld->pos = pos;
    return TG_OK;
}

/* ---- making a batch (on the calling thread or a worker) ---- */

/* Sample i of t [N, ...] as a new [...] CPU tensor in the current scope. */
static tg_tensor *sample_of(tg_tensor *t, int64_t i) {
    tg_shape s = tg_shape_of(t);
    tg_shape row = tg_shape_from(s.ndim - 1, s.dims + 1);
    tg_tensor *out = tg_empty(row, (tg_opts){.dtype = tg_dtype_of(t)});
    if (!out) return NULL;
    size_t bytes = (size_t)tg_shape_numel(row) * tg_dtype_size(tg_dtype_of(t));
    if (bytes) memcpy(tg_data_ptr(out), (const char *)tg_data_ptr(t) + (size_t)i * bytes, bytes);
    return out;
}

static tg_status load_sample(const tg_loader *ld, int64_t index, tg_tensor **x, tg_tensor **y) {
    *x = *y = NULL;
    if (ld->dataset.get) {
        if (ld->dataset.get(ld->dataset.ctx, index, x, y) == TG_OK && *x) return TG_OK;
        char why[1024]; /* tg_error must not read the buffer it writes */
        snprintf(why, sizeof why, "%s", tg_last_error()[0] ? tg_last_error() : "the data set's get gave no x");
        return tg_error("tg_loader_next: sample %lld: %s", (long long)index, why);
    }
    *x = sample_of(ld->x, index);
    *y = ld->y ? sample_of(ld->y, index) : NULL;
    return *x && (!ld->y || *y) ? TG_OK : TG_ERROR;
}

/* default_collate: torch.stack of the samples, which must agree in shape and dtype.
 * which: "x" or "y" for messages. New reference in the current scope. */
static tg_tensor *stack(tg_tensor **items, const int64_t *indices, int64_t count, const char *which) {
    tg_tensor *first = items[0];
    for (int64_t i = 1; i < count; i++) {
        if (!tg_shape_equal(tg_shape_of(items[i]), tg_shape_of(first)) || tg_dtype_of(items[i]) != tg_dtype_of(first)) {
            char a[128], b[128];
            tg_shape_str(tg_shape_of(first), a, sizeof a);
            tg_shape_str(tg_shape_of(items[i]), b, sizeof b);
            return tg_error("tg_loader_next: samples of a batch are stacked and must agree: sample %lld's %s is %s %s "
                            "but sample %lld's is %s %s (resize images with a crop transform)",
                            (long long)indices[0], which, tg_dtype_name(tg_dtype_of(first)), a, (long long)indices[i],
                            tg_dtype_name(tg_dtype_of(items[i])), b),
                   NULL;
        }
    }
    tg_shape s = tg_shape_of(first);
    if (s.ndim >= TG_MAX_DIMS) return tg_error("tg_loader_next: samples of %d dims cannot be stacked", s.ndim), NULL;
    tg_shape bs = {.ndim = s.ndim + 1, .dims = {count}};
    for (int d = 0; d < s.ndim; d++) bs.dims[d + 1] = s.dims[d];
    tg_tensor *out = tg_empty(bs, (tg_opts){.dtype = tg_dtype_of(first)});
    if (!out) return NULL;
    size_t bytes = (size_t)tg_numel(first) * tg_dtype_size(tg_dtype_of(first));
    for (int64_t i = 0; i < count; i++) {
        tg_tensor *c = tg_device_of(items[i]).kind == TG_DEVICE_CPU ? items[i] : tg_tensor_to(items[i], TG_CPU);
        if (c && !tg_is_contiguous(c)) c = tg_clone_values(c);
        if (!c) return NULL;
        if (bytes) memcpy((char *)tg_data_ptr(out) + (size_t)i * bytes, tg_data_ptr(c), bytes);
    }
    return out;
}

/* The samples at idx, one at a time: loaded, transformed, stacked. */
static bool make_from_samples(const tg_loader *ld, const int64_t *idx, int64_t count, tg_mt19937 *gen, tg_tensor **bx,
                              tg_tensor **by) {
    tg_tensor **xs = calloc((size_t)count, sizeof *xs), **ys = calloc((size_t)count, sizeof *ys);
    bool ok = xs && ys;
    if (!ok) tg_error("tg_loader_next: out of memory for a batch of %lld", (long long)count);
    for (int64_t i = 0; i < count && ok; i++) {
        ok = load_sample(ld, idx[i], &xs[i], &ys[i]) == TG_OK;
        if (ok && (ys[i] == NULL) != (ys[0] == NULL)) {
            tg_error("tg_loader_next: sample %lld has %s y but sample %lld %s", (long long)idx[i], ys[i] ? "a" : "no",
                     (long long)idx[0], ys[0] ? "has one" : "has none");
            ok = false;
        }
        if (ok && ld->opts.transform.count > 0) {
            xs[i] = tg_compose_apply(&ld->opts.transform, xs[i], gen);
            if (!xs[i]) {
                char why[1024];
                snprintf(why, sizeof why, "%s", tg_last_error());
                tg_error("tg_loader_next: the transform of sample %lld failed: %s", (long long)idx[i], why);
                ok = false;
            }
        }
    }
    if (ok) *bx = stack(xs, idx, count, "x");
    if (ok && *bx && ys[0]) *by = stack(ys, idx, count, "y");
    ok = ok && *bx && (!ys[0] || *by);
    free(xs);
    free(ys);
    return ok;
}

/* Batch `batch` of the current order: new references in the current scope. */
static bool make_batch(const tg_loader *ld, int64_t batch, tg_mt19937 *gen, tg_tensor **bx, tg_tensor **by) {
    int64_t start = batch * ld->opts.batch_size;
    int64_t left = ld->len - start;
    int64_t count = left < ld->opts.batch_size ? left : ld->opts.batch_size;
    const int64_t *idx = ld->order + start;
    *bx = *by = NULL;
    if (ld->dataset.get || ld->opts.transform.count > 0) return make_from_samples(ld, idx, count, gen, bx, by);
    *bx = tg_take_samples(ld->x, idx, count);
    *by = ld->y && *bx ? tg_take_samples(ld->y, idx, count) : NULL;
    return *bx && (!ld->y || *by);
}

/* A worker's batch: references it owns (no scope is open on a worker thread). */
static bool make_batch_on_worker(void *ctx, int64_t batch, tg_mt19937 *gen, tg_tensor **x, tg_tensor **y) {
    bool ok = false;
    TG_SCOPE {
        ok = make_batch(ctx, batch, gen, x, y);
        if (ok) {
            tg_scope_return(*x);
            tg_scope_return(*y);
        }
    }
    if (!ok) *x = *y = NULL;
    return ok;
}

/* Batch `batch` from the workers, started (or restarted after a seek) as needed. */
static bool take_from_workers(tg_loader *ld, int64_t batch, tg_tensor **bx, tg_tensor **by) {
    if (!tg_loader_workers_expects(ld->workers, batch)) {
        if (!ld->workers) {
            ld->workers = tg_loader_workers_new(ld->opts.num_workers, ld->opts.prefetch_factor, ld->base_seed,
                                                make_batch_on_worker, ld);
            if (!ld->workers) return false;
        }
        tg_loader_workers_start(ld->workers, batch, tg_loader_num_batches(ld));
    }
    tg_tensor *x, *y;
    if (tg_loader_workers_take(ld->workers, &x, &y) != TG_OK) return false;
    *bx = tg_scope_track(x); /* the workers' references become the scope's */
    *by = y ? tg_scope_track(y) : NULL;
    return true;
}

bool tg_loader_next(tg_loader *ld, tg_tensor **x, tg_tensor **y) {
    if (x) *x = NULL;
    if (y) *y = NULL;
    if (!ld || !x) {
        tg_error("tg_loader_next: %s is NULL", ld ? "the x output pointer" : "the loader");
        return false;
    }
    /* As iterating a DataLoader again: a new pass is the next epoch, reshuffled. */
    if (ld->finished) tg_loader_reset(ld, ld->epoch + 1);
    if (!ld->ordered) draw_order(ld);
    int64_t left = ld->len - ld->pos;
    int64_t count = left < ld->opts.batch_size ? left : ld->opts.batch_size;
    if (count <= 0 || (ld->opts.drop_last && count < ld->opts.batch_size)) {
        ld->finished = true;
        end_pass(ld);
        return false;
    }
    int64_t batch = ld->pos / ld->opts.batch_size;
    tg_tensor *bx = NULL, *by = NULL;
    bool ok = false;
    TG_SCOPE {
        if (ld->opts.num_workers > 0) {
            ok = take_from_workers(ld, batch, &bx, &by);
            if (!ok && ld->workers) ld->pos += count; /* a worker's failed batch is consumed, as in PyTorch */
        } else {
            ok = make_batch(ld, batch, NULL, &bx, &by);
        }
        if (ok) {
            tg_tensor *made_y = by;
            bx = deliver(ld, bx);
            by = made_y ? deliver(ld, made_y) : NULL;
            ok = bx && (!made_y || by);
        }
        if (ok) {
            tg_scope_return(bx);
            tg_scope_return(by);
        }
    }
    if (!ok) return false;
    ld->pos += count;
    *x = bx;
    if (y) *y = by;
    return true;
}

/* TG_FOR_EACH_BATCH: a scope per batch, ended however the loop is left. */
tg_batch_loop_ tg_batch_loop_begin_(tg_loader *ld, tg_tensor **x, tg_tensor **y) {
    tg_batch_loop_ l = {ld, tg_scope_depth(), false};
    tg_scope_begin();
    l.more = tg_loader_next(ld, x, y);
    return l;
}

void tg_batch_loop_next_(tg_batch_loop_ *l, tg_tensor **x, tg_tensor **y) {
    while (tg_scope_depth() > l->depth) tg_scope_end();
    tg_scope_begin();
    l->more = tg_loader_next(l->ld, x, y);
}

void tg_batch_loop_end_(tg_batch_loop_ *l) {
    /* Left with a batch in hand (break, return, goto): the pass is over, as a DataLoader
     * iterator that is dropped; the next pass is the next epoch. */
    if (l->more && l->ld) l->ld->finished = true;
    while (tg_scope_depth() > l->depth) tg_scope_end();
}

int64_t tg_loader_num_batches(const tg_loader *ld) {
    if (!ld) return 0;
    int64_t b = ld->opts.batch_size;
    return ld->opts.drop_last ? ld->len / b : (ld->len + b - 1) / b;
}

int64_t tg_loader_num_samples(const tg_loader *ld) { return ld ? ld->n : 0; }
int64_t tg_loader_epoch(const tg_loader *ld) { return ld ? ld->epoch : 0; }
