/* DistributedDataParallel (distributed/ddp.h): buckets of gradients all-reduced while the
 * backward is still running.
 *
 * Each parameter has a slot: its bucket and a view of its place in the bucket's flat
 * buffer. Its post-accumulate hook (autograd/grad.h, run as soon as backward has its
 * gradient) copies .grad into the view; when a bucket has all its gradients, it and
 * any following full buckets start their non-blocking all-reduce (in bucket order, so
 * that every rank issues the same collectives in the same order). Each hook also
 * polls the buckets in flight: Open MPI moves a non-blocking collective forward only
 * inside MPI calls. The hook of the last parameter waits for all buckets and copies the
 * averages back into .grad, before tg_backward returns. */
#include "distributed/ddp.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autograd/grad.h"
#include "core/scope.h"
#include "core/tensor_impl.h"

#define FIRST_BUCKET_BYTES (1024.0 * 1024.0) /* PyTorch's dist._DEFAULT_FIRST_BUCKET_BYTES */
#define DEFAULT_BUCKET_MB 25.0

typedef struct {
    tg_ddp *ddp;
    int param; /* index into params */
    int bucket;
    tg_tensor *view; /* owned: the parameter's place in its bucket's buffer */
    bool ready;      /* its gradient is in the bucket this step */
} slot;

typedef struct {
    tg_tensor *flat; /* owned; [numel] of the bucket's dtype, on its device */
    int *params;     /* indices into params, in the order their gradients are expected */
    int count;
    int ready;
    tg_dist_work *work;
    double started, ended; /* of this step's all-reduce; ended 0 while unknown */
} bucket;

