/* The backward engine (docs/design.md, "Gradients and in-place writes").
 *
 * One call is one graph task (PyTorch's GraphTask): everything a backward needs to
 * remember (which nodes it reaches, how many edges each still waits for, the
 * gradients summed so far) lives in the task, never on the shared nodes, so a graph
 * kept with retain_graph can be run again on any thread, and a backward started
 * inside another (a hook, a custom op's backward) has its own state. Its steps:
 *
 *   collect   nodes reachable from the roots, with an explicit stack, counting for
 *             each the edges that reach it (its dependencies);
 *   seed      the roots' gradients (ones for a single-element output);
 *   execute   a node runs once all its dependencies have delivered; among ready
 *             nodes the highest sequence number runs first (the tape, reversed);
 *   leaves    each leaf once, with the sum of what reached it: hooks, then .grad
 *             under the aliasing rule (accumulate_grad), then the post-accumulate
 *             hooks. A leaf is finished as soon as the last edge into it has
 *             delivered (PyTorch's AccumulateGrad node), not at the end, so that
 *             data-parallel training can start sending a gradient while the rest
 *             of the backward runs (distributed/ddp.c).
 *
 * Nothing recurses, so a chain of 100,000 ops backpropagates in constant stack. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autocast_impl.h"
#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/node_map.h"
#include "autograd/profile.h"
#include "core/parallel.h"
#include "core/scope.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "core/tensor_impl.h"

typedef struct {
    tg_node *node;
    int dependencies;                    /* edges still to deliver; -1 once queued */
    tg_tensor *grads[TG_MAX_OP_OUTPUTS]; /* owned sums of the gradients that reached it */
} node_state;

typedef struct {
    tg_tensor *leaf; /* borrowed (edges and the caller hold it) */
    tg_tensor *grad; /* owned sum of what reached it */
    long pending;    /* edges into the leaf still to deliver (counted by collect) */
    bool finished;
} leaf_entry;

typedef struct {
    tg_tensor *const *inputs; /* tg_grad_of's inputs, or NULL for tg_backward */
    int num_inputs;
    tg_tensor **grads;
} capture_spec;

typedef struct {
    const char *op; /* "tg_backward" or "tg_grad_of", for messages */
    tg_backward_opts opts;
    bool retain;
    capture_spec cap;
    tg_node_map index; /* node -> its entry in states, for nodes an outer task claimed */
    node_state *states;
    long num_states, states_capacity;
    long *ready; /* max-heap of state indices on sequence_nr */
    long num_ready, ready_capacity;
    leaf_entry *leaves;
    long num_leaves, leaves_capacity;
    tg_node **claimed; /* nodes whose backward_owner this task set */
    long num_claimed, claimed_capacity;
    unsigned long errors_before;
    tg_status status;
} graph_task;

#define GROW(array, count, capacity, initial)                                \
    do {                                                                     \
        if ((count) == (capacity)) {                                         \
            long cap_ = (capacity) ? 2 * (capacity) : (initial);             \
            void *items_ = realloc((array), (size_t)cap_ * sizeof *(array)); \
            TG_ASSERT(items_ != NULL);                                       \
            (array) = items_;                                                \
            (capacity) = cap_;                                               \
        }                                                                    \
    } while (0)

/* A token per thread: its address says which thread owns a node. */
static _Thread_local char this_thread;

/* ---- the ready heap ---- */

static uint64_t seq_of(const graph_task *t, long i) { return t->states[t->ready[i]].node->sequence_nr; }

static void heap_swap(graph_task *t, long a, long b) {
    long tmp = t->ready[a];
    t->ready[a] = t->ready[b];
    t->ready[b] = tmp;
}

