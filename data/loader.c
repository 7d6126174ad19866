/* The batch loader (see data/loader.h). */
#include "data/loader.h"

#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/storage.h"
#include "core/tensor_impl.h"

struct tg_loader {
    tg_tensor *x;   /* owned reference, contiguous, [N, ...] */
    tg_tensor *y;   /* owned reference, contiguous, [N, ...], or NULL */
    int64_t n;      /* samples in the data set */
    int64_t len;    /* samples per epoch: n, or this rank's shard (world_size > 0) */
    tg_loader_opts opts;
    int64_t *order; /* [len] this epoch's sample order */
    int64_t pos;    /* next position in order */
    int64_t epoch;
    bool finished;  /* tg_loader_next said the epoch is over: the next call starts epoch + 1 */
    bool ordered;   /* `order` holds this epoch's order (drawn at its first batch) */
    tg_mt19937 shuffler;    /* the loader's own generator (seed != 0), ready to draw */
    int64_t shuffler_epoch; /* the order of this epoch next (-1: not seeded yet) */
};

/* ---- shuffling ---- */

static int64_t shard_len(int64_t n, int world, bool drop_last) {
    /* DistributedSampler: ceil((n - world) / world) with drop_last, else ceil(n / world). */
    if (drop_last && n % world != 0) return n > world ? (n - 1) / world : 0;
    return (n + world - 1) / world;
}

