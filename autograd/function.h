/* The op API: how every op, built-in or user-written, runs and records itself.
 *
 * An op is a tg_function: a name, a forward and a backward. tg_apply runs forward
 * (with grad mode off and inside a scope of its own, so its temporaries are freed)
 * and, when grad mode is on and an input requires grad, records a graph node with
 * what the forward saved. Backward receives the gradient of the output and writes
 * one gradient per input, built with ops, so formulas are device-generic and
 * themselves differentiable (second derivatives).
 *
 *     static tg_tensor *swish_forward(tg_ctx *ctx, tg_tensor *const *in) {
 *         tg_ctx_save(ctx, in[0]);
 *         return tg_mul(in[0], tg_sigmoid(in[0]));
 *     }
 *     static void swish_backward(tg_ctx *ctx, tg_tensor *grad, tg_tensor **grad_in) {
 *         tg_tensor *x = tg_ctx_saved(ctx, 0), *s = tg_sigmoid(x);
 *         grad_in[0] = tg_mul(grad, tg_add(s, tg_mul(x, tg_mul(s, tg_rsub_scalar(s, 1.0)))));
 *     }
 *     static const tg_function swish = {.name = "swish", .num_inputs = 1, .forward = swish_forward,
 *                                       .backward = swish_backward,
 *                                       .low_precision = TG_LOW_PRECISION_NATIVE}; // built from ops
 *     tg_tensor *y = tg_apply(&swish, (tg_tensor *[]){x});
 */
#ifndef TG_AUTOGRAD_FUNCTION_H
#define TG_AUTOGRAD_FUNCTION_H

#include <stddef.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_ctx tg_ctx;
/* One recorded call of an op being written as ONNX nodes (onnx/graph.h). */
typedef struct tg_onnx_op tg_onnx_op;

/* Returns the (first) output: a new reference made inside the forward's scope, or
 * NULL after recording an error. */
typedef tg_tensor *(*tg_forward_fn)(tg_ctx *ctx, tg_tensor *const *inputs);
/* `grad` is the gradient of output 0 (tg_ctx_grad_output for the others). Sets
 * grad_inputs[i] for every input that needs it (tg_ctx_needs_input_grad); leaving
 * one NULL means "no gradient" (zero). Gradients may have the input's shape or a
 * shape it broadcasts to (the engine sums them back). */
typedef void (*tg_backward_fn)(tg_ctx *ctx, tg_tensor *grad, tg_tensor **grad_inputs);

/* What tg_apply does with float16 / bfloat16 inputs (docs/mixed-precision.md). */
typedef enum {
    /* Refused with "<op>: no float16/bfloat16 kernel ...": the forward would read
     * the 2-byte elements as something else. The default, so a custom op whose
     * forward reads data pointers is safe until it says otherwise. */
    TG_LOW_PRECISION_REFUSE = 0,
    /* The forward handles them itself (views, copies, ops built from other ops). */
    TG_LOW_PRECISION_NATIVE,
    /* Computed in float32 and rounded once, as PyTorch's CPU kernels do: inputs of
     * one low-precision dtype d are cast to float32 (recorded, so gradients flow
     * back as d), the op runs, and its floating outputs are cast back to d. A mix
     * of d with another floating dtype is refused. */
    TG_LOW_PRECISION_IN_FLOAT32,
} tg_low_precision;

/* What autocast does with the op's inputs (autograd/autocast.h). */
typedef enum {
    TG_AUTOCAST_NONE = 0,        /* runs in its inputs' dtypes */
    TG_AUTOCAST_LOWER,           /* matmul, linear, conv: floating inputs to the autocast dtype */
    TG_AUTOCAST_FLOAT32,         /* losses: to float32 */
    TG_AUTOCAST_FLOAT32_ON_CUDA, /* softmax, exp, sum, ...: to float32 under CUDA autocast only */
} tg_autocast_policy;

