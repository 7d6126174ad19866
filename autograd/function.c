/* tg_apply: runs an op and records it; the ctx accessors; node lifetime. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autocast_impl.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/profile.h"
#include "core/parallel.h"
#include "core/scope.h"
#include "core/thread_exit.h"
#include "ops/elementwise.h"
#include "core/tensor_impl.h"

static atomic_long live_nodes;
static _Thread_local uint64_t next_sequence_nr;

long tg_live_graph_nodes(void) { return atomic_load(&live_nodes); }

/* ---- node lifetime ----
 * Freeing a node releases its saved tensors and input edges, which may free more
 * nodes: those are queued on a per-thread list and freed by one loop, never by
 * recursion, so that releasing a 100,000-node chain does not overflow the stack. */
static _Thread_local tg_node **release_queue;
static _Thread_local long queue_count, queue_capacity;
static _Thread_local bool draining;

static void free_hooks(tg_hook_entry *h) {
    while (h) {
        tg_hook_entry *next = h->next;
        free(h);
        h = next;
    }
}

/* Node structs are recycled per thread (a node is ~1.5 KB; calloc/free of one per op
 * showed in the per-op profile). */
#define FREE_NODES_MAX 1024
#define FREE_NODES_KEPT (TG_RECYCLE_STRUCTS ? FREE_NODES_MAX : 0)
static _Thread_local tg_node *free_nodes[FREE_NODES_MAX];
static _Thread_local int free_node_count;

static _Thread_local bool cache_registered;

static void free_node_cache(void) {
    while (free_node_count > 0) free(free_nodes[--free_node_count]);
    free(release_queue);
    release_queue = NULL;
    queue_capacity = 0;
}

static void ensure_thread_cleanup(void) {
    if (!cache_registered) {
        cache_registered = true;
        tg_at_thread_exit(free_node_cache);
    }
}

static tg_node *node_alloc(void) {
    ensure_thread_cleanup();
    if (free_node_count > 0) {
        tg_node *n = free_nodes[--free_node_count];
        memset(n, 0, TG_NODE_CLEARED_BYTES);
        return n;
    }
    return calloc(1, sizeof(tg_node));
}

static void node_free(tg_node *n) {
    if (FREE_NODES_KEPT > 0 && free_node_count < FREE_NODES_KEPT) /* none kept under the sanitizers */
        free_nodes[free_node_count++] = n;
    else free(n);
}

static void free_node_contents(tg_node *n) {
    for (int i = 0; i < n->num_saved; i++) tg_release(n->saved[i].tensor);
    if (n->saved != n->saved_inline) free(n->saved);
    for (int i = 0; i < n->num_inputs; i++) {
        if (n->edges[i].node) tg_node_release(n->edges[i].node);
        tg_release(n->edges[i].leaf);
    }
    for (int i = 0; i < n->num_outputs; i++) free_hooks(n->output_hooks[i]);
    if (n->attrs != n->attrs_inline) free(n->attrs);
    node_free(n);
    atomic_fetch_sub(&live_nodes, 1);
}

void tg_node_retain(tg_node *n) { n->refcount++; }

void tg_node_release(tg_node *n) {
    if (!n || --n->refcount > 0) return;
    if (queue_count == queue_capacity) {
        ensure_thread_cleanup();
        long cap = queue_capacity ? 2 * queue_capacity : 64;
        tg_node **q = realloc(release_queue, (size_t)cap * sizeof *q);
        TG_ASSERT(q != NULL);
        release_queue = q;
        queue_capacity = cap;
    }
    release_queue[queue_count++] = n;
    if (draining) return;
    draining = true;
    while (queue_count > 0) free_node_contents(release_queue[--queue_count]);
    draining = false;
}

static void free_tensor_slots(tg_tensor *t) {
    if (t->grad_fn && t->grad_fn->retains_grad[t->output_nr] == t) t->grad_fn->retains_grad[t->output_nr] = NULL;
    if (t->grad_fn) tg_node_release(t->grad_fn);
    if (t->hooks) {
        free_hooks(t->hooks->first);
        for (tg_post_hook_entry *h = t->hooks->post_first, *next; h; h = next) {
            next = h->next;
            free(h);
        }
        free(t->hooks);
    }
    t->grad_fn = NULL;
    t->hooks = NULL;
}

