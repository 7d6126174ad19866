/* Elementwise ops: arithmetic with broadcasting, activations, comparisons, casts.
 *
 * Every function returns a NEW reference (see core/scope.h), or NULL with a message
 * naming the op and the shapes/dtypes/devices (core/error.h). Binary ops broadcast
 * as NumPy/PyTorch do and promote dtypes as torch.result_type does (division of
 * integers gives float32; a 0-dim tensor widens a dimensioned one only from a higher
 * category: float32 [3] * float64 0-dim is float32). Inputs must be on the same device. All are
 * differentiable in their floating inputs, to any order, unless said otherwise. */
#ifndef TG_OPS_ELEMENTWISE_H
#define TG_OPS_ELEMENTWISE_H

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.add / sub / mul / div (true division) / maximum / minimum / pow. */
tg_tensor *tg_add(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_sub(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_mul(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_div(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_maximum(tg_tensor *a, tg_tensor *b); /* ties split the gradient in half, as PyTorch */
tg_tensor *tg_minimum(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_pow(tg_tensor *a, tg_tensor *b);
/* torch.atan2(a, b): the angle of (b, a), in (-pi, pi]; integer inputs give float32.
 * Gradients b / (a^2 + b^2) and -a / (a^2 + b^2). */
tg_tensor *tg_atan2(tg_tensor *a, tg_tensor *b);
/* torch.fmod (C's fmod: the result takes the dividend's sign) and torch.remainder
 * (Python's %: the divisor's sign), floating and int32/int64; an integer zero divisor
 * is an error, a floating one gives NaN. Gradients as PyTorch's: 1 for a, and
 * -trunc(a / b) (fmod) or -floor(a / b) (remainder) for b. */
tg_tensor *tg_fmod(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_remainder(tg_tensor *a, tg_tensor *b);
/* aten's threshold_backward at 0, relu's gradient in one pass: grad where x > 0 (or x
 * is NaN, which relu passes), else 0 (also where grad is NaN). */
tg_tensor *tg_relu_backward(tg_tensor *grad, tg_tensor *x);
/* grad * GELU'(x), exact and tanh approximation, in one pass (aten's gelu_backward); their
 * own gradients are ops, so GELU differentiates twice. */
tg_tensor *tg_gelu_backward(tg_tensor *grad, tg_tensor *x);
tg_tensor *tg_gelu_tanh_backward(tg_tensor *grad, tg_tensor *x);
/* The same with a scalar divisor (read as the scalar arithmetic reads it: torch.fmod(x, 2)). */
tg_tensor *tg_fmod_scalar(tg_tensor *a, double b);
tg_tensor *tg_remainder_scalar(tg_tensor *a, double b);

/* Comparisons -> bool tensors (not differentiable). */
tg_tensor *tg_eq(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_ne(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_lt(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_le(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_gt(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_ge(tg_tensor *a, tg_tensor *b);

/* torch.where(cond, a, b): cond is bool; a and b broadcast with it. */
tg_tensor *tg_where(tg_tensor *cond, tg_tensor *a, tg_tensor *b);

/* With a scalar (x > 0.5, torch.gt(x, 0.5), ...) -> bool tensors of x's shape (not
 * differentiable). s is read as the scalar arithmetic reads it (below): an integral s
 * as a Python int, a fractional one as a Python float, so the comparison happens in
 * torch.result_type(x, s): an int64 x against 2.5 compares in float32, as PyTorch. */
tg_tensor *tg_eq_scalar(tg_tensor *x, double s);
tg_tensor *tg_ne_scalar(tg_tensor *x, double s);
tg_tensor *tg_lt_scalar(tg_tensor *x, double s);
tg_tensor *tg_le_scalar(tg_tensor *x, double s);
tg_tensor *tg_gt_scalar(tg_tensor *x, double s);
tg_tensor *tg_ge_scalar(tg_tensor *x, double s);
/* torch.where(cond, x, other) with a scalar other (e.g. masking: where(mask, x, 0.0)),
 * and torch.where(cond, a, b) with two scalars. Dtypes as torch.result_type with s
 * read as above (float32 x with 0.0 stays float32; two scalars: int64 when both are
 * integral, else float32). The scalar goes to x's device (tg_where_scalars: cond's);
 * tg_where_scalar is differentiable in x. */
tg_tensor *tg_where_scalar(tg_tensor *cond, tg_tensor *x, double other);
tg_tensor *tg_where_scalars(tg_tensor *cond, double a, double b);

/* With a scalar: x + s, x - s, x * s, x / s (true division), s - x, x ^ s. The result
 * dtype is torch.result_type(x, s) with s read as a Python int when it is integral and
 * as a Python float otherwise (C has one double for both): floating x keeps its dtype;
 * integer and bool x become float32 for a fractional s and for division; bool becomes
 * int64 for an integral s. An integer x to a negative integral power is an error. */
tg_tensor *tg_add_scalar(tg_tensor *x, double s);
tg_tensor *tg_sub_scalar(tg_tensor *x, double s);
tg_tensor *tg_mul_scalar(tg_tensor *x, double s);
tg_tensor *tg_div_scalar(tg_tensor *x, double s);
tg_tensor *tg_rsub_scalar(tg_tensor *x, double s);
tg_tensor *tg_pow_scalar(tg_tensor *x, double exponent);

/* Unary maths (floating dtypes; neg and abs also for integers). */
tg_tensor *tg_neg(tg_tensor *x);
tg_tensor *tg_exp(tg_tensor *x);
tg_tensor *tg_log(tg_tensor *x);
tg_tensor *tg_sqrt(tg_tensor *x);
tg_tensor *tg_rsqrt(tg_tensor *x);
tg_tensor *tg_abs(tg_tensor *x);
tg_tensor *tg_sign(tg_tensor *x); /* gradient zero */
tg_tensor *tg_erf(tg_tensor *x);
tg_tensor *tg_reciprocal(tg_tensor *x);
tg_tensor *tg_square(tg_tensor *x);
tg_tensor *tg_sin(tg_tensor *x);
tg_tensor *tg_cos(tg_tensor *x);
tg_tensor *tg_expm1(tg_tensor *x);
tg_tensor *tg_log1p(tg_tensor *x);
/* Rounding (gradient zero); torch.round rounds half to even. Floating inputs only. */
tg_tensor *tg_floor(tg_tensor *x);
tg_tensor *tg_ceil(tg_tensor *x);
tg_tensor *tg_round(tg_tensor *x);
tg_tensor *tg_trunc(tg_tensor *x);

/* Activations (torch.nn.functional names). */
tg_tensor *tg_relu(tg_tensor *x);
tg_tensor *tg_leaky_relu(tg_tensor *x, double negative_slope); /* PyTorch default 0.01 */
tg_tensor *tg_sigmoid(tg_tensor *x);
tg_tensor *tg_tanh(tg_tensor *x);
tg_tensor *tg_gelu(tg_tensor *x);      /* approximate='none' */
tg_tensor *tg_gelu_tanh(tg_tensor *x); /* approximate='tanh' */
tg_tensor *tg_silu(tg_tensor *x);
tg_tensor *tg_softplus(tg_tensor *x, double beta, double threshold); /* PyTorch: 1, 20 */
tg_tensor *tg_logsigmoid(tg_tensor *x);
tg_tensor *tg_elu(tg_tensor *x, double alpha); /* PyTorch default alpha 1 */
tg_tensor *tg_selu(tg_tensor *x);
tg_tensor *tg_mish(tg_tensor *x);
tg_tensor *tg_hardswish(tg_tensor *x);
tg_tensor *tg_hardsigmoid(tg_tensor *x);
/* torch.nn.functional.softsign: x / (1 + |x|). */
tg_tensor *tg_softsign(tg_tensor *x);
/* torch.clamp; pass NAN for a missing bound. */
tg_tensor *tg_clamp(tg_tensor *x, double min, double max);

/* torch.isfinite: bool, true where x is neither NaN nor +-Inf (integers: all true).
 * Not differentiable. */
tg_tensor *tg_isfinite(tg_tensor *x);
/* True when every element of x is finite (one read back from the device). False with
 * an error only for a NULL x. */
bool tg_all_finite(tg_tensor *x);

/* Casts to another dtype (torch.Tensor.to(dtype)); differentiable between floating dtypes. */
tg_tensor *tg_cast(tg_tensor *x, tg_dtype dtype);

/* ---- in place (torch.Tensor.add_, mul_, ...), under the rules of ops/inplace.h ----
 * A leaf that requires grad cannot be written while grad mode is on (as PyTorch's "a
 * leaf Variable that requires grad is being used in an in-place operation"); when grad
 * mode is on and the target or b requires grad the write is recorded (the target's
 * history moves to the new node); otherwise it is a plain kernel call (optimizer
 * updates, gradient accumulation). Bump the target's version. Return TG_OK or TG_ERROR. */
tg_status tg_add_(tg_tensor *a, tg_tensor *b);                      /* a += b (b broadcast to a) */
tg_status tg_mul_(tg_tensor *a, tg_tensor *b);                      /* a *= b */
tg_status tg_mul_scalar_(tg_tensor *a, double s);                   /* a *= s */
tg_status tg_add_scaled_(tg_tensor *a, tg_tensor *b, double alpha); /* a += alpha * b */

#ifdef __cplusplus
}
#endif
#endif