int64_t tg_distributed_indices(int64_t *indices, int64_t n, int world_size, int rank, bool shuffle,
                               uint64_t seed, int64_t epoch, bool drop_last) {
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
static void shuffle_epoch(tg_mt19937 *g, int64_t *perm, int64_t n) {
    (void)tg_mt19937_next64(g);
    tg_mt19937_permutation(g, perm, n);
}

static void skip_epoch(tg_mt19937 *g, int64_t n) {
    (void)tg_mt19937_next64(g);
    for (int64_t i = 0; i + 1 < n; i++) (void)tg_mt19937_next(g);
}

void tg_random_permutation(int64_t *perm, int64_t n, uint64_t seed, uint64_t epoch) {
    if (!perm || n <= 0) return;
    tg_mt19937 g;
    tg_mt19937_seed(&g, seed);
    for (uint64_t e = 0; e < epoch; e++) skip_epoch(&g, n);
    shuffle_epoch(&g, perm, n);
}

/* ---- gathering samples ---- */

tg_tensor *tg_take_samples(tg_tensor *t, const int64_t *indices, int64_t count) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_take_samples", t, 0), NULL;
    if (tg_ndim(t) == 0)
        return tg_error("tg_take_samples: the tensor is 0-dim; samples are indexed by dim 0"),
               NULL;
    if (count < 0 || (count > 0 && !indices))
        return tg_error("tg_take_samples: bad index list (count %lld)", (long long)count), NULL;
    int64_t n = tg_size(t, 0);
    for (int64_t i = 0; i < count; i++)
        if (indices[i] < 0 || indices[i] >= n)
            return tg_error("tg_take_samples: index %lld is out of range for %lld samples",
                            (long long)indices[i], (long long)n), NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *src = tg_is_contiguous(t) ? t : tg_clone_values(t);
        tg_shape shape = tg_shape_of(t);
        shape.dims[0] = count;
        tg_device device = tg_device_of(t);
        tg_tensor *out = src ? tg_empty(shape, (tg_opts){.dtype = tg_dtype_of(t), .device = device})
                             : NULL;
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
                if (device.kind == TG_DEVICE_CPU)
                    memcpy(to + (size_t)i * row, from + (size_t)indices[i] * row, bytes);
                else
                    ok = !tg_copy_bytes(to + (size_t)i * row, device,
                                        from + (size_t)indices[i] * row, device, bytes,
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

tg_loader *tg_loader_new(tg_tensor *x, tg_tensor *y, tg_loader_opts opts) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_loader_new", x, 0), NULL;
    if (tg_ndim(x) == 0 || (y && tg_ndim(y) == 0))
        return tg_error("tg_loader_new: x and y need a first dimension indexing samples "
                        "(got a 0-dim %s)", tg_ndim(x) == 0 ? "x" : "y"), NULL;
    if (y && tg_size(x, 0) != tg_size(y, 0))
        return tg_error("tg_loader_new: x has %lld samples but y has %lld (first dims differ)",
                        (long long)tg_size(x, 0), (long long)tg_size(y, 0)), NULL;
    if (opts.batch_size < 0)
        return tg_error("tg_loader_new: batch_size %lld is negative", (long long)opts.batch_size),
               NULL;
    if (opts.world_size < 0 || (opts.world_size > 0 && (opts.rank < 0 || opts.rank >= opts.world_size)) ||
        (opts.world_size == 0 && opts.rank != 0))
        return tg_error("tg_loader_new: rank %d is not in [0, world_size %d)", opts.rank, opts.world_size), NULL;
    if (opts.batch_size == 0) opts.batch_size = 1;
    int64_t n = tg_size(x, 0);
    tg_loader *ld = calloc(1, sizeof *ld);
    int64_t *order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    if (!ld || !order) {
        free(ld);
        free(order);
        return tg_error("tg_loader_new: out of memory for %lld sample indices", (long long)n),
               NULL;
    }
    ld->x = own_contiguous(x);
    ld->y = y ? own_contiguous(y) : NULL;
    if (!ld->x || (y && !ld->y)) {
        tg_release(ld->x);
        tg_release(ld->y);
        free(order);
        free(ld);
        return NULL;
    }
    ld->n = n;
    ld->len = opts.world_size > 0 ? shard_len(n, opts.world_size, opts.shard_drop_last) : n;
    ld->opts = opts;
    ld->order = order;
    ld->shuffler_epoch = -1;
    tg_loader_reset(ld, 0);
    return ld;
}

void tg_loader_free(tg_loader *ld) {
    if (!ld) return;
    tg_release(ld->x);
    tg_release(ld->y);
    free(ld->order);
    free(ld);
}

void tg_loader_reset(tg_loader *ld, int64_t epoch) {
    if (!ld) return;
    ld->epoch = epoch;
    ld->pos = 0;
    ld->finished = false;
    ld->ordered = false;
}

/* The current epoch's order, drawn when its first batch is asked for, as a
 * DataLoader draws when iteration starts: with seed 0 the default generator's numbers
 * then go in PyTorch's sequence wherever the program builds its model. */
static void draw_order(tg_loader *ld) {
    if (ld->opts.world_size > 0) {
        /* DataLoader(sampler=DistributedSampler(...)) without a generator: the pass draws
         * the workers' base seed from the default generator; the sampler shuffles with
         * its own torch.Generator seeded seed + epoch. */
        tg_rng_state *s = tg_rng_lock_cpu();
        (void)tg_mt19937_next64(&s->cpu);
        tg_rng_unlock_cpu();
        if (tg_distributed_indices(ld->order, ld->n, ld->opts.world_size, ld->opts.rank, ld->opts.shuffle,
                                   ld->opts.seed, ld->epoch, ld->opts.shard_drop_last) < 0) {
            tg_error("tg_loader_next: out of memory for the %lld indices of the distributed sampler",
                     (long long)ld->n);
            for (int64_t i = 0; i < ld->len; i++) ld->order[i] = (ld->opts.rank + i * ld->opts.world_size) % ld->n;
        }
        ld->ordered = true;
        return;
    }
    uint64_t sampler_seed = 0;
    if (ld->opts.seed == 0) {
        /* DataLoader without a generator: every pass draws the workers' base seed from
         * the default generator, even unshuffled; a shuffled one then draws the seed of
         * RandomSampler's own generator (random_() of an int64: 63 bits). */
        tg_rng_state *s = tg_rng_lock_cpu();
        (void)tg_mt19937_next64(&s->cpu);
        if (ld->opts.shuffle) sampler_seed = tg_mt19937_next64(&s->cpu) % (1ull << 63);
        tg_rng_unlock_cpu();
    }
    if (!ld->opts.shuffle) {
        for (int64_t i = 0; i < ld->n; i++) ld->order[i] = i;
    } else if (ld->opts.seed == 0) {
        tg_mt19937 g;
        tg_mt19937_seed(&g, sampler_seed);
        tg_mt19937_permutation(&g, ld->order, ld->n);
    } else {
        if (ld->shuffler_epoch < 0 || ld->epoch < ld->shuffler_epoch) { /* from the start */
            tg_mt19937_seed(&ld->shuffler, ld->opts.seed);
            ld->shuffler_epoch = 0;
        }
        for (; ld->shuffler_epoch < ld->epoch; ld->shuffler_epoch++) skip_epoch(&ld->shuffler, ld->n);
        shuffle_epoch(&ld->shuffler, ld->order, ld->n);
        ld->shuffler_epoch++;
    }
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
    ld->pos = pos < ld->len ? pos : ld->len;
    return TG_OK;
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
        return false;
    }
    const int64_t *idx = ld->order + ld->pos;
    tg_tensor *bx = NULL, *by = NULL;
    bool ok = false;
    TG_SCOPE {
        bx = deliver(ld, tg_take_samples(ld->x, idx, count));
        by = ld->y ? deliver(ld, tg_take_samples(ld->y, idx, count)) : NULL;
        ok = bx && (!ld->y || by);
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