void tg_autograd_install(void) { tg_autograd_free_slots = free_tensor_slots; }

/* ---- ctx ---- */

void tg_ctx_save(tg_ctx *ctx, tg_tensor *t) {
    tg_node *n = ctx->node;
    if (!n || !t) return;
    if (!n->saved) {
        n->saved = n->saved_inline;
        n->saved_capacity = (int)(sizeof n->saved_inline / sizeof n->saved_inline[0]);
    }
    if (n->num_saved == n->saved_capacity) {
        int cap = 2 * n->saved_capacity;
        tg_saved *s =
            n->saved == n->saved_inline ? malloc((size_t)cap * sizeof *s) : realloc(n->saved, (size_t)cap * sizeof *s);
        TG_ASSERT(s != NULL);
        if (n->saved == n->saved_inline) memcpy(s, n->saved_inline, sizeof n->saved_inline);
        n->saved = s;
        n->saved_capacity = cap;
    }
    n->saved[n->num_saved++] = (tg_saved){tg_retain(t), t->storage->version, -1};
}

const tg_function *tg_ctx_function(const tg_ctx *ctx) { return ctx->fn; }

void tg_ctx_set_attrs(tg_ctx *ctx, const void *attrs, size_t size) {
    tg_node *n = ctx->node;
    if (!n) {
        ctx->args = attrs; /* forward reads them back; they outlive it */
        return;
    }
    if (n->attrs != n->attrs_inline) free(n->attrs);
    n->attrs = size <= sizeof n->attrs_inline ? n->attrs_inline : malloc(size);
    TG_ASSERT(n->attrs != NULL);
    memcpy(n->attrs, attrs, size);
    n->attrs_size = size;
}

void tg_ctx_set_output(tg_ctx *ctx, int i, tg_tensor *t) {
    TG_ASSERT(i > 0 && i < TG_MAX_OP_OUTPUTS);
    ctx->outputs[i] = t;
}

void tg_ctx_mark_non_differentiable(tg_ctx *ctx, int output) {
    TG_ASSERT(output >= 0 && output < TG_MAX_OP_OUTPUTS);
    ctx->non_differentiable[output] = true;
}

const void *tg_ctx_attrs(const tg_ctx *ctx) { return ctx->node ? ctx->node->attrs : ctx->args; }
bool tg_ctx_needs_input_grad(const tg_ctx *ctx, int i) { return ctx->node->needs_input_grad[i]; }
tg_shape tg_ctx_input_shape(const tg_ctx *ctx, int i) { return ctx->node->input_meta[i].shape; }
tg_dtype tg_ctx_input_dtype(const tg_ctx *ctx, int i) { return ctx->node->input_meta[i].dtype; }

tg_tensor *tg_ctx_saved(tg_ctx *ctx, int i) {
    tg_node *n = ctx->node;
    if (n->saved_freed) {
        tg_error("%s (#%llu): trying to backward through the graph a second time, after its saved "
                 "tensors were freed; pass retain_graph=true to the first backward",
                 n->fn->name, (unsigned long long)n->sequence_nr);
        return NULL;
    }
    TG_ASSERT(i >= 0 && i < n->num_saved);
    tg_saved *s = &n->saved[i];
    if (s->tensor->storage->version != s->version) {
        char buf[128];
        tg_error("%s (#%llu): a tensor of shape %s saved for backward was modified by an in-place "
                 "operation (version %llu, expected %llu)",
                 n->fn->name, (unsigned long long)n->sequence_nr, tg_shape_str(s->tensor->shape, buf, sizeof buf),
                 (unsigned long long)s->tensor->storage->version, (unsigned long long)s->version);
        return NULL;
    }
    if (s->output_index < 0 || !n->output_differentiable[s->output_index]) return s->tensor;
    /* A saved output is kept without its graph link (it would keep its own node alive);
     * give backward a view that has it again, for second derivatives. */
    tg_tensor *alias = tg_detach(s->tensor);
    tg_node_retain(n);
    alias->grad_fn = n;
    alias->output_nr = s->output_index;
    alias->requires_grad = true;
    return alias;
}

