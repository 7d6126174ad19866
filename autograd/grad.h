/* The gradient side of a tensor: requires_grad, .grad, hooks, backward. */
#ifndef TG_AUTOGRAD_GRAD_H
#define TG_AUTOGRAD_GRAD_H

#include <stdbool.h>
#include <stdio.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.Tensor.requires_grad_: marks a leaf as requiring grad (or not). Fails on
 * non-leaf tensors being turned off and on non-floating dtypes. Returns t (no new
 * reference). */
tg_tensor *tg_requires_grad_(tg_tensor *t, bool on);
/* torch.Tensor.requires_grad: true for a leaf marked by tg_requires_grad_ and for the
 * result of a recorded op. */
bool tg_requires_grad(const tg_tensor *t);
/* Deprecated (issue 36), removed in the next release: the getter's old name. (The
 * setter, tg_requires_grad(t, on) before, is tg_requires_grad_; an old call of it no
 * longer compiles: too many arguments.) */
__attribute__((deprecated("use tg_requires_grad"))) static inline bool tg_get_requires_grad(const tg_tensor *t) {
    return tg_requires_grad(t);
}
/* True for tensors not produced by a recorded op. */
bool tg_is_leaf(const tg_tensor *t);
/* The accumulated gradient of a leaf (or of a tensor that retains it), or NULL.
 * Borrowed. */
tg_tensor *tg_grad(const tg_tensor *t);
/* torch.Tensor.retain_grad: a non-leaf t gets a .grad in each tg_backward that
 * reaches it (the gradient flowing into t, after its hooks; summed over backward
 * calls, as a leaf's). A no-op on a leaf; an error on a tensor that does not require
 * grad. The mark belongs to this tensor struct (not to views or aliases of it) and
 * follows it through recorded in-place writes; tg_grad_of leaves .grad alone. */
tg_status tg_retain_grad(tg_tensor *t);
/* torch.Tensor.retains_grad: true for a non-leaf marked by tg_retain_grad. */
bool tg_retains_grad(const tg_tensor *t);
/* Replaces t's gradient (NULL clears it); takes a new reference to grad. */
void tg_set_grad(tg_tensor *t, tg_tensor *grad);
/* Drops the gradient (PyTorch's zero_grad(set_to_none=True) default since 2.0). */
void tg_zero_grad(tg_tensor *t);
/* Name of the op that made t ("mul"), or NULL for leaves. */
const char *tg_grad_fn_name(const tg_tensor *t);

/* A hook gets the gradient flowing into t during backward and returns it or a
 * replacement (a new reference made with ops, or `grad` itself). Hooks run in the
 * order registered, before a leaf accumulates its gradient. */
typedef tg_tensor *(*tg_grad_hook)(tg_tensor *grad, void *user);
tg_status tg_register_hook(tg_tensor *t, tg_grad_hook hook, void *user);

/* A post-accumulate-grad hook (torch.Tensor.register_post_accumulate_grad_hook) runs
 * on a leaf right after backward has added this backward's gradient into its .grad,
 * as soon as every edge into the leaf has delivered, while the rest of the backward
 * still has to run (data-parallel training starts sending gradients there). It reads
 * or modifies tg_grad(leaf) in place; tensors it makes belong to a scope that ends
 * when it returns. Fails on a non-leaf or a tensor that does not require grad. */
typedef void (*tg_post_accumulate_hook)(tg_tensor *leaf, void *user);
tg_status tg_register_post_accumulate_grad_hook(tg_tensor *leaf, tg_post_accumulate_hook hook, void *user);
/* Removes the first registration of (hook, user) on leaf (PyTorch's handle.remove());
 * false when there is none. */
bool tg_remove_post_accumulate_grad_hook(tg_tensor *leaf, tg_post_accumulate_hook hook, void *user);

typedef struct {
    tg_tensor *gradient; /* d(loss)/d(t); NULL means 1 for a one-element t */
    bool retain_graph;   /* keep saved tensors for another backward */
    bool create_graph;   /* record the backward itself (second derivatives); implies retain_graph */
} tg_backward_opts;

/* Backpropagates from t, accumulating into the .grad of every leaf that requires
 * grad (torch.Tensor.backward). Fails when t does not require grad, when t is not a
 * single element and no gradient is given, on a second backward through a freed
 * graph, on a tensor modified in place after it was saved, or when a backward
 * returns a gradient of the wrong shape/dtype/device (the message names the op). */
tg_status tg_backward(tg_tensor *t);
tg_status tg_backward_opts_run(tg_tensor *t, tg_backward_opts opts);
#define tg_backward_with(t, ...) tg_backward_opts_run((t), (tg_backward_opts){__VA_ARGS__})

/* torch.autograd.grad: gradients of sum(outputs[i] * grad_outputs[i]) with respect
 * to inputs, written to grads[j] as new references (NULL where an input is not
 * reached), without touching any .grad. grad_outputs may be NULL (ones for
 * one-element outputs). */
tg_status tg_grad_of(tg_tensor *const *outputs, tg_tensor *const *grad_outputs, int num_outputs,
                     tg_tensor *const *inputs, int num_inputs, tg_tensor **grads, tg_backward_opts opts);

/* Writes the graph that produced t in Graphviz DOT: one box per op (name, sequence
 * number, output shape), one ellipse per leaf (shape, requires_grad). */
tg_status tg_graph_dot(tg_tensor *t, FILE *out);

/* Live graph nodes (tests assert zero after a scope ends). */
long tg_live_graph_nodes(void);

#ifdef __cplusplus
}
#endif
#endif
