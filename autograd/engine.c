/* The backward engine (DESIGN.md, "Autograd").
 *
 * Nodes reachable from the roots are collected with an explicit stack while
 * counting, for each node, the edges that reach it (its dependencies). A node runs
 * once all of them have delivered their gradient; among ready nodes the highest
 * sequence number runs first (the tape, reversed). Nothing recurses, so a chain of
 * 100,000 ops backpropagates in constant stack. Leaves are accumulated at the end,
 * after their hooks, each once with the sum of everything that reached it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/profile.h"
#include "core/scope.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape.h"

typedef struct {
    tg_node **items;
    long count, capacity;
} node_list;

static void node_list_push(node_list *l, tg_node *n) {
    if (l->count == l->capacity) {
        long cap = l->capacity ? 2 * l->capacity : 64;
        tg_node **items = realloc(l->items, (size_t)cap * sizeof *items);
        TG_ASSERT(items != NULL);
        l->items = items;
        l->capacity = cap;
    }
    l->items[l->count++] = n;
}

/* Max-heap on sequence_nr. */
static void heap_push(node_list *h, tg_node *n) {
    node_list_push(h, n);
    long i = h->count - 1;
    while (i > 0) {
        long parent = (i - 1) / 2;
        if (h->items[parent]->sequence_nr >= h->items[i]->sequence_nr) break;
        tg_node *tmp = h->items[parent];
        h->items[parent] = h->items[i];
        h->items[i] = tmp;
        i = parent;
    }
}

static tg_node *heap_pop(node_list *h) {
    tg_node *top = h->items[0];
    h->items[0] = h->items[--h->count];
    long i = 0;
    for (;;) {
        long l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->count && h->items[l]->sequence_nr > h->items[m]->sequence_nr) m = l;
        if (r < h->count && h->items[r]->sequence_nr > h->items[m]->sequence_nr) m = r;
        if (m == i) break;
        tg_node *tmp = h->items[m];
        h->items[m] = h->items[i];
        h->items[i] = tmp;
        i = m;
    }
    return top;
}

typedef struct {
    tg_tensor *leaf; /* borrowed (edges and the caller hold it) */
    tg_tensor *grad; /* owned sum of what reached it */
} leaf_entry;

typedef struct {
    leaf_entry *items;
    long count, capacity;
} leaf_list;

static leaf_entry *leaf_slot(leaf_list *l, tg_tensor *leaf) {
    for (long i = 0; i < l->count; i++)
        if (l->items[i].leaf == leaf) return &l->items[i];
    if (l->count == l->capacity) {
        long cap = l->capacity ? 2 * l->capacity : 16;
        leaf_entry *items = realloc(l->items, (size_t)cap * sizeof *items);
        TG_ASSERT(items != NULL);
        l->items = items;
        l->capacity = cap;
    }
    l->items[l->count] = (leaf_entry){leaf, NULL};
    return &l->items[l->count++];
}

/* *sum += g, both owned references; g is consumed. */
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
    tg_tensor_meta m = n->input_meta[i];
    char want[128], got[128], dev_a[16], dev_b[16];
    if (!tg_device_equal(tg_device_of(g), m.device))
        return tg_error("%s (#%llu): backward returned a gradient on %s for input %d, which is on %s",
                        n->fn->name, (unsigned long long)n->sequence_nr,
                        tg_device_str(tg_device_of(g), dev_a), i, tg_device_str(m.device, dev_b)),
               NULL;
    if (tg_dtype_of(g) != m.dtype && tg_dtype_is_floating(tg_dtype_of(g)) && tg_dtype_is_floating(m.dtype)) {
        /* A mixed-dtype op computed in the wider type: the gradient comes back in the
         * input's own dtype, as PyTorch's engine casts it (validate_outputs). */
        tg_tensor *cast = tg_cast(g, m.dtype); /* owned by the current scope */
        return cast ? conform(n, i, cast) : NULL;
    }
    if (tg_dtype_of(g) != m.dtype)
        return tg_error("%s (#%llu): backward returned a %s gradient for input %d of dtype %s",
                        n->fn->name, (unsigned long long)n->sequence_nr, tg_dtype_name(tg_dtype_of(g)),
                        i, tg_dtype_name(m.dtype)),
               NULL;
    if (tg_shape_equal(tg_shape_of(g), m.shape)) return tg_retain(g);
    tg_shape b;
    if (tg_broadcast_shapes(m.shape, tg_shape_of(g), &b) && tg_shape_equal(b, tg_shape_of(g)))
        return tg_retain(tg_sum_to(g, m.shape));
    return tg_error("%s (#%llu): backward returned a gradient of shape %s for input %d of shape %s",
                    n->fn->name, (unsigned long long)n->sequence_nr,
                    tg_shape_str(tg_shape_of(g), got, sizeof got), i,
                    tg_shape_str(m.shape, want, sizeof want)),
           NULL;
}