typedef struct tg_function {
    const char *name;
    int num_inputs; /* at most TG_MAX_OP_INPUTS */
    tg_forward_fn forward;
    tg_backward_fn backward;        /* NULL: not differentiable (outputs never require grad) */
    int num_outputs;                /* 0 means 1; more: forward sets outputs 1.. with tg_ctx_set_output */
    tg_low_precision low_precision; /* float16/bfloat16 inputs; zero: refused */
    tg_autocast_policy autocast;    /* zero: not cast */
    /* Writes this call as ONNX nodes (onnx/graph.h); NULL: tg_onnx_export refuses the op. */
    tg_status (*onnx)(tg_onnx_op *op);
} tg_function;

#define TG_MAX_OP_INPUTS 8
#define TG_MAX_OP_OUTPUTS 4

/* Runs fn on inputs. Returns output 0 as a new reference, or NULL (with the error
 * message) when an input is NULL or forward fails. */
tg_tensor *tg_apply(const tg_function *fn, tg_tensor *const *inputs);
/* Multi-output form: fills outputs[0..num_outputs) with new references. */
tg_status tg_apply_multi(const tg_function *fn, tg_tensor *const *inputs, tg_tensor **outputs);
/* With non-tensor arguments (dims, scalars, flags): `args` (size bytes) is copied
 * into the node and read by forward and backward with tg_ctx_attrs. outputs may be
 * NULL for a single-output function; the result is output 0. */
tg_tensor *tg_apply_args(const tg_function *fn, tg_tensor *const *inputs, const void *args, size_t size);
tg_status tg_apply_multi_args(const tg_function *fn, tg_tensor *const *inputs, const void *args, size_t size,
                              tg_tensor **outputs);

/* Sees every op applied on this thread at the top level (not the ops a forward runs
 * inside), after it succeeded: tg_onnx_export's recorder. `args` is what the caller
 * gave tg_apply_args (NULL, 0 otherwise). NULL stops observing; returns the previous. */
typedef void (*tg_op_observer_fn)(void *user, const tg_function *fn, tg_tensor *const *inputs, const void *args,
                                  size_t size, tg_tensor *const *outputs, int num_outputs);
typedef struct {
    tg_op_observer_fn fn;
    void *user;
} tg_op_observer;
tg_op_observer tg_set_op_observer(tg_op_observer observer);

/* ---- inside forward ---- */
/* Saves a tensor for backward (an input, an output or an intermediate). Its version
 * is recorded: backward fails if it was modified in place in between. */
void tg_ctx_save(tg_ctx *ctx, tg_tensor *t);
/* Replaces the attributes with `size` bytes computed in forward. */
void tg_ctx_set_attrs(tg_ctx *ctx, const void *attrs, size_t size);
/* The function being run (lets one forward serve a family of ops declared as
 * structs whose first member is the tg_function). */
const tg_function *tg_ctx_function(const tg_ctx *ctx);
/* Sets output i (1 <= i < num_outputs) of a multi-output forward. */
void tg_ctx_set_output(tg_ctx *ctx, int i, tg_tensor *t);
/* Output i gets no gradient and never requires grad (indices, masks). */
void tg_ctx_mark_non_differentiable(tg_ctx *ctx, int output);

/* ---- inside backward ---- */
/* Saved tensor i (borrowed for the duration of backward), or NULL + error when the
 * graph was freed by an earlier backward or the tensor was modified in place. */
tg_tensor *tg_ctx_saved(tg_ctx *ctx, int i);
/* Pointer to the attributes (tg_apply_args or tg_ctx_set_attrs); also valid in forward. */
const void *tg_ctx_attrs(const tg_ctx *ctx);
/* True when input i needs a gradient (skip computing the others). */
bool tg_ctx_needs_input_grad(const tg_ctx *ctx, int i);
/* Gradient of output i (zeros when none flowed to it). Borrowed. */
tg_tensor *tg_ctx_grad_output(tg_ctx *ctx, int i);
/* Shape / dtype / device of input i as seen by forward (for formulas such as sum's). */
tg_shape tg_ctx_input_shape(const tg_ctx *ctx, int i);
tg_dtype tg_ctx_input_dtype(const tg_ctx *ctx, int i);

#ifdef __cplusplus
}
#endif
#endif