struct tg_ddp {
    tg_module *module;
    tg_ddp_opts opts;
    int num_params;
    tg_tensor **params; /* owned references */
    const char **names; /* borrowed from the module's named list, copied */
    slot *slots;
    bucket *buckets;
    int num_buckets;
    int next_launch; /* the first bucket whose all-reduce has not started */
    int params_ready;
    bool sync;
    bool active;      /* more than one rank: there is something to reduce */
    int64_t step;     /* synchronised backwards finished: the tag the ranks' buckets must agree on */
    int64_t forwards; /* tg_ddp_forward calls: the tag of the buffers' broadcasts */
    tg_ddp_stats stats;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- during backward ---- */

static void progress(tg_ddp *d) {
    for (int b = 0; b < d->next_launch; b++) {
        bucket *k = &d->buckets[b];
        if (k->work && !k->ended && tg_dist_test(k->work)) k->ended = now_s();
    }
}

static tg_status launch_ready_buckets(tg_ddp *d) {
    while (d->next_launch < d->num_buckets) {
        bucket *k = &d->buckets[d->next_launch];
        if (k->ready < k->count) break;
        k->started = now_s();
        k->ended = 0;
        char label[80];
        snprintf(label, sizeof label, "bucket %d of %d (%lld elements) in step %lld", d->next_launch, d->num_buckets,
                 (long long)tg_numel(k->flat), (long long)d->step + 1);
        tg_dist_label_next(d->step + 1, label);
        k->work = tg_dist_all_reduce_start(k->flat, TG_DIST_AVG);
        if (!k->work) return TG_ERROR;
        d->next_launch++;
    }
    return TG_OK;
}

/* Waits for every bucket, writes the averages into .grad, and readies the next step. */
static void finish_step(tg_ddp *d) {
    double wait_start = now_s(), first = 0, last = 0;
    tg_status status = TG_OK;
    for (int b = 0; b < d->num_buckets; b++) {
        bucket *k = &d->buckets[b];
        bool was_done = k->ended != 0;
        if (tg_dist_wait(k->work)) status = TG_ERROR;
        k->work = NULL;
        if (!was_done) k->ended = now_s();
        if (b == 0 || k->started < first) first = k->started;
        if (k->ended > last) last = k->ended;
    }
    double waited = now_s() - wait_start;
    for (int i = 0; status == TG_OK && i < d->num_params; i++)
        if (tg_copy_values_(tg_grad(d->params[i]), d->slots[i].view)) status = TG_ERROR;
    for (int b = 0; b < d->num_buckets; b++) d->buckets[b].ready = 0;
    for (int i = 0; i < d->num_params; i++) d->slots[i].ready = false;
    d->params_ready = 0;
    d->next_launch = 0;
    d->step++;
    if (status == TG_OK) {
        d->stats.steps++;
        d->stats.comm_s += last - first;
        d->stats.wait_s += waited;
        for (int b = 0; b < d->num_buckets; b++)
            d->stats.bytes += (double)tg_numel(d->buckets[b].flat) * tg_dtype_size(tg_dtype_of(d->buckets[b].flat));
    }
}

static void on_gradient(tg_tensor *leaf, void *user) {
    slot *s = user;
    tg_ddp *d = s->ddp;
    if (!d->active || !d->sync) return;
    if (s->ready) {
        tg_error("tg_ddp: parameter '%s' got a second gradient before the buckets of this step were "
                 "reduced (a second backward through the same forward?)",
                 d->names[s->param]);
        return;
    }
    if (tg_copy_values_(s->view, tg_grad(leaf))) return;
    s->ready = true;
    d->params_ready++;
    d->buckets[s->bucket].ready++;
    if (launch_ready_buckets(d)) return;
    progress(d);
    if (d->params_ready == d->num_params) finish_step(d);
}

/* ---- set-up ---- */

static tg_status build_buckets(tg_ddp *d) {
    double cap = (d->opts.bucket_cap_mb > 0 ? d->opts.bucket_cap_mb : DEFAULT_BUCKET_MB) * 1024 * 1024;
    double first_cap = cap < FIRST_BUCKET_BYTES ? cap : FIRST_BUCKET_BYTES;
    /* One open bucket per (dtype, device); PyTorch's compute_bucket_assignment_by_size
     * over the parameters in reverse order, the first bucket of each kind capped at 1 MB. */
    typedef struct {
        tg_dtype dtype;
        tg_device device;
        int bucket;   /* the open bucket, or -1 */
        int closed;   /* buckets of this kind closed so far */
        double bytes; /* in the open bucket */
    } kind;
    kind *kinds = calloc((size_t)d->num_params + 1, sizeof *kinds);
    d->buckets = calloc((size_t)d->num_params + 1, sizeof *d->buckets);
    if (!kinds || !d->buckets) return free(kinds), tg_error("tg_ddp_new: out of memory");
    int num_kinds = 0;
    for (int i = d->num_params - 1; i >= 0; i--) {
        tg_tensor *p = d->params[i];
        kind *k = NULL;
        for (int j = 0; j < num_kinds && !k; j++)
            if (kinds[j].dtype == tg_dtype_of(p) && tg_device_equal(kinds[j].device, tg_device_of(p))) k = &kinds[j];
        if (!k) {
            k = &kinds[num_kinds++];
            *k = (kind){tg_dtype_of(p), tg_device_of(p), -1, 0, 0};
        }
        if (k->bucket < 0) {
            k->bucket = d->num_buckets++;
            d->buckets[k->bucket].params = calloc((size_t)d->num_params, sizeof(int));
            if (!d->buckets[k->bucket].params) return free(kinds), tg_error("tg_ddp_new: out of memory");
        }
        bucket *b = &d->buckets[k->bucket];
        b->params[b->count++] = i;
        d->slots[i].bucket = k->bucket;
        k->bytes += (double)tg_numel(p) * tg_dtype_size(tg_dtype_of(p));
        if (k->bytes >= (k->closed == 0 ? first_cap : cap)) {
            k->bucket = -1;
            k->closed++;
            k->bytes = 0;
        }
    }
    free(kinds);
    /* Buckets are numbered in the order their kind's first parameter appears from the
     * end, which is the order their gradients arrive for a single-kind model. */
    for (int b = 0; b < d->num_buckets; b++) {
        bucket *k = &d->buckets[b];
        int64_t total = 0;
        for (int j = 0; j < k->count; j++) total += tg_numel(d->params[k->params[j]]);
        tg_tensor *first = d->params[k->params[0]];
        TG_SCOPE {
            k->flat = tg_retain(
                tg_zeros(TG_SHAPE(total), (tg_opts){.dtype = tg_dtype_of(first), .device = tg_device_of(first)}));
            int64_t offset = 0;
            for (int j = 0; k->flat && j < k->count; j++) {
                int i = k->params[j];
                tg_shape shape = tg_shape_of(d->params[i]);
                int64_t strides[TG_MAX_DIMS], step = 1;
                for (int dim = shape.ndim - 1; dim >= 0; dim--) {
                    strides[dim] = step;
                    step *= shape.dims[dim];
                }
                d->slots[i].view = tg_retain(tg_make_view("tg_ddp_new", k->flat, shape, strides, offset));
                offset += step;
            }
        }
        if (!k->flat) return TG_ERROR;
        for (int j = 0; j < k->count; j++)
            if (!d->slots[k->params[j]].view) return TG_ERROR;
    }
    return TG_OK;
}

/* ---- the same model on every rank ----
 * As PyTorch's DDP (_verify_param_shape_across_processes), and with names and buffers
 * too: each rank describes its parameters and buffers (name, dtype, shape; one line
 * each), the ranks compare the descriptions' lengths and hashes, and when they differ
 * gather the texts so that every rank names the first difference. Before any
 * broadcast, so a mismatch leaves every rank's weights as they were. */

static uint64_t fnv1a(const char *text, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)text[i]) * 1099511628211ULL;
    return h;
}