__attribute__((visibility("hidden"))) _Thread_local tg_backward_frame tg_current_backward_frame;

tg_tensor *tg_ctx_grad_output(tg_ctx *ctx, int i) {
    tg_node *n = ctx->node;
    TG_ASSERT(i >= 0 && i < n->num_outputs && tg_current_backward_frame.node == n);
    tg_tensor **g = &tg_current_backward_frame.grads[i];
    if (!*g) {
        tg_tensor_meta m = n->output_meta[i];
        *g = tg_retain(tg_zeros(m.shape, (tg_opts){.dtype = m.dtype, .device = m.device}));
    }
    return *g;
}

/* ---- tg_apply ---- */

static tg_node *new_node(const tg_function *fn, int num_outputs) {
    tg_node *n = node_alloc();
    TG_ASSERT(n != NULL);
    n->refcount = 1;
    n->fn = fn;
    n->sequence_nr = next_sequence_nr++;
    n->num_inputs = fn->num_inputs;
    n->num_outputs = num_outputs;
    n->attrs = n->attrs_inline;
    n->ctx.node = n;
    atomic_fetch_add(&live_nodes, 1);
    tg_autograd_free_slots = free_tensor_slots;
    return n;
}

static tg_tensor_meta meta_of(const tg_tensor *t) { return (tg_tensor_meta){t->shape, t->dtype, t->storage->device}; }

/* TG_LOW_PRECISION_IN_FLOAT32: the op on float32 copies of the inputs of dtype `low`,
 * its floating outputs cast back to `low`. The casts are ops of their own, so the
 * graph is cast -> op -> cast and gradients come back in the inputs' dtypes. */
static tg_status apply_in_float32(const tg_function *fn, tg_tensor *const *inputs, const void *args, size_t size,
                                  tg_tensor **outputs, int num_outputs, tg_dtype low) {
    for (int i = 0; i < fn->num_inputs; i++) {
        tg_dtype d = inputs[i]->dtype;
        if (tg_dtype_is_floating(d) && d != low)
            return tg_error("%s: expected floating inputs of one dtype, got %s and %s (cast first, or use "
                            "autocast)",
                            fn->name, tg_dtype_name(low), tg_dtype_name(d));
    }
    tg_status status = TG_ERROR;
    tg_scope_begin(); /* owns the casts and the float32 outputs */
    tg_tensor *wide[TG_MAX_OP_INPUTS], *out[TG_MAX_OP_OUTPUTS];
    bool ok = true;
    for (int i = 0; i < fn->num_inputs && ok; i++)
        ok = (wide[i] = inputs[i]->dtype == low ? tg_cast(inputs[i], TG_FLOAT32) : inputs[i]) != NULL;
    tg_autocast_suspend(); /* the float32 copies are what this op computes on */
    ok = ok && !tg_apply_multi_args(fn, wide, args, size, out);
    tg_autocast_resume();
    for (int i = 0; i < num_outputs && ok; i++)
        ok = (out[i] = out[i]->dtype == TG_FLOAT32 ? tg_cast(out[i], low) : out[i]) != NULL;
    if (ok) {
        for (int i = 0; i < num_outputs; i++) outputs[i] = tg_scope_return(out[i]);
        status = TG_OK;
    }
    tg_scope_end();
    return status;
}

/* Under autocast: the op on its inputs cast as fn->autocast asks (to[i] >= 0: cast
 * input i to that dtype), recorded, so gradients come back in each input's dtype. */
