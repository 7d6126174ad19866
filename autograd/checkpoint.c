/* tg_checkpoint (autograd/checkpoint.h): one op whose forward is the segment run
 * without recording and whose backward re-runs it with grad on and calls a nested
 * tg_backward on that copy (the engine gives a backward inside a backward a graph task
 * of its own). The segment's parameters thus get their gradients from the nested
 * backward, which is why tg_grad_of (which must not touch .grad) is refused. */
#include "autograd/checkpoint.h"

#include "autograd/autocast_impl.h"
#include "autograd/function.h"
#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/rng.h"
#include "core/scope.h"

typedef struct {
    tg_checkpoint_fn fn;
    void *user;
    int n;            /* the segment's inputs; input n is the anchor */
    tg_rng_state rng; /* the generators at the call */
    tg_autocast_state autocast[TG_NUM_DEVICE_KINDS];
} checkpoint_args;

static tg_tensor *checkpoint_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const checkpoint_args *a = tg_ctx_attrs(ctx);
    for (int i = 0; i < a->n; i++) tg_ctx_save(ctx, in[i]);
    /* the segment's ops autocast as they would outside this op */
    tg_autocast_resume();
    tg_tensor *out = a->fn(in, a->user);
    tg_autocast_suspend();
    return out;
}

static void checkpoint_backward(tg_ctx *ctx, tg_tensor *grad, tg_tensor **grad_in) {
    const checkpoint_args *a = tg_ctx_attrs(ctx);
    if (tg_is_grad_enabled()) {
        tg_error("tg_checkpoint: second derivatives (create_graph) through a checkpointed segment are not supported");
        return;
    }
    if (tg_current_backward_frame.capturing) {
        tg_error("tg_checkpoint: not compatible with tg_grad_of (the segment's parameters get their gradients in "
                 ".grad, which tg_grad_of leaves alone); use tg_backward");
        return;
    }
    tg_tensor *detached[TG_CHECKPOINT_MAX_INPUTS];
    for (int i = 0; i < a->n; i++) {
        tg_tensor *saved = tg_ctx_saved(ctx, i);
        if (!saved) return; /* modified in place since: the error names it */
        detached[i] = tg_detach(saved);
        if (tg_ctx_needs_input_grad(ctx, i)) tg_requires_grad_(detached[i], true);
    }
    /* the recompute under the call's generators, autocast and grad mode; then back */
    tg_rng_state now = tg_rng_get_state();
    tg_rng_set_state(a->rng);
    tg_autocast_state outer[TG_NUM_DEVICE_KINDS];
    for (int d = 0; d < TG_NUM_DEVICE_KINDS; d++)
        outer[d] = tg_set_autocast((tg_device_kind)d, a->autocast[d].enabled, a->autocast[d].dtype);
    tg_autocast_resume();
    bool grad_was = tg_set_grad_enabled(true);
    tg_tensor *out = a->fn(detached, a->user);
    tg_set_grad_enabled(grad_was);
    tg_autocast_suspend();
    for (int d = 0; d < TG_NUM_DEVICE_KINDS; d++) tg_restore_autocast((tg_device_kind)d, outer[d]);
    tg_rng_set_state(now);
    if (!out || !tg_requires_grad(out)) return; /* fn's error stands; nothing to backpropagate into */
    if (tg_backward_with(out, .gradient = grad)) return;
    for (int i = 0; i < a->n; i++)
        if (tg_ctx_needs_input_grad(ctx, i) && tg_grad(detached[i])) grad_in[i] = tg_detach(tg_grad(detached[i]));
}

/* One function per input count (the anchor included): num_inputs is static. */
#define CHECKPOINT_FN(k)                                                                                         \
    {                                                                                                            \
        .name = "checkpoint", .num_inputs = (k), .forward = checkpoint_forward, .backward = checkpoint_backward, \
        .low_precision = TG_LOW_PRECISION_NATIVE                                                                 \
    }
static const tg_function checkpoint_fns[TG_CHECKPOINT_MAX_INPUTS + 1] = {
    CHECKPOINT_FN(1), CHECKPOINT_FN(2), CHECKPOINT_FN(3), CHECKPOINT_FN(4),
    CHECKPOINT_FN(5), CHECKPOINT_FN(6), CHECKPOINT_FN(7), CHECKPOINT_FN(8),
};

tg_tensor *tg_checkpoint(tg_checkpoint_fn fn, void *user, tg_tensor *const *inputs, int n) {
    if (!fn || n < 1 || n > TG_CHECKPOINT_MAX_INPUTS || !inputs)
        return tg_error("tg_checkpoint: needs a function and 1 to %d inputs, got %s and %d", TG_CHECKPOINT_MAX_INPUTS,
                        fn ? "a function" : "NULL", n),
               NULL;
    for (int i = 0; i < n; i++)
        if (tg_unusable_(inputs[i])) return tg_error_unusable_input("tg_checkpoint", inputs[i], i), NULL;
    if (!tg_is_grad_enabled()) return fn(inputs, user);
    checkpoint_args a = {fn, user, n, tg_rng_get_state(), {{0}}};
    for (int d = 0; d < TG_NUM_DEVICE_KINDS; d++)
        a.autocast[d] =
            (tg_autocast_state){tg_is_autocast_enabled((tg_device_kind)d), tg_get_autocast_dtype((tg_device_kind)d)};
    tg_tensor *out = NULL;
    TG_SCOPE {
        /* a leaf that requires grad, so that the op is recorded whatever the inputs (the
         * parameters inside fn need the backward even when no input requires grad) */
        tg_tensor *anchor = tg_requires_grad_(tg_zeros(TG_SCALAR_SHAPE, (tg_opts){0}), true);
        tg_tensor *all[TG_CHECKPOINT_MAX_INPUTS + 1];
        for (int i = 0; i < n; i++) all[i] = inputs[i];
        all[n] = anchor;
        out = anchor ? tg_scope_return(tg_apply_args(&checkpoint_fns[n], all, &a, sizeof a)) : NULL;
    }
    return out;
}