static _Thread_local uint64_t visit_epoch;

/* A fresh visit mark, shared with tg_graph_dot so their marks never collide. */
uint64_t tg_engine_next_mark(void) { return ++visit_epoch; }

typedef struct {
    tg_tensor *const *inputs; /* tg_grad_of's inputs, or NULL for tg_backward */
    int num_inputs;
    tg_tensor **grads;
} capture_spec;

static void visit(tg_node *n, uint64_t mark, node_list *stack, node_list *all) {
    if (n->visit_mark == mark) return;
    n->visit_mark = mark;
    n->dependencies = 0;
    memset(n->grad_buffer, 0, sizeof n->grad_buffer);
    node_list_push(stack, n);
    node_list_push(all, n);
}

static tg_status run_backward(tg_tensor *const *roots, tg_tensor *const *root_grads, int num_roots,
                              tg_backward_opts opts, capture_spec cap) {
    const char *op = cap.inputs ? "tg_grad_of" : "tg_backward";
    bool retain = opts.retain_graph || opts.create_graph;
    for (int r = 0; r < num_roots; r++) {
        if (!roots[r]) return tg_error_null_input(op, r);
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
    uint64_t mark = tg_engine_next_mark();
    node_list stack = {0}, all = {0}, ready = {0};
    leaf_list leaves = {0};
    tg_status status = TG_OK;
    unsigned long errors_before = tg_error_count();
    bool grad_was_enabled = tg_set_grad_enabled(opts.create_graph);

    /* Collect the graph and count dependencies. */
    for (int r = 0; r < num_roots; r++)
        if (roots[r]->grad_fn) visit(roots[r]->grad_fn, mark, &stack, &all);
    while (stack.count > 0) {
        tg_node *n = stack.items[--stack.count];
        for (int i = 0; i < n->num_inputs; i++) {
            tg_node *child = n->edges[i].node;
            if (!child) continue;
            visit(child, mark, &stack, &all);
            child->dependencies++;
        }
    }
    /* Seed the roots. */
    for (int r = 0; r < num_roots; r++) {
        tg_tensor *g = NULL;
        TG_SCOPE {
            g = root_grads && root_grads[r] ? root_grads[r] : tg_ones_like(roots[r]);
            tg_retain(g);
        }
        if (roots[r]->grad_fn)
            accumulate(&roots[r]->grad_fn->grad_buffer[roots[r]->output_nr], g);
        else
            accumulate(&leaf_slot(&leaves, roots[r])->grad, g);
    }
    for (int r = 0; r < num_roots; r++) {
        tg_node *n = roots[r]->grad_fn;
        if (n && n->dependencies == 0 && n->visit_mark == mark) {
            n->dependencies = -1; /* queued */
            heap_push(&ready, n);
        }
    }

    while (ready.count > 0 && status == TG_OK) {
        tg_node *n = heap_pop(&ready);
        bool any_grad = false;
        for (int o = 0; o < n->num_outputs; o++) {
            if (n->output_hooks[o] && n->grad_buffer[o])
                n->grad_buffer[o] = run_hooks(n->output_hooks[o], n->grad_buffer[o]);
            any_grad |= n->grad_buffer[o] != NULL;
        }
        for (int j = 0; cap.inputs && j < cap.num_inputs; j++) {
            tg_tensor *in = cap.inputs[j];
            if (in->grad_fn == n && n->grad_buffer[in->output_nr] && !cap.grads[j])
                cap.grads[j] = tg_retain(n->grad_buffer[in->output_nr]);
        }
        if (tg_error_count() != errors_before) {
            status = TG_ERROR;
            break;
        }
        tg_tensor *grad_inputs[TG_MAX_OP_INPUTS] = {0};
        if (any_grad) {
            TG_SCOPE {
                bool profiling = tg_profile_enabled();
                double started = profiling ? tg_profile_clock() : 0;
                size_t bytes_before = profiling ? tg_thread_bytes_allocated() : 0;
                tg_tensor *grad0 = tg_ctx_grad_output(&n->ctx, 0);
                bool was_in_backward = profiling && tg_profile_set_in_backward(true);
                n->fn->backward(&n->ctx, grad0, grad_inputs);
                if (profiling) tg_profile_set_in_backward(was_in_backward);
                if (profiling)
                    tg_profile_record(n->fn->name, true, tg_profile_clock() - started,
                                      tg_thread_bytes_allocated() - bytes_before);
                for (int i = 0; i < n->num_inputs; i++) {
                    if (!n->needs_input_grad[i] || !grad_inputs[i]) {
                        grad_inputs[i] = NULL;
                        continue;
                    }
                    grad_inputs[i] = conform(n, i, grad_inputs[i]);
                }
                if (tg_error_count() != errors_before) status = TG_ERROR;
                for (int i = 0; status == TG_OK && i < n->num_inputs; i++) {
                    if (grad_inputs[i] && tg_is_anomaly_enabled() && !tg_all_finite(grad_inputs[i])) {
                        char shapes[256] = "", buf[128];
                        size_t used = 0;
                        for (int k = 0; k < n->num_inputs && used < sizeof shapes; k++)
                            used += (size_t)snprintf(shapes + used, sizeof shapes - used, "%s%s", k ? ", " : "",
                                                     tg_shape_str(n->input_meta[k].shape, buf, sizeof buf));
                        tg_error("anomaly detected: backward of '%s' (#%llu, inputs %s) returned NaN or Inf "
                                 "in the gradient of input %d",
                                 n->fn->name, (unsigned long long)n->sequence_nr, shapes, i);
                        status = TG_ERROR;
                    }
                }
            }
        }
        for (int o = 0; o < n->num_outputs; o++) {
            tg_release(n->grad_buffer[o]);
            n->grad_buffer[o] = NULL;
        }
        if (!retain && !n->saved_freed) {
            for (int s = 0; s < n->num_saved; s++) tg_release(n->saved[s].tensor);
            n->num_saved = 0;
            n->saved_freed = true;
        }
        for (int i = 0; i < n->num_inputs; i++) {
            tg_edge *e = &n->edges[i];
            if (status != TG_OK) {
                tg_release(grad_inputs[i]);
                continue;
            }
            if (e->node) {
                if (grad_inputs[i]) accumulate(&e->node->grad_buffer[e->output_nr], grad_inputs[i]);
                if (--e->node->dependencies == 0) {
                    e->node->dependencies = -1;
                    heap_push(&ready, e->node);
                }
            } else if (e->leaf && grad_inputs[i]) {
                accumulate(&leaf_slot(&leaves, e->leaf)->grad, grad_inputs[i]);
            } else {
                tg_release(grad_inputs[i]);
            }
        }
    }

    /* Leaves: hooks, then capture or accumulate into .grad. */
    for (long k = 0; k < leaves.count; k++) {
        leaf_entry *e = &leaves.items[k];
        tg_tensor *g = status == TG_OK ? run_hooks(e->leaf->hooks ? e->leaf->hooks->first : NULL, e->grad)
                                       : (tg_release(e->grad), NULL);
        e->grad = NULL;
        if (!g) continue;
        if (cap.inputs) {
            for (int j = 0; j < cap.num_inputs; j++)
                if (cap.inputs[j] == e->leaf && !cap.grads[j]) cap.grads[j] = tg_retain(g);
            tg_release(g);
            continue;
        }
        tg_tensor *leaf = e->leaf;
        if (!leaf->grad) {
            /* Keep g when nobody else holds it; else copy, so that accumulating in place
             * later never writes into a tensor that is also someone else's. */
            if (g->refcount == 1 && !opts.create_graph && !g->grad_fn) {
                leaf->grad = g;
            } else if (opts.create_graph) {
                leaf->grad = g;
            } else {
                TG_SCOPE { leaf->grad = tg_retain(tg_clone(g)); }
                tg_release(g);
            }
        } else if (opts.create_graph || leaf->grad->grad_fn) {
            accumulate(&leaf->grad, g);
        } else {
            tg_add_(leaf->grad, g);
            tg_release(g);
        }
    }
    if (tg_error_count() != errors_before) status = TG_ERROR;

    /* On failure, drop whatever gradients are still buffered. */
    for (long k = 0; k < all.count; k++)
        for (int o = 0; o < all.items[k]->num_outputs; o++) {
            tg_release(all.items[k]->grad_buffer[o]);
            all.items[k]->grad_buffer[o] = NULL;
        }
    for (long k = 0; k < leaves.count; k++) tg_release(leaves.items[k].grad);
    if (status != TG_OK && cap.inputs)
        for (int j = 0; j < cap.num_inputs; j++) tg_release(cap.grads[j]), cap.grads[j] = NULL;
    free(stack.items);
    free(all.items);
    free(ready.items);
    free(leaves.items);
    tg_set_grad_enabled(grad_was_enabled);
    return status;
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
        if (!inputs[j]) return tg_error_null_input("tg_grad_of", j);
        if (!inputs[j]->requires_grad)
            return tg_error("tg_grad_of: input %d does not require grad", j);
    }
    tg_status status = run_backward(outputs, grad_outputs, num_outputs, opts,
                                    (capture_spec){inputs, num_inputs, grads});
    /* The grads are new references of the caller's scope. */
    for (int j = 0; status == TG_OK && j < num_inputs; j++) {
        if (!grads[j]) continue;
        tg_scope_track(grads[j]);
    }
    return status;
}