static void make_ready(graph_task *t, long state) {
    t->states[state].dependencies = -1;
    GROW(t->ready, t->num_ready, t->ready_capacity, 64);
    long i = t->num_ready++;
    t->ready[i] = state;
    while (i > 0 && seq_of(t, (i - 1) / 2) < seq_of(t, i)) {
        heap_swap(t, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static long pop_ready(graph_task *t) {
    long top = t->ready[0];
    t->ready[0] = t->ready[--t->num_ready];
    for (long i = 0;;) {
        long l = 2 * i + 1, r = l + 1, m = i;
        if (l < t->num_ready && seq_of(t, l) > seq_of(t, m)) m = l;
        if (r < t->num_ready && seq_of(t, r) > seq_of(t, m)) m = r;
        if (m == i) break;
        heap_swap(t, i, m);
        i = m;
    }
    return top;
}

/* ---- gradient sums ---- */

/* *sum += g, both owned references; g is consumed. Out of place: g may be shared. */
static void accumulate(tg_tensor **sum, tg_tensor *g) {
    if (!*sum) {
        *sum = g;
        return;
    }
    tg_tensor *total = NULL;
    TG_SCOPE { total = tg_retain(tg_add(*sum, g)); }
    tg_release(*sum);
    tg_release(g);
    *sum = total;
}

static leaf_entry *leaf_slot(graph_task *t, tg_tensor *leaf) {
    for (long i = 0; i < t->num_leaves; i++)
        if (t->leaves[i].leaf == leaf) return &t->leaves[i];
    GROW(t->leaves, t->num_leaves, t->leaves_capacity, 16);
    t->leaves[t->num_leaves] = (leaf_entry){leaf, NULL, 0, false};
    return &t->leaves[t->num_leaves++];
}

static tg_tensor *run_hooks(tg_hook_entry *h, tg_tensor *grad) {
    for (; h && grad; h = h->next) {
        tg_tensor *replaced = NULL;
        TG_SCOPE { replaced = tg_retain(h->fn(grad, h->user)); }
        if (!replaced) {
            tg_release(grad);
            return NULL;
        }
        tg_release(grad);
        grad = replaced;
    }
    return grad;
}

/* Checks g against the input's recorded metadata, summing a broadcast gradient back
 * to the input's shape. Returns an owned reference, or NULL + error. */
static tg_tensor *conform(tg_node *n, int i, tg_tensor *g) {
    const tg_tensor_meta *m = &n->input_meta[i];
    /* The common case, checked inline (the accessors' calls and shape copies showed in
     * the per-op profile). */
    bool same = g->dtype == m->dtype && g->storage->device.kind == m->device.kind &&
                g->storage->device.index == m->device.index && g->shape.ndim == m->shape.ndim;
    for (int d = 0; same && d < m->shape.ndim; d++) same = g->shape.dims[d] == m->shape.dims[d];
    if (same) return tg_retain(g);
    char want[128], got[128], dev_a[16], dev_b[16];
    if (!tg_device_equal(tg_device_of(g), m->device))
        return tg_error("%s (#%llu): backward returned a gradient on %s for input %d, which is on %s", n->fn->name,
                        (unsigned long long)n->sequence_nr, tg_device_str(tg_device_of(g), dev_a), i,
                        tg_device_str(m->device, dev_b)),
               NULL;
    if (tg_dtype_of(g) != m->dtype && tg_dtype_is_floating(tg_dtype_of(g)) && tg_dtype_is_floating(m->dtype)) {
        /* A mixed-dtype op computed in the wider type: the gradient comes back in the
         * input's own dtype, as PyTorch's engine casts it (validate_outputs). */
        tg_tensor *cast = tg_cast(g, m->dtype); /* owned by the current scope */
        return cast ? conform(n, i, cast) : NULL;
    }
    if (tg_dtype_of(g) != m->dtype)
        return tg_error("%s (#%llu): backward returned a %s gradient for input %d of dtype %s", n->fn->name,
                        (unsigned long long)n->sequence_nr, tg_dtype_name(tg_dtype_of(g)), i, tg_dtype_name(m->dtype)),
               NULL;
    tg_shape b;
    if (tg_broadcast_shapes(m->shape, tg_shape_of(g), &b) && tg_shape_equal(b, tg_shape_of(g)))
        return tg_retain(tg_sum_to(g, m->shape));
    return tg_error("%s (#%llu): backward returned a gradient of shape %s for input %d of shape %s", n->fn->name,
                    (unsigned long long)n->sequence_nr, tg_shape_str(tg_shape_of(g), got, sizeof got), i,
                    tg_shape_str(m->shape, want, sizeof want)),
           NULL;
}

/* ---- collect ---- */

/* The index of n's state in this task, or -1 when it has none yet. */
static long find_state(const graph_task *t, const tg_node *n) {
    if (atomic_load_explicit(&n->backward_owner, memory_order_relaxed) == &this_thread && n->backward_task == t)
        return n->backward_slot;
    return tg_node_map_get(&t->index, n); /* nodes that a task outside this one claimed */
}

/* The state of n, added (and n claimed for this thread) on first sight; -1 + error
 * when a backward on another thread holds n. */
static long state_of(graph_task *t, tg_node *n, bool *added) {
    long i = find_state(t, n);
    *added = i < 0;
    if (i >= 0) return i;
    GROW(t->states, t->num_states, t->states_capacity, 64);
    i = t->num_states;
    const void *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(&n->backward_owner, &expected, (const void *)&this_thread,
                                                memory_order_acquire, memory_order_relaxed)) {
        GROW(t->claimed, t->num_claimed, t->claimed_capacity, 64);
        t->claimed[t->num_claimed++] = n;
        n->backward_task = t;
        n->backward_slot = i;
    } else if (expected == &this_thread) { /* a backward inside a backward shares nodes */
        tg_node_map_add(&t->index, n, i);
    } else {
        tg_error("%s: node '%s' (#%llu) is in a backward running on another thread; a graph belongs to "
                 "one thread at a time (docs/reliability.md)",
                 t->op, n->fn->name, (unsigned long long)n->sequence_nr);
        return -1;
    }
    node_state *st = &t->states[t->num_states++];
    st->node = n;
    st->dependencies = 0;
    for (int o = 0; o < TG_MAX_OP_OUTPUTS; o++) st->grads[o] = NULL;
    return i;
}

static tg_status collect(graph_task *t, tg_tensor *const *roots, int num_roots) {
    long *stack = NULL, depth = 0, capacity = 0;
    bool added;
    for (int r = 0; r < num_roots; r++) {
        if (!roots[r]->grad_fn) continue;
        long s = state_of(t, roots[r]->grad_fn, &added);
        if (s < 0) break;
        if (added) {
            GROW(stack, depth, capacity, 64);
            stack[depth++] = s;
        }
    }
    while (depth > 0 && tg_error_count() == t->errors_before) {
        tg_node *n = t->states[stack[--depth]].node;
        for (int i = 0; i < n->num_inputs; i++) {
            tg_node *child = n->edges[i].node;
            if (!child) {
                if (n->edges[i].leaf) leaf_slot(t, n->edges[i].leaf)->pending++;
                continue;
            }
            long s = state_of(t, child, &added);
            if (s < 0) break;
            t->states[s].dependencies++;
            if (added) {
                GROW(stack, depth, capacity, 64);
                stack[depth++] = s;
            }
        }
    }
    free(stack);
    return tg_error_count() == t->errors_before ? TG_OK : TG_ERROR;
}

/* ---- seed ---- */

static void seed(graph_task *t, tg_tensor *const *roots, tg_tensor *const *root_grads, int num_roots) {
    for (int r = 0; r < num_roots; r++) {
        tg_tensor *g = NULL;
        TG_SCOPE {
            g = root_grads && root_grads[r] ? root_grads[r] : tg_ones_like(roots[r]);
            tg_retain(g);
        }
        if (roots[r]->grad_fn) accumulate(&t->states[find_state(t, roots[r]->grad_fn)].grads[roots[r]->output_nr], g);
        else accumulate(&leaf_slot(t, roots[r])->grad, g);
    }
    for (int r = 0; r < num_roots; r++) {
        if (!roots[r]->grad_fn) continue;
        long s = find_state(t, roots[r]->grad_fn);
        if (t->states[s].dependencies == 0) make_ready(t, s);
    }
}

/* ---- leaves ---- */

/* Only this tensor struct, held once, sees its storage. */
static bool owned_alone(const tg_tensor *g) { return g->refcount == 1 && g->storage->refcount == 1; }

/* PyTorch's gradient layout contract: a dense leaf's gradient has the leaf's strides
 * (size-1 dims aside); any other leaf's gradient is contiguous. */
static bool obeys_layout(const tg_tensor *g, const tg_tensor *leaf) {
    if (!tg_is_non_overlapping_and_dense(leaf)) return tg_is_contiguous(g);
    for (int d = 0; d < leaf->shape.ndim; d++)
        if (leaf->shape.dims[d] != 1 && g->strides[d] != leaf->strides[d]) return false;
    return true;
}

/* The aliasing rule (docs/design.md, "Gradients and in-place writes"): .grad adopts
 * g without a copy only when nothing else can see g's storage and g has the leaf's
 * layout; later gradients are added in place only into storage .grad alone owns.
 * With create_graph every step is recorded, out of place. g is consumed. */
static void accumulate_grad(tg_tensor *leaf, tg_tensor *g, bool create_graph) {
    if (!leaf->grad) {
        if (!create_graph && !g->grad_fn && owned_alone(g) && obeys_layout(g, leaf)) {
            leaf->grad = g;
            return;
        }
        TG_SCOPE {
            tg_tensor *copy = create_graph ? tg_clone(g) : tg_empty_strided_like(leaf);
            if (copy && (create_graph || !tg_copy_values_(copy, g))) leaf->grad = tg_retain(copy);
        }
        tg_release(g);
    } else if (!create_graph && !leaf->grad->grad_fn && leaf->grad->storage->refcount == 1 &&
               tg_is_non_overlapping_and_dense(leaf->grad)) {
        tg_add_(leaf->grad, g);
        tg_release(g);
    } else {
        accumulate(&leaf->grad, g);
    }
}

static void run_post_accumulate_hooks(tg_tensor *leaf) {
    for (tg_post_hook_entry *h = leaf->hooks ? leaf->hooks->post_first : NULL; h; h = h->next) TG_SCOPE {
            h->fn(leaf, h->user);
        }
}

/* Hooks, .grad (or the captured gradient of tg_grad_of), post-accumulate hooks. */
static void finish_leaf(graph_task *t, leaf_entry *e) {
    tg_tensor *g = e->grad;
    e->grad = NULL;
    e->finished = true;
    if (t->status != TG_OK) {
        tg_release(g);
        return;
    }
    g = run_hooks(e->leaf->hooks ? e->leaf->hooks->first : NULL, g);
    if (g && !t->cap.inputs) {
        accumulate_grad(e->leaf, g, t->opts.create_graph);
        run_post_accumulate_hooks(e->leaf);
    } else if (g) {
        for (int j = 0; j < t->cap.num_inputs; j++)
            if (t->cap.inputs[j] == e->leaf && !t->cap.grads[j]) t->cap.grads[j] = tg_retain(g);
        tg_release(g);
    }
    if (tg_error_count() != t->errors_before) t->status = TG_ERROR;
}

/* The leaves no edge reaches (a leaf root) or whose edges did not all deliver. */
static void finish_leaves(graph_task *t) {
    for (long k = 0; k < t->num_leaves; k++)
        if (!t->leaves[k].finished) finish_leaf(t, &t->leaves[k]);
}

/* ---- execute ---- */

static void check_finite(graph_task *t, tg_node *n, tg_tensor **grad_inputs) {
    for (int i = 0; t->status == TG_OK && i < n->num_inputs; i++) {
        if (!grad_inputs[i] || tg_all_finite(grad_inputs[i])) continue;
        char shapes[256] = "", buf[128];
        size_t used = 0;
        for (int k = 0; k < n->num_inputs && used < sizeof shapes; k++)
            used += (size_t)snprintf(shapes + used, sizeof shapes - used, "%s%s", k ? ", " : "",
                                     tg_shape_str(n->input_meta[k].shape, buf, sizeof buf));
        tg_error("anomaly detected: backward of '%s' (#%llu, inputs %s) returned NaN or Inf in the gradient "
                 "of input %d",
                 n->fn->name, (unsigned long long)n->sequence_nr, shapes, i);
        t->status = TG_ERROR;
    }
}

/* Runs n's backward on the gradients in its state; grad_inputs receives owned
 * gradients, conformed to each input's shape and dtype. */
static void call_backward(graph_task *t, node_state *st, tg_tensor **grad_inputs) {
    tg_node *n = st->node;
    TG_SCOPE {
        bool profiling = tg_profile_enabled();
        double started = profiling ? tg_profile_clock() : 0;
        size_t bytes_before = profiling ? tg_thread_bytes_allocated() : 0;
        tg_backward_frame outer = tg_current_backward_frame;
        tg_current_backward_frame = (tg_backward_frame){n, st->grads, t->cap.inputs != NULL};
        tg_tensor *grad0 = tg_ctx_grad_output(&n->ctx, 0);
        bool was_in_backward = profiling && tg_profile_set_in_backward(true);
        tg_autocast_suspend();                                /* backward formulas run in the dtypes forward saw */
        bool enclosing_failure = tg_kernel_failure() != NULL; /* an enclosing op's kernel's */
        n->fn->backward(&n->ctx, grad0, grad_inputs);
        tg_autocast_resume();
        const char *kernel_failure = enclosing_failure ? NULL : tg_kernel_failure_take(); /* a buffer not had */
        if (kernel_failure) tg_error("%s backward: %s", n->fn->name, kernel_failure);
        if (profiling) tg_profile_set_in_backward(was_in_backward);
        tg_current_backward_frame = outer;
        if (profiling)
            tg_profile_record(n->fn->name, true, tg_profile_clock() - started,
                              tg_thread_bytes_allocated() - bytes_before);
        for (int i = 0; i < n->num_inputs; i++)
            grad_inputs[i] = n->needs_input_grad[i] && grad_inputs[i] ? conform(n, i, grad_inputs[i]) : NULL;
        if (tg_error_count() != t->errors_before) t->status = TG_ERROR;
        if (tg_is_anomaly_enabled()) check_finite(t, n, grad_inputs);
    }
}

/* Hands each input's gradient to its producer's state (or its leaf) and queues
 * producers that have now heard from every consumer. */
static void deliver(graph_task *t, tg_node *n, tg_tensor **grad_inputs) {
    for (int i = 0; i < n->num_inputs; i++) {
        tg_edge *e = &n->edges[i];
        if (t->status != TG_OK) {
            tg_release(grad_inputs[i]);
        } else if (e->node) {
            long s = find_state(t, e->node);
            if (grad_inputs[i]) accumulate(&t->states[s].grads[e->output_nr], grad_inputs[i]);
            if (--t->states[s].dependencies == 0) make_ready(t, s);
        } else if (e->leaf) {
            leaf_entry *entry = leaf_slot(t, e->leaf);
            if (grad_inputs[i]) accumulate(&entry->grad, grad_inputs[i]);
            if (--entry->pending == 0) finish_leaf(t, entry);
        } else {
            tg_release(grad_inputs[i]);
        }
    }
}

static void capture_node_grads(graph_task *t, node_state *st) {
    for (int j = 0; t->cap.inputs && j < t->cap.num_inputs; j++) {
        tg_tensor *in = t->cap.inputs[j];
        if (in->grad_fn == st->node && st->grads[in->output_nr] && !t->cap.grads[j])
            t->cap.grads[j] = tg_retain(st->grads[in->output_nr]);
    }
}

/* A tensor that retains its gradient (tg_retain_grad): the summed gradient that
 * reached it, after its hooks, as PyTorch's retains_grad hook (which runs last):
 * a copy the first time, then .grad + g (recorded under create_graph). */
static void retain_grad_into(tg_tensor *t, tg_tensor *g) {
    tg_tensor *next = NULL;
    TG_SCOPE { next = tg_retain(t->grad ? tg_add(t->grad, g) : tg_clone(g)); }
    if (!next) return;
    tg_release(t->grad);
    t->grad = next;
}

static void execute(graph_task *t) {
    while (t->num_ready > 0 && t->status == TG_OK) {
        node_state *st = &t->states[pop_ready(t)];
        tg_node *n = st->node;
        bool any_grad = false;
        for (int o = 0; o < n->num_outputs; o++) {
            if (n->output_hooks[o] && st->grads[o]) st->grads[o] = run_hooks(n->output_hooks[o], st->grads[o]);
            if (n->retains_grad[o] && st->grads[o] && !t->cap.inputs)
                retain_grad_into(n->retains_grad[o], st->grads[o]);
            any_grad |= st->grads[o] != NULL;
        }
        capture_node_grads(t, st);
        if (tg_error_count() != t->errors_before) {
            t->status = TG_ERROR;
            break;
        }
        tg_tensor *grad_inputs[TG_MAX_OP_INPUTS] = {0};
        if (any_grad) call_backward(t, st, grad_inputs);
        for (int o = 0; o < n->num_outputs; o++) {
            tg_release(st->grads[o]);
            st->grads[o] = NULL;
        }
        if (!t->retain && !n->saved_freed) {
            for (int s = 0; s < n->num_saved; s++) tg_release(n->saved[s].tensor);
            n->num_saved = 0;
            n->saved_freed = true;
        }
        deliver(t, n, grad_inputs);
    }
}

/* ---- the task ---- */

static tg_status check_roots(const char *op, tg_tensor *const *roots, tg_tensor *const *root_grads, int num_roots) {
    for (int r = 0; r < num_roots; r++) {
        if (tg_unusable_(roots[r])) return tg_error_unusable_input(op, roots[r], r);
        if (!roots[r]->requires_grad)
            return tg_error("%s: output %d does not require grad and has no graph (did it come from "
                            "a no-grad block, or from inputs that do not require grad?)",
                            op, r);
        tg_tensor *g = root_grads ? root_grads[r] : NULL;
        char a[128], b[128];
        if (!g && tg_numel(roots[r]) != 1)
            return tg_error("%s: a gradient can be implied only for single-element outputs; output %d "
                            "has shape %s, pass its gradient",
                            op, r, tg_shape_str(roots[r]->shape, a, sizeof a));
        if (g && (!tg_shape_equal(g->shape, roots[r]->shape) || g->dtype != roots[r]->dtype ||
                  !tg_device_equal(g->storage->device, roots[r]->storage->device)))
            return tg_error("%s: gradient of shape %s (%s) given for output %d of shape %s (%s)", op,
                            tg_shape_str(g->shape, a, sizeof a), tg_dtype_name(g->dtype), r,
                            tg_shape_str(roots[r]->shape, b, sizeof b), tg_dtype_name(roots[r]->dtype));
    }
    return TG_OK;
}

static void free_task(graph_task *t) {
    if (t->status != TG_OK) /* on success every node ran and dropped its gradients */
        for (long k = 0; k < t->num_states; k++)
            for (int o = 0; o < TG_MAX_OP_OUTPUTS; o++) tg_release(t->states[k].grads[o]);
    for (long k = 0; k < t->num_leaves; k++) tg_release(t->leaves[k].grad);
    for (long k = 0; k < t->num_claimed; k++) {
        t->claimed[k]->backward_task = NULL;
        atomic_store_explicit(&t->claimed[k]->backward_owner, NULL, memory_order_release);
    }
    tg_node_map_free(&t->index);
    free(t->states);
    free(t->ready);
    free(t->leaves);
    free(t->claimed);
}

static tg_status run_backward(tg_tensor *const *roots, tg_tensor *const *root_grads, int num_roots,
                              tg_backward_opts opts, capture_spec cap) {
    const char *op = cap.inputs ? "tg_grad_of" : "tg_backward";
    if (check_roots(op, roots, root_grads, num_roots)) return TG_ERROR;
    graph_task t = {.op = op,
                    .opts = opts,
                    .retain = opts.retain_graph || opts.create_graph,
                    .cap = cap,
                    .errors_before = tg_error_count()};
    double start = tg_profile_enabled() ? tg_profile_clock() : 0;
    bool grad_was_enabled = tg_set_grad_enabled(opts.create_graph);
    t.status = collect(&t, roots, num_roots);
    if (t.status == TG_OK) {
        seed(&t, roots, root_grads, num_roots);
        execute(&t);
        finish_leaves(&t);
    }
    if (t.status != TG_OK && cap.inputs)
        for (int j = 0; j < cap.num_inputs; j++) tg_release(cap.grads[j]), cap.grads[j] = NULL;
    free_task(&t);
    tg_set_grad_enabled(grad_was_enabled);
    /* The whole walk (every backward formula plus the engine's own work) as one row. */
    if (start) tg_profile_record(op, true, tg_profile_clock() - start, 0);
    return t.status;
}

tg_status tg_backward_opts_run(tg_tensor *t, tg_backward_opts opts) {
    tg_tensor *grads[1] = {opts.gradient};
    return run_backward(&t, grads, 1, opts, (capture_spec){0});
}

tg_status tg_backward(tg_tensor *t) { return tg_backward_opts_run(t, (tg_backward_opts){0}); }

tg_status tg_grad_of(tg_tensor *const *outputs, tg_tensor *const *grad_outputs, int num_outputs,
                     tg_tensor *const *inputs, int num_inputs, tg_tensor **grads, tg_backward_opts opts) {
    for (int j = 0; j < num_inputs; j++) grads[j] = NULL;
    for (int j = 0; j < num_inputs; j++) {
        if (tg_unusable_(inputs[j])) return tg_error_unusable_input("tg_grad_of", inputs[j], j);
        if (!inputs[j]->requires_grad) return tg_error("tg_grad_of: input %d does not require grad", j);
    }
    tg_status status =
        run_backward(outputs, grad_outputs, num_outputs, opts, (capture_spec){inputs, num_inputs, grads});
    /* The grads are new references of the caller's scope. */
    for (int j = 0; status == TG_OK && j < num_inputs; j++) {
        if (!grads[j]) continue;
        tg_scope_track(grads[j]);
    }
    return status;
}

/* ---- per-tensor gradient state ---- */

tg_tensor *tg_requires_grad_(tg_tensor *t, bool on) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_requires_grad_", t, 0), NULL;
    if (t->grad_fn && !on)
        return tg_error("tg_requires_grad_: cannot turn off requires_grad on a non-leaf tensor (made "
                        "by '%s'); use tg_detach",
                        t->grad_fn->fn->name),
               NULL;
    if (on && !tg_dtype_is_floating(t->dtype))
        return tg_error("tg_requires_grad_: only floating-point tensors can require grad, not %s",
                        tg_dtype_name(t->dtype)),
               NULL;
    t->requires_grad = on || t->grad_fn;
    return t;
}

bool tg_requires_grad(const tg_tensor *t) { return t && t->requires_grad; }
bool tg_is_leaf(const tg_tensor *t) { return !t->grad_fn; }

tg_status tg_retain_grad(tg_tensor *t) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_retain_grad", t, 0);
    if (!t->requires_grad)
        return tg_error("tg_retain_grad: cannot retain the gradient of a tensor that does not require grad");
    if (t->grad_fn) t->grad_fn->retains_grad[t->output_nr] = t; /* a leaf keeps its .grad anyway */
    return TG_OK;
}