/* The lines of the description: "parameter 0.weight float32 [6, 4]\n" ... (malloc). */
static char *describe_model(tg_module *m, size_t *length) {
    size_t cap = 256, used = 0;
    char *text = malloc(cap);
    for (int kind = 0; text && kind < 2; kind++) {
        int count = 0;
        const tg_named_tensor *named = kind == 0 ? tg_named_parameters(m, &count) : tg_named_buffers(m, &count);
        for (int i = 0; text && i < count; i++) {
            char shape[96], line[256];
            tg_tensor *t = named[i].tensor;
            int n = snprintf(line, sizeof line, "%s %s %s %s\n", kind == 0 ? "parameter" : "buffer", named[i].name,
                             tg_dtype_name(tg_dtype_of(t)), tg_shape_str(tg_shape_of(t), shape, sizeof shape));
            if (n < 0) continue;
            if ((size_t)n >= sizeof line) n = sizeof line - 1;
            if (used + (size_t)n + 1 > cap) {
                char *bigger = realloc(text, cap = 2 * (used + (size_t)n + 1));
                if (!bigger) free(text);
                text = bigger;
                if (!text) break;
            }
            memcpy(text + used, line, (size_t)n);
            used += (size_t)n;
        }
    }
    if (text) text[used] = 0;
    *length = used;
    return text;
}

/* The line of a description (of `length` bytes) that begins at byte `at`, in `out`. */
static void line_at(const char *text, size_t length, size_t at, char *out, size_t size) {
    size_t n = 0;
    while (at + n < length && text[at + n] != '\n') n++;
    if (at >= length) snprintf(out, size, "nothing more");
    else snprintf(out, size, "%.*s", (int)n, text + at);
}

/* Every rank's description gathered (already known to differ): the first rank whose
 * description differs from rank 0's, and the first line where. */
static tg_status name_the_difference(const char *op, const char *mine, size_t length, int64_t longest) {
    tg_status status = TG_ERROR;
    int world = tg_dist_world_size();
    TG_SCOPE {
        tg_tensor *padded = tg_zeros(TG_SHAPE(longest + 1), (tg_opts){.dtype = TG_UINT8});
        if (padded) memcpy(tg_data_ptr(padded), mine, length);
        tg_dist_label_next(0, "the model descriptions");
        tg_tensor *all = padded ? tg_dist_all_gather(padded) : NULL;
        if (all) {
            const char *text0 = tg_data_ptr(all);
            for (int r = 1; r < world; r++) {
                const char *text = text0 + (size_t)r * (size_t)(longest + 1);
                size_t n0 = strlen(text0), n = strlen(text), at = 0, line_start = 0;
                while (at < n0 && at < n && text0[at] == text[at]) {
                    if (text0[at] == '\n') line_start = at + 1;
                    at++;
                }
                if (at == n0 && at == n) continue;
                char line0[160], line[160];
                line_at(text0, n0, line_start, line0, sizeof line0);
                line_at(text, n, line_start, line, sizeof line);
                status = tg_error("%s: the ranks' models differ (DDP needs the same parameters and buffers, "
                                  "names, dtypes and shapes, on every rank): rank 0 has %s where rank %d has %s",
                                  op, line0, r, line);
                break;
            }
        }
    }
    return status;
}

static tg_status verify_same_model(const char *op, tg_module *m) {
    size_t length = 0;
    char *text = describe_model(m, &length);
    if (!text) return tg_error("%s: out of memory", op);
    tg_status status = TG_ERROR;
    TG_SCOPE {
        int64_t summary[2] = {(int64_t)length, (int64_t)fnv1a(text, length)};
        tg_tensor *mine = tg_from_data(summary, TG_SHAPE(2), (tg_opts){.dtype = TG_INT64});
        tg_dist_label_next(0, "the model descriptions' sizes");
        tg_tensor *all = mine ? tg_dist_all_gather(mine) : NULL;
        if (all) {
            const int64_t *s = tg_data_ptr(all);
            int64_t longest = 0;
            bool same = true;
            for (int r = 0; r < tg_dist_world_size(); r++) {
                same &= s[2 * r] == summary[0] && s[2 * r + 1] == summary[1];
                if (s[2 * r] > longest) longest = s[2 * r];
            }
            status = same ? TG_OK : name_the_difference(op, text, length, longest);
        }
    }
    free(text);
    return status;
}