/* ---- per-tensor gradient state ---- */

tg_tensor *tg_requires_grad(tg_tensor *t, bool on) {
    if (!t) return tg_error_null_input("tg_requires_grad", 0), NULL;
    if (t->grad_fn && !on)
        return tg_error("tg_requires_grad: cannot turn off requires_grad on a non-leaf tensor (made "
                        "by '%s'); use tg_detach",
                        t->grad_fn->fn->name), NULL;
    if (on && !tg_dtype_is_floating(t->dtype))
        return tg_error("tg_requires_grad: only floating-point tensors can require grad, not %s",
                        tg_dtype_name(t->dtype)), NULL;
    t->requires_grad = on || t->grad_fn;
    return t;
}

bool tg_get_requires_grad(const tg_tensor *t) { return t && t->requires_grad; }
bool tg_is_leaf(const tg_tensor *t) { return !t->grad_fn; }
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

tg_status tg_register_hook(tg_tensor *t, tg_grad_hook hook, void *user) {
    if (!t) return tg_error_null_input("tg_register_hook", 0);
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
        if (!t->hooks) {
            t->hooks = calloc(1, sizeof *t->hooks);
            TG_ASSERT(t->hooks != NULL);
        }
        head = &t->hooks->first;
    }
    while (*head) head = &(*head)->next;
    *head = e;
    tg_autograd_install();
    return TG_OK;
}