bool tg_retains_grad(const tg_tensor *t) { return t && t->grad_fn && t->grad_fn->retains_grad[t->output_nr] == t; }
tg_tensor *tg_grad(const tg_tensor *t) { return t ? t->grad : NULL; }
const char *tg_grad_fn_name(const tg_tensor *t) { return t->grad_fn ? t->grad_fn->fn->name : NULL; }

void tg_set_grad(tg_tensor *t, tg_tensor *grad) {
    tg_retain(grad);
    tg_release(t->grad);
    t->grad = grad;
}

void tg_zero_grad(tg_tensor *t) {
    if (!t) return;
    tg_release(t->grad);
    t->grad = NULL;
}

extern void tg_autograd_install(void);

static struct tg_hook_list *hook_list_of(tg_tensor *t) {
    if (!t->hooks) {
        t->hooks = calloc(1, sizeof *t->hooks);
        TG_ASSERT(t->hooks != NULL);
    }
    return t->hooks;
}

tg_status tg_register_hook(tg_tensor *t, tg_grad_hook hook, void *user) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_register_hook", t, 0);
    if (!t->requires_grad)
        return tg_error("tg_register_hook: cannot register a hook on a tensor that does not require grad");
    tg_hook_entry *e = calloc(1, sizeof *e);
    TG_ASSERT(e != NULL);
    e->fn = hook;
    e->user = user;
    tg_hook_entry **head;
    if (t->grad_fn) {
        head = &t->grad_fn->output_hooks[t->output_nr];
    } else {
        head = &hook_list_of(t)->first;
    }
    while (*head) head = &(*head)->next;
    *head = e;
    tg_autograd_install();
    return TG_OK;
}