static tg_status apply_autocast(const tg_function *fn, tg_tensor *const *inputs, const void *args, size_t size,
                                tg_tensor **outputs, int num_outputs, const int *to) {
    tg_status status = TG_ERROR;
    tg_scope_begin();
    tg_tensor *cast[TG_MAX_OP_INPUTS], *out[TG_MAX_OP_OUTPUTS];
    bool ok = true;
    for (int i = 0; i < fn->num_inputs && ok; i++)
        ok = (cast[i] = to[i] >= 0 ? tg_autocast_cast(inputs[i], (tg_dtype)to[i]) : inputs[i]) != NULL;
    tg_autocast_suspend();
    ok = ok && !tg_apply_multi_args(fn, cast, args, size, out);
    tg_autocast_resume();
    if (ok) {
        for (int i = 0; i < num_outputs; i++) outputs[i] = tg_scope_return(out[i]);
        status = TG_OK;
    }
    tg_scope_end();
    return status;
}

/* After a recorded forward: the node's edges to its inputs' producers (or leaves), the
 * metadata of inputs and outputs, saved outputs turned into graph-less aliases, and
 * the differentiable outputs pointed at the node. */
static void link_node(tg_node *node, const tg_function *fn, tg_tensor *const *inputs, tg_tensor **outputs,
                      int num_outputs) {
    for (int i = 0; i < fn->num_inputs; i++) {
        tg_tensor *in = inputs[i];
        node->input_meta[i] = meta_of(in);
        if (!in->requires_grad) continue;
        node->needs_input_grad[i] = true;
        if (in->grad_fn) {
            tg_node_retain(in->grad_fn);
            node->edges[i].node = in->grad_fn;
            node->edges[i].output_nr = in->output_nr;
        } else {
            node->edges[i].leaf = tg_retain(in);
        }
    }
    for (int i = 0; i < num_outputs; i++) {
        tg_tensor *out = outputs[i];
        node->output_meta[i] = meta_of(out);
        node->output_differentiable[i] = !node->ctx.non_differentiable[i] && tg_dtype_is_floating(out->dtype);
        /* A saved output becomes a graph-less alias (else output -> node -> output). */
        for (int s = 0; s < node->num_saved; s++) {
            if (node->saved[s].tensor != out || node->saved[s].output_index >= 0) continue;
            tg_scope_begin();
            tg_tensor *alias = tg_retain(tg_detach(out));
            tg_scope_end();
            tg_release(node->saved[s].tensor);
            node->saved[s].tensor = alias;
            node->saved[s].output_index = i;
        }
        if (!node->output_differentiable[i]) continue;
        tg_node_retain(node);
        out->grad_fn = node;
        out->output_nr = i;
        out->requires_grad = true;
    }
}

/* The op observer, and how deep inside observed forwards this thread is. */
static _Thread_local tg_op_observer observer;
static _Thread_local int observed_depth;

tg_op_observer tg_set_op_observer(tg_op_observer o) {
    tg_op_observer previous = observer;
    observer = o;
    return previous;
}

