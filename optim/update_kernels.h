/* The optimizers' fused CPU updates as ordinary functions, for one element type:
 * included once per type by optim/kernels.c with T (float, double), NAME(f) (f_f32,
 * f_f64) and SQRT (sqrtf, sqrt) defined. No include guard, on purpose; it undefines its parameters at its end. Each loop body is
 * the per-element form of PyTorch 1.13's _single_tensor_* function, statement by
 * statement; the comments quote the tensor op each line stands for. */

/* Adam's common-case loop with its exact-subnormal blocks where the CPU has them
 * (float32, optim/kernels.c); float64 is the loop. */
static void NAME(adam_common_any)(T *param, const T *grad, T *m, T *v, int64_t n, tg_adam_args a);

/* torch/optim/sgd.py _single_tensor_sgd. */
TG_VECTOR_CLONES static void NAME(sgd_range)(T *restrict param, const T *restrict grad, T *restrict buf, int64_t n,
                               tg_sgd_args a) {
    const T wd = (T)a.weight_decay, mom = (T)a.momentum, keep = (T)(1 - a.dampening);
    const T neg_lr = (T)(-a.lr);
    for (int64_t i = 0; i < n; i++) {
        T d_p = a.maximize ? -grad[i] : grad[i];
        if (a.weight_decay != 0) d_p = d_p + wd * param[i]; /* d_p.add(param, alpha=wd) */
        if (a.momentum != 0) {
            T b = a.first_step ? d_p                     /* buf = clone(d_p) */
                               : buf[i] * mom + keep * d_p; /* buf.mul_(m).add_(d_p, alpha=1-damp) */
            buf[i] = b;
            d_p = a.nesterov ? d_p + mom * b : b; /* d_p.add(buf, alpha=momentum) */
        }
        param[i] = param[i] + neg_lr * d_p; /* param.add_(d_p, alpha=-lr) */
    }
}

/* torch/optim/adam.py _single_tensor_adam and adamw.py _single_tensor_adamw
 * (capturable=False): AdamW decays the parameter itself (param.mul_(1 - lr * wd))
 * instead of adding wd * param to the gradient. */
TG_VECTOR_CLONES static void NAME(adam_range)(T *restrict param, const T *restrict grad, T *restrict m, T *restrict v,
                                T *restrict vmax, int64_t n, tg_adam_args a) {
    const T decay = (T)(1 - a.lr * a.weight_decay), wd = (T)a.weight_decay;
    const T b1 = (T)a.beta1, one_b1 = (T)(1 - a.beta1);
    const T b2 = (T)a.beta2, one_b2 = (T)(1 - a.beta2);
    const T bc2_sqrt = (T)a.bias_correction2_sqrt, eps = (T)a.eps;
    const T neg_step_size = (T)(-(a.lr / a.bias_correction1));
    for (int64_t i = 0; i < n; i++) {
        T g = a.maximize ? -grad[i] : grad[i];
        T p = param[i];
        if (a.decoupled) p = p * decay;                         /* param.mul_(1 - lr*wd) */
        else if (a.weight_decay != 0) g = g + wd * p;           /* grad.add(param, alpha=wd) */
        T mi = m[i] * b1 + one_b1 * g;                 /* exp_avg.mul_(b1).add_(g, alpha=1-b1) */
        T vi = v[i] * b2 + one_b2 * g * g;    /* exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2) */
        m[i] = mi;
        v[i] = vi;
        if (a.amsgrad) {
            T mx = vmax[i] > vi ? vmax[i] : vi; /* torch.maximum(max_exp_avg_sq, exp_avg_sq) */
            if (vi != vi) mx = vi;              /* maximum propagates NaN */
            vmax[i] = mx;
            vi = mx;
        }
        T denom = SQRT(vi) / bc2_sqrt + eps;  /* (v.sqrt() / bc2_sqrt).add_(eps) */
        param[i] = p + neg_step_size * mi / denom; /* param.addcdiv_(m, denom, value=-step_size) */
    }
}
/* The same for the common options (no maximize, no amsgrad, AdamW or no weight decay),
 * the division by bc2_sqrt as div_fixed: a separate loop, as GCC would not unswitch the
 * one above on yet another condition and so not vectorize it. One loop for both: Adam
 * here has no weight decay, so its decay factor is exactly 1 and p * 1 is p. */
TG_VECTOR_CLONES static void NAME(adam_common)(T *restrict param, const T *restrict grad, T *restrict m,
                                                  T *restrict v, int64_t n, tg_adam_args a) {
    const T decay = (T)(1 - a.lr * a.weight_decay);
    const T b1 = (T)a.beta1, one_b1 = (T)(1 - a.beta1);
    const T b2 = (T)a.beta2, one_b2 = (T)(1 - a.beta2);
    const T bc2_sqrt = (T)a.bias_correction2_sqrt, eps = (T)a.eps;
    const T neg_step_size = (T)(-(a.lr / a.bias_correction1));
    const T inv_bc2_sqrt = (T)1 / bc2_sqrt;
    for (int64_t i = 0; i < n; i++) {
        T g = grad[i], p = param[i] * decay;                    /* param.mul_(1 - lr*wd) */
        T mi = m[i] * b1 + one_b1 * g, vi = v[i] * b2 + one_b2 * g * g;
        m[i] = mi;
        v[i] = vi;
        T denom = NAME(div_fixed)(SQRT(vi), bc2_sqrt, inv_bc2_sqrt) + eps;
        param[i] = p + neg_step_size * mi / denom;
    }
}
static void NAME(adam)(T *param, const T *grad, T *m, T *v, T *vmax, int64_t n, tg_adam_args a) {
    T inv_bc2_sqrt = (T)1 / (T)a.bias_correction2_sqrt;
    if (fixed_division_by_fma() && inv_bc2_sqrt - inv_bc2_sqrt == 0 && !a.maximize && !a.amsgrad &&
        (a.decoupled || a.weight_decay == 0))
        NAME(adam_common_any)(param, grad, m, v, n, a);
    else
        NAME(adam_range)(param, grad, m, v, vmax, n, a);
}

