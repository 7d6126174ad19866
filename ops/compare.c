/* Comparisons, where, fmod and remainder with a Python-style scalar
 * (ops/elementwise.h): the scalar becomes a 0-dim tensor on the other operand's device and the tensor ops do the
 * rest, promotion included. A 0-dim tensor widens a dimensioned one only from a
 * higher category, which is how torch.result_type treats a Python scalar too, except
 * that a Python float promotes an integer tensor to the default dtype (float32), not
 * to float64. So: an integral s is an int64 0-dim (a Python int), a fractional one a
 * float64 0-dim against a floating tensor (same category: no widening) and a float32
 * one against an integer or bool tensor. */
#include <math.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/scope.h"
#include "core/tensor.h"
#include "ops/elementwise.h"
#include "core/tensor_impl.h"

/* An integral double that fits int64 reads as a Python int. */
static bool integral(double s) { return isfinite(s) && s == floor(s) && fabs(s) < 9.2e18; }

/* s as torch.result_type sees a Python scalar next to `other`. */
static tg_tensor *scalar_tensor(double s, tg_tensor *other) {
    tg_dtype dt = integral(s) ? TG_INT64 : tg_dtype_is_floating(tg_dtype_of(other)) ? TG_FLOAT64 : TG_FLOAT32;
    return tg_full(TG_SCALAR_SHAPE, s, (tg_opts){.dtype = dt, .device = tg_device_of(other)});
}

static tg_tensor *with_scalar(const char *op, tg_tensor *(*op_fn)(tg_tensor *, tg_tensor *), tg_tensor *x, double s) {
    if (tg_unusable_(x)) return tg_error_unusable_input(op, x, 0), NULL;
    tg_tensor *out = NULL;
    TG_SCOPE { out = tg_scope_return(op_fn(x, scalar_tensor(s, x))); }
    return out;
}

tg_tensor *tg_eq_scalar(tg_tensor *x, double s) { return with_scalar("tg_eq_scalar", tg_eq, x, s); }
tg_tensor *tg_ne_scalar(tg_tensor *x, double s) { return with_scalar("tg_ne_scalar", tg_ne, x, s); }
tg_tensor *tg_lt_scalar(tg_tensor *x, double s) { return with_scalar("tg_lt_scalar", tg_lt, x, s); }
tg_tensor *tg_le_scalar(tg_tensor *x, double s) { return with_scalar("tg_le_scalar", tg_le, x, s); }
tg_tensor *tg_gt_scalar(tg_tensor *x, double s) { return with_scalar("tg_gt_scalar", tg_gt, x, s); }
tg_tensor *tg_ge_scalar(tg_tensor *x, double s) { return with_scalar("tg_ge_scalar", tg_ge, x, s); }

tg_tensor *tg_fmod_scalar(tg_tensor *x, double s) { return with_scalar("tg_fmod_scalar", tg_fmod, x, s); }
tg_tensor *tg_remainder_scalar(tg_tensor *x, double s) {
    return with_scalar("tg_remainder_scalar", tg_remainder, x, s);
}

tg_tensor *tg_where_scalar(tg_tensor *cond, tg_tensor *x, double other) {
    if (tg_unusable_(cond)) return tg_error_unusable_input("tg_where_scalar", cond, 0), NULL;
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_where_scalar", x, 1), NULL;
    tg_tensor *out = NULL;
    TG_SCOPE { out = tg_scope_return(tg_where(cond, x, scalar_tensor(other, x))); }
    return out;
}

tg_tensor *tg_where_scalars(tg_tensor *cond, double a, double b) {
    if (tg_unusable_(cond)) return tg_error_unusable_input("tg_where_scalars", cond, 0), NULL;
    tg_tensor *out = NULL;
    TG_SCOPE {
        /* Two Python scalars: int64 when both are ints, else the default float32. */
        tg_dtype dt = integral(a) && integral(b) ? TG_INT64 : TG_FLOAT32;
        tg_opts o = {.dtype = dt, .device = tg_device_of(cond)};
        out = tg_scope_return(tg_where(cond, tg_full(TG_SCALAR_SHAPE, a, o), tg_full(TG_SCALAR_SHAPE, b, o)));
    }
    return out;
}
