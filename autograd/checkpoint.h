/* Activation checkpointing (torch.utils.checkpoint.checkpoint): a segment of the
 * forward runs without keeping its activations for backward; backward runs it again,
 * with grad on, from its saved inputs and backpropagates through that copy. Memory:
 * the segment's inputs instead of everything its ops save; time: one more forward of
 * the segment. */
#ifndef TG_AUTOGRAD_CHECKPOINT_H
#define TG_AUTOGRAD_CHECKPOINT_H

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A segment: its output computed from inputs[0..n) with ops (a NEW reference in the
 * caller's scope, e.g. tg_forward of a module held in user), or NULL + error. It runs
 * twice (forward, then again in backward), so it must compute the same thing both
 * times: random numbers are taken care of (below), other state is not. */
typedef tg_tensor *(*tg_checkpoint_fn)(tg_tensor *const *inputs, void *user);

#define TG_CHECKPOINT_MAX_INPUTS 7

/* checkpoint(fn, *inputs, use_reentrant=False, preserve_rng_state=True): fn(inputs,
 * user) without recording a graph inside (its output is one node whose backward
 * re-runs fn with grad on and backpropagates the output's gradient through it: into
 * the inputs that require grad, and into .grad of the parameters fn uses, as any
 * backward does). The default generators' state (core/rng.h) at the call is put back
 * for the recompute and restored after it, so dropout draws the same masks; the
 * autocast state of the call is the recompute's too. As use_reentrant=False,
 * parameters get their gradients even when no input requires grad: under grad mode
 * the output always requires grad. With grad mode off it is fn(inputs, user).
 *
 * Returns a NEW reference, or NULL + error (fn's own, or a NULL fn / input, n outside
 * 1..TG_CHECKPOINT_MAX_INPUTS). Backward fails, naming tg_checkpoint, under
 * create_graph (second derivatives through a checkpoint are not supported), inside
 * tg_grad_of (the parameters' gradients would go to .grad, which tg_grad_of leaves
 * alone: as PyTorch's reentrant checkpoint, use tg_backward), and when an input was
 * modified in place after the call. Tensors fn reads other than its inputs that
 * require grad must be leaves (parameters): a non-leaf reached that way would be
 * backpropagated through twice. */
tg_tensor *tg_checkpoint(tg_checkpoint_fn fn, void *user, tg_tensor *const *inputs, int n);

#ifdef __cplusplus
}
#endif
#endif