tg_ddp *tg_ddp_new(tg_module *m, tg_ddp_opts opts) {
    const char *op = "tg_ddp_new";
    if (!m) return tg_error("%s: the module is NULL", op), NULL;
    if (opts.bucket_cap_mb < 0 || opts.bucket_cap_mb != opts.bucket_cap_mb)
        return tg_error("%s: bucket_cap_mb %g is negative", op, opts.bucket_cap_mb), NULL;
    int count = 0;
    const tg_named_tensor *named = tg_named_parameters(m, &count);
    if (count == 0) return tg_error("%s: the module has no parameters to synchronise", op), NULL;
    tg_ddp *d = calloc(1, sizeof *d);
    if (!d) return tg_error("%s: out of memory", op), NULL;
    d->module = m;
    d->opts = opts;
    d->sync = true;
    d->active = tg_dist_is_initialized() && tg_dist_world_size() > 1;
    d->num_params = count;
    d->params = calloc((size_t)count, sizeof *d->params);
    d->names = calloc((size_t)count, sizeof *d->names);
    d->slots = calloc((size_t)count, sizeof *d->slots);
    if (!d->params || !d->names || !d->slots) {
        tg_error("%s: out of memory", op);
        tg_ddp_free(d);
        return NULL;
    }
    for (int i = 0; i < count; i++) {
        d->params[i] = tg_retain(named[i].tensor);
        d->names[i] = strdup(named[i].name);
        d->slots[i] = (slot){d, i, -1, NULL, false};
    }
    bool ok = !d->active || !verify_same_model(op, m);
    /* Rank 0's weights and buffers everywhere (DDP's _sync_module_states). */
    for (int i = 0; ok && d->active && i < count; i++) ok = !tg_dist_broadcast(d->params[i], 0);
    int num_buffers = 0;
    const tg_named_tensor *buffers = tg_named_buffers(m, &num_buffers);
    for (int i = 0; ok && d->active && i < num_buffers; i++) ok = !tg_dist_broadcast(buffers[i].tensor, 0);
    ok = ok && !build_buckets(d);
    for (int i = 0; ok && i < count; i++)
        ok = !tg_register_post_accumulate_grad_hook(d->params[i], on_gradient, &d->slots[i]);
    if (!ok) {
        tg_ddp_free(d);
        return NULL;
    }
    return d;
}

void tg_ddp_free(tg_ddp *d) {
    if (!d) return;
    for (int i = 0; i < d->num_params; i++) {
        if (d->params[i]) tg_remove_post_accumulate_grad_hook(d->params[i], on_gradient, &d->slots[i]);
        if (d->slots) tg_release(d->slots[i].view);
        tg_release(d->params[i]);
        if (d->names) free((void *)d->names[i]);
    }
    for (int b = 0; d->buckets && b < d->num_buckets; b++) {
        tg_dist_wait(d->buckets[b].work);
        tg_release(d->buckets[b].flat);
        free(d->buckets[b].params);
    }
    free(d->buckets);
    free(d->slots);
    free(d->names);
    free(d->params);
    free(d);
}

tg_module *tg_ddp_module(tg_ddp *d) { return d ? d->module : NULL; }

tg_tensor *tg_ddp_forward(tg_ddp *d, tg_tensor *x) {
    if (!d) return tg_error("tg_ddp_forward: the wrapper is NULL"), NULL;
    if (d->params_ready > 0) {
        int missing = 0;
        while (missing < d->num_params && d->slots[missing].ready) missing++;
        tg_error("tg_ddp_forward: the previous backward gave gradients to %d of %d parameters ('%s' got "
                 "none), so its buckets were never reduced; with DDP every parameter must take part in "
                 "the loss of each step",
                 d->params_ready, d->num_params, d->names[missing < d->num_params ? missing : 0]);
        return NULL;
    }
    if (d->active && !d->opts.no_buffer_sync) {
        int num_buffers = 0;
        const tg_named_tensor *buffers = tg_named_buffers(d->module, &num_buffers);
        d->forwards++;
        for (int i = 0; i < num_buffers; i++) {
            char label[80];
            snprintf(label, sizeof label, "buffer '%.40s' in forward %lld", buffers[i].name, (long long)d->forwards);
            tg_dist_label_next(d->forwards, label);
            if (tg_dist_broadcast(buffers[i].tensor, 0)) return NULL;
        }
    }
    return tg_forward(d->module, x);
}

void tg_ddp_set_sync(tg_ddp *d, bool sync) {
    if (d) d->sync = sync;
}

int tg_ddp_num_buckets(const tg_ddp *d) { return d ? d->num_buckets : 0; }

const int *tg_ddp_bucket(const tg_ddp *d, int b, int *count) {
    if (count) *count = 0;
    if (!d || b < 0 || b >= d->num_buckets) return NULL;
    if (count) *count = d->buckets[b].count;
    return d->buckets[b].params;
}

tg_ddp_stats tg_ddp_get_stats(const tg_ddp *d) { return d ? d->stats : (tg_ddp_stats){0}; }

void tg_ddp_reset_stats(tg_ddp *d) {
    if (d) d->stats = (tg_ddp_stats){0};
}