tg_status tg_apply_multi_args(const tg_function *fn, tg_tensor *const *inputs, const void *args, size_t size,
                              tg_tensor **outputs) {
    int num_outputs = fn->num_outputs > 0 ? fn->num_outputs : 1;
    TG_ASSERT(fn->num_inputs <= TG_MAX_OP_INPUTS && num_outputs <= TG_MAX_OP_OUTPUTS);
    for (int i = 0; i < num_outputs; i++) outputs[i] = NULL;
    bool any_requires_grad = false;
    int low = -1; /* an input of a low-precision dtype */
    for (int i = 0; i < fn->num_inputs; i++) {
        if (tg_unusable_(inputs[i])) return tg_error_unusable_input(fn->name, inputs[i], i);
        any_requires_grad |= inputs[i]->requires_grad;
        if (low < 0 && tg_dtype_is_low_precision_inline(inputs[i]->dtype)) low = i;
    }
    if (fn->autocast != TG_AUTOCAST_NONE && tg_autocast_active()) {
        int to[TG_MAX_OP_INPUTS], casts = 0;
        for (int i = 0; i < fn->num_inputs; i++) casts += (to[i] = tg_autocast_target(fn->autocast, inputs[i])) >= 0;
        if (casts) return apply_autocast(fn, inputs, args, size, outputs, num_outputs, to);
    }
    if (low >= 0 && fn->low_precision != TG_LOW_PRECISION_NATIVE) {
        tg_dtype d = inputs[low]->dtype;
        if (fn->low_precision == TG_LOW_PRECISION_IN_FLOAT32)
            return apply_in_float32(fn, inputs, args, size, outputs, num_outputs, d);
        return tg_error("%s: no %s kernel (input %d is %s); cast it to float32 first", fn->name, tg_dtype_name(d), low,
                        tg_dtype_name(d));
    }
    bool record = fn->backward && any_requires_grad && tg_is_grad_enabled();
    tg_node *node = record ? new_node(fn, num_outputs) : NULL;
    tg_ctx local, *ctx = node ? &node->ctx : &local;
    if (!node) local = (tg_ctx){.args = args}; /* cleared only when it is used */
    ctx->fn = fn;
    if (node && size) tg_ctx_set_attrs(ctx, args, size);

    unsigned long errors_before = tg_error_count();
    bool grad_was_enabled = tg_set_grad_enabled(false);
    bool profiling = tg_profile_enabled();
    double started = profiling ? tg_profile_clock() : 0;
    size_t bytes_before = profiling ? tg_thread_bytes_allocated() : 0;
    tg_scope_begin();
    tg_autocast_suspend(); /* ops inside a forward are not autocast (as PyTorch's dispatcher) */
    bool enclosing_failure = tg_kernel_failure() != NULL; /* an enclosing op's kernel's, for it to report */
    bool observed = observer.fn && observed_depth++ == 0;
    ctx->outputs[0] = fn->forward(ctx, inputs);
    if (observer.fn) observed_depth--;
    tg_autocast_resume();
    if (profiling)
        tg_profile_record(fn->name, tg_profile_in_backward(), tg_profile_clock() - started,
                          tg_thread_bytes_allocated() - bytes_before);
    const char *kernel_failure = enclosing_failure ? NULL : tg_kernel_failure_take(); /* a buffer not had */
    if (kernel_failure) tg_error("%s: %s", fn->name, kernel_failure);
    bool ok = !kernel_failure;
    for (int i = 0; i < num_outputs && ok; i++) {
        tg_tensor *out = ctx->outputs[i];
        ok = out != NULL;
        /* A forward may hand back an input itself (contiguous of a contiguous tensor):
         * the output must be a tensor of its own, or its graph link would be overwritten. */
        bool is_input = false;
        for (int j = 0; ok && j < fn->num_inputs; j++) is_input |= out == inputs[j];
        if (ok && node && (is_input || out->grad_fn || out->requires_grad)) ctx->outputs[i] = tg_detach(out);
    }
    if (ok)
        for (int i = 0; i < num_outputs; i++) outputs[i] = tg_scope_return(ctx->outputs[i]);
    tg_scope_end();
    tg_set_grad_enabled(grad_was_enabled);
    if (!ok) { /* everything forward made was owned by its scope and is freed */
        if (tg_error_count() == errors_before) tg_error("%s: forward returned no output", fn->name);
        tg_node_release(node);
        return TG_ERROR;
    }
    if (observed) observer.fn(observer.user, fn, inputs, args, size, outputs, num_outputs);
    if (!node) return TG_OK;
    link_node(node, fn, inputs, outputs, num_outputs);
    tg_node_release(node); /* the outputs hold it now */
    return TG_OK;
}

tg_status tg_apply_multi(const tg_function *fn, tg_tensor *const *inputs, tg_tensor **outputs) {
    return tg_apply_multi_args(fn, inputs, NULL, 0, outputs);
}

tg_tensor *tg_apply_args(const tg_function *fn, tg_tensor *const *inputs, const void *args, size_t size) {
    tg_tensor *outputs[TG_MAX_OP_OUTPUTS];
    if (tg_apply_multi_args(fn, inputs, args, size, outputs)) return NULL;
    return outputs[0];
}

tg_tensor *tg_apply(const tg_function *fn, tg_tensor *const *inputs) { return tg_apply_args(fn, inputs, NULL, 0); }