/* torch/optim/rmsprop.py _single_tensor_rmsprop. */
TG_VECTOR_CLONES static void NAME(rmsprop_range)(T *restrict param, const T *restrict grad, T *restrict sq,
                                   T *restrict gavg, T *restrict buf, int64_t n, tg_rmsprop_args a) {
    const T wd = (T)a.weight_decay, alpha = (T)a.alpha, one_alpha = (T)(1 - a.alpha);
    const T eps = (T)a.eps, mom = (T)a.momentum, neg_lr = (T)(-a.lr);
    for (int64_t i = 0; i < n; i++) {
        T g = a.maximize ? -grad[i] : grad[i];
        if (a.weight_decay != 0) g = g + wd * param[i]; /* grad.add(param, alpha=wd) */
        T s = sq[i] * alpha + one_alpha * g * g; /* square_avg.mul_(a).addcmul_(g, g, value=1-a) */
        sq[i] = s;
        T avg;
        if (a.centered) {
            T ga = gavg[i] * alpha + one_alpha * g; /* grad_avg.mul_(a).add_(g, alpha=1-a) */
            gavg[i] = ga;
            avg = SQRT(s + (T)(-1) * ga * ga); /* square_avg.addcmul(ga, ga, value=-1).sqrt_() */
        } else {
            avg = SQRT(s);
        }
        avg = avg + eps;                                                /* avg.add_(eps) */
        if (a.momentum > 0) {
            T b = buf[i] * mom + g / avg;      /* buf.mul_(momentum).addcdiv_(grad, avg) */
            buf[i] = b;
            param[i] = param[i] + neg_lr * b;  /* param.add_(buf, alpha=-lr) */
        } else {
            param[i] = param[i] + neg_lr * g / avg; /* param.addcdiv_(grad, avg, value=-lr) */
        }
    }
}

/* One tensor's elements [lo, hi) by the rule. */
static void NAME(update_range)(tg_optim_rule rule, const tg_optim_tensor *t, int64_t lo, int64_t hi) {
    T *p = (T *)t->param + lo, *s0 = OFF((T *)t->state[0], lo), *s1 = OFF((T *)t->state[1], lo);
    T *s2 = OFF((T *)t->state[2], lo);
    const T *g = (const T *)t->grad + lo;
    switch (rule) {
    case TG_RULE_SGD: NAME(sgd_range)(p, g, s0, hi - lo, t->args.sgd); break;
    case TG_RULE_ADAM: NAME(adam)(p, g, s0, s1, s2, hi - lo, t->args.adam); break;
    case TG_RULE_RMSPROP: NAME(rmsprop_range)(p, g, s0, s1, s2, hi - lo, t->args.rmsprop); break;
    }
}
typedef struct {
    tg_optim_rule rule;
    const tg_optim_tensor *tensors;
    int count;
} NAME(step_job);
/* Blocks [b0, b1) counted over the tensors in order, each tensor ceil(n / BLOCK) of them. */
static void NAME(update_blocks)(int64_t b0, int64_t b1, void *arg) {
    const NAME(step_job) *j = arg;
    int64_t first = 0; /* the first block of tensor i */
    for (int i = 0; i < j->count && first < b1; i++) {
        const tg_optim_tensor *t = &j->tensors[i];
        int64_t blocks = (t->n + BLOCK - 1) / BLOCK;
        int64_t lo = b0 > first ? b0 - first : 0, hi = b1 - first < blocks ? b1 - first : blocks;
        if (lo < hi) NAME(update_range)(j->rule, t, lo * BLOCK, hi * BLOCK < t->n ? hi * BLOCK : t->n);
        first += blocks;
    }
}
void NAME(tg_optim_kernel)(tg_optim_rule rule, const tg_optim_tensor *tensors, int count) {
    int64_t blocks = 0;
    for (int i = 0; i < count; i++) blocks += (tensors[i].n + BLOCK - 1) / BLOCK;
    NAME(step_job) j = {rule, tensors, count};
    tg_parallel_for(blocks, PARALLEL_MIN / BLOCK, NAME(update_blocks), &j);
}

/* GradScaler's unscale: each block ORs its own flag into the job's, once. */
typedef struct {
    T *grad;
    int64_t n;
    float inv_scale;
    int found;
} NAME(unscale_job);
static void NAME(unscale_blocks)(int64_t b0, int64_t b1, void *arg) {
    NAME(unscale_job) *j = arg;
    int64_t lo = b0 * BLOCK, hi = b1 * BLOCK < j->n ? b1 * BLOCK : j->n;
    int found = 0;
    for (int64_t i = lo; i < hi; i++) TG_UNSCALE_ELEMENT(T, j->grad[i], j->inv_scale, found);
    if (found) __atomic_store_n(&j->found, 1, __ATOMIC_RELAXED);
}
bool NAME(tg_unscale_kernel)(T *grad, int64_t n, float inv_scale) {
    NAME(unscale_job) j = {grad, n, inv_scale, 0};
    tg_parallel_for((n + BLOCK - 1) / BLOCK, PARALLEL_MIN / BLOCK, NAME(unscale_blocks), &j);
    return __atomic_load_n(&j.found, __ATOMIC_RELAXED) != 0;
}

/* The parameters end with this instantiation. */
#undef T
#undef SQRT
#undef NAME
