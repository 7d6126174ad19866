/* The optimizers' per-element updates, the one definition both devices compile:
 * optim/update_kernels.h's CPU loops and optim/cuda/optim.cu's kernels call these for
 * element i, so the CPU tests check the arithmetic the GPU runs. Each body is the
 * per-element form of PyTorch 1.13's _single_tensor_* function, statement by statement;
 * the comments quote the tensor op each line stands for. Scalars arrive as doubles
 * (optim/kernels.h's tg_*_args) and are cast to the element type once per loop
 * (tg_*_scalars), where PyTorch's tensor ops would cast the Python scalar, so float32
 * rounding follows PyTorch's op by op. (nvcc may fuse a multiply and an add into one FMA
 * where the C build does not: the GPU's results can differ in the last bit.)
 *
 * A template, included once per element type with T (float, double), NAME(f) (the
 * functions' names) and TYPED(f) (the scalar structs' names) defined: C names both
 * f_f32 / f_f64, C++ (nvcc) gives the functions one name (overloads on T) and the
 * structs two. No include guard, on purpose; the includer undefines its parameters.
 * State pointers a rule does not use may be NULL: they are read only under their
 * option (momentum, amsgrad, centered). */

#include "core/host_device.h"
#include "core/typed_libm.h"
#include "optim/kernels.h"

/* ---- SGD (torch/optim/sgd.py _single_tensor_sgd) ---- */

typedef struct {
    T wd, mom, keep, neg_lr;
} TYPED(tg_sgd_scalars);

TG_HD_INLINE void NAME(tg_sgd_scalars_of)(const tg_sgd_args *a, TYPED(tg_sgd_scalars) *s) {
    s->wd = (T)a->weight_decay;
    s->mom = (T)a->momentum;
    s->keep = (T)(1 - a->dampening);
    s->neg_lr = (T)(-a->lr);
}

/* param, buf (the momentum buffer): element i updated in place. */
TG_HD_INLINE void NAME(tg_sgd_element)(T *param, const T *grad, T *buf, int64_t i, const TYPED(tg_sgd_scalars) *s,
                                       const tg_sgd_args *a) {
    T d_p = a->maximize ? -grad[i] : grad[i];
    if (a->weight_decay != 0) d_p = d_p + s->wd * param[i]; /* d_p.add(param, alpha=wd) */
    if (a->momentum != 0) {
        T b = a->first_step ? d_p                              /* buf = clone(d_p) */
                            : buf[i] * s->mom + s->keep * d_p; /* buf.mul_(m).add_(d_p, alpha=1-damp) */
        buf[i] = b;
        d_p = a->nesterov ? d_p + s->mom * b : b; /* d_p.add(buf, alpha=momentum) */
    }
    param[i] = param[i] + s->neg_lr * d_p; /* param.add_(d_p, alpha=-lr) */
}

/* ---- Adam and AdamW (torch/optim/adam.py _single_tensor_adam, adamw.py
 * _single_tensor_adamw; capturable=False): AdamW decays the parameter itself
 * (param.mul_(1 - lr * wd)) instead of adding wd * param to the gradient. ---- */

typedef struct {
    T decay, wd, b1, one_b1, b2, one_b2, bc2_sqrt, eps, neg_step_size;
} TYPED(tg_adam_scalars);

TG_HD_INLINE void NAME(tg_adam_scalars_of)(const tg_adam_args *a, TYPED(tg_adam_scalars) *s) {
    s->decay = (T)(1 - a->lr * a->weight_decay);
    s->wd = (T)a->weight_decay;
    s->b1 = (T)a->beta1;
    s->one_b1 = (T)(1 - a->beta1);
    s->b2 = (T)a->beta2;
    s->one_b2 = (T)(1 - a->beta2);
    s->bc2_sqrt = (T)a->bias_correction2_sqrt;
    s->eps = (T)a->eps;
    s->neg_step_size = (T)(-(a->lr / a->bias_correction1));
}

/* exp_avg.mul_(b1).add_(g, alpha=1-b1) */
TG_HD_INLINE T NAME(tg_adam_exp_avg)(T m, T g, const TYPED(tg_adam_scalars) *s) { return m * s->b1 + s->one_b1 * g; }

/* exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2) */
TG_HD_INLINE T NAME(tg_adam_exp_avg_sq)(T v, T g, const TYPED(tg_adam_scalars) *s) {
    return v * s->b2 + s->one_b2 * g * g;
}

/* param.addcdiv_(m, denom, value=-step_size), from the (decayed) parameter p. */
TG_HD_INLINE T NAME(tg_adam_param)(T p, T m, T denom, const TYPED(tg_adam_scalars) *s) {
    return p + s->neg_step_size * m / denom;
}

/* param, m (exp_avg), v (exp_avg_sq), vmax (max_exp_avg_sq): element i in place.
 * optim/update_kernels.h's adam_common runs these pieces for the common options with
 * the division by bc2_sqrt as a multiplication that gives the same bits (div_fixed). */
TG_HD_INLINE void NAME(tg_adam_element)(T *param, const T *grad, T *m, T *v, T *vmax, int64_t i,
                                        const TYPED(tg_adam_scalars) *s, const tg_adam_args *a) {
    T g = a->maximize ? -grad[i] : grad[i];
    T p = param[i];
    if (a->decoupled) p = p * s->decay;               /* param.mul_(1 - lr*wd) */
    else if (a->weight_decay != 0) g = g + s->wd * p; /* grad.add(param, alpha=wd) */
    T mi = NAME(tg_adam_exp_avg)(m[i], g, s);
    T vi = NAME(tg_adam_exp_avg_sq)(v[i], g, s);
    m[i] = mi;
    v[i] = vi;
    if (a->amsgrad) {
        T mx = vmax[i] > vi ? vmax[i] : vi; /* torch.maximum(max_exp_avg_sq, exp_avg_sq) */
        if (vi != vi) mx = vi;              /* maximum propagates NaN */
        vmax[i] = mx;
        vi = mx;
    }
    T denom = TG_SQRT(vi) / s->bc2_sqrt + s->eps; /* (v.sqrt() / bc2_sqrt).add_(eps) */
    param[i] = NAME(tg_adam_param)(p, mi, denom, s);
}

/* ---- RMSprop (torch/optim/rmsprop.py _single_tensor_rmsprop) ---- */

typedef struct {
    T wd, alpha, one_alpha, eps, mom, neg_lr;
} TYPED(tg_rmsprop_scalars);

TG_HD_INLINE void NAME(tg_rmsprop_scalars_of)(const tg_rmsprop_args *a, TYPED(tg_rmsprop_scalars) *s) {
    s->wd = (T)a->weight_decay;
    s->alpha = (T)a->alpha;
    s->one_alpha = (T)(1 - a->alpha);
    s->eps = (T)a->eps;
    s->mom = (T)a->momentum;
    s->neg_lr = (T)(-a->lr);
}

/* param, sq (square_avg), gavg (grad_avg), buf (momentum_buffer): element i in place. */
TG_HD_INLINE void NAME(tg_rmsprop_element)(T *param, const T *grad, T *sq, T *gavg, T *buf, int64_t i,
                                           const TYPED(tg_rmsprop_scalars) *s, const tg_rmsprop_args *a) {
    T g = a->maximize ? -grad[i] : grad[i];
    if (a->weight_decay != 0) g = g + s->wd * param[i]; /* grad.add(param, alpha=wd) */
    T sqi = sq[i] * s->alpha + s->one_alpha * g * g;    /* square_avg.mul_(a).addcmul_(g, g, value=1-a) */
    sq[i] = sqi;
    T avg;
    if (a->centered) {
        T ga = gavg[i] * s->alpha + s->one_alpha * g; /* grad_avg.mul_(a).add_(g, alpha=1-a) */
        gavg[i] = ga;
        avg = TG_SQRT(sqi + (T)(-1) * ga * ga); /* square_avg.addcmul(ga, ga, value=-1).sqrt_() */
    } else {
        avg = TG_SQRT(sqi);
    }
    avg = avg + s->eps; /* avg.add_(eps) */
    if (a->momentum > 0) {
        T b = buf[i] * s->mom + g / avg; /* buf.mul_(momentum).addcdiv_(grad, avg) */
        buf[i] = b;
        param[i] = param[i] + s->neg_lr * b; /* param.add_(buf, alpha=-lr) */
    } else {
        param[i] = param[i] + s->neg_lr * g / avg; /* param.addcdiv_(grad, avg, value=-lr) */
    }
}