tg_status tg_register_post_accumulate_grad_hook(tg_tensor *leaf, tg_post_accumulate_hook hook, void *user) {
    const char *op = "tg_register_post_accumulate_grad_hook";
    if (tg_unusable_(leaf)) return tg_error_unusable_input(op, leaf, 0);
    if (!hook) return tg_error("%s: the hook is NULL", op);
    if (leaf->grad_fn)
        return tg_error("%s: post-accumulate-grad hooks can only be registered on leaf tensors, not on the "
                        "output of '%s'",
                        op, leaf->grad_fn->fn->name);
    if (!leaf->requires_grad) return tg_error("%s: cannot register a hook on a tensor that does not require grad", op);
    tg_post_hook_entry *e = calloc(1, sizeof *e);
    TG_ASSERT(e != NULL);
    e->fn = hook;
    e->user = user;
    tg_post_hook_entry **head = &hook_list_of(leaf)->post_first;
    while (*head) head = &(*head)->next;
    *head = e;
    tg_autograd_install();
    return TG_OK;
}

bool tg_remove_post_accumulate_grad_hook(tg_tensor *leaf, tg_post_accumulate_hook hook, void *user) {
    if (!leaf || !leaf->hooks) return false;
    for (tg_post_hook_entry **at = &leaf->hooks->post_first; *at; at = &(*at)->next) {
        if ((*at)->fn == hook && (*at)->user == user) {
            tg_post_hook_entry *gone = *at;
            *at = gone->next;
            free(gone);
            return true;
        }
    }
    return false;
}
