/* The optimizers' fused CPU updates as ordinary functions, for one element type:
 * included once per type by optim/kernels.c with T (float, double) and NAME(f) (f_f32,
 * f_f64) defined. No include guard, on purpose; it undefines its parameters at its end.
 * Each element's update is optim/update_formulas.h's, the one optim/cuda/optim.cu's
 * kernels run; here are the loops, blocks and threads around it. */

#define TYPED NAME /* C names the formulas' structs as their functions */
#include "optim/update_formulas.h"
#undef TYPED

/* Adam's common-case loop with its exact-subnormal blocks where the CPU has them
 * (float32, optim/kernels.c); float64 is the loop. */
static void NAME(adam_common_any)(T *param, const T *grad, T *m, T *v, int64_t n, tg_adam_args a);

/* The loops over n elements: each element by optim/update_formulas.h. */
TG_VECTOR_CLONES static void NAME(sgd_range)(T *restrict param, const T *restrict grad, T *restrict buf, int64_t n,
                                             tg_sgd_args a) {
    NAME(tg_sgd_scalars) s;
    NAME(tg_sgd_scalars_of)(&a, &s);
    for (int64_t i = 0; i < n; i++) NAME(tg_sgd_element)(param, grad, buf, i, &s, &a);
}

TG_VECTOR_CLONES static void NAME(adam_range)(T *restrict param, const T *restrict grad, T *restrict m, T *restrict v,
                                              T *restrict vmax, int64_t n, tg_adam_args a) {
    NAME(tg_adam_scalars) s;
    NAME(tg_adam_scalars_of)(&a, &s);
    for (int64_t i = 0; i < n; i++) NAME(tg_adam_element)(param, grad, m, v, vmax, i, &s, &a);
}
/* The same for the common options (no maximize, no amsgrad, AdamW or no weight decay),
 * the division by bc2_sqrt as div_fixed: a separate loop, as GCC would not unswitch the
 * one above on yet another condition and so not vectorize it. One loop for both: Adam
 * here has no weight decay, so its decay factor is exactly 1 and p * 1 is p. */
TG_VECTOR_CLONES static void NAME(adam_common)(T *restrict param, const T *restrict grad, T *restrict m, T *restrict v,
                                               int64_t n, tg_adam_args a) {
    NAME(tg_adam_scalars) s;
    NAME(tg_adam_scalars_of)(&a, &s);
    const T inv_bc2_sqrt = (T)1 / s.bc2_sqrt;
    for (int64_t i = 0; i < n; i++) {
        T g = grad[i], p = param[i] * s.decay; /* param.mul_(1 - lr*wd) */
        T mi = NAME(tg_adam_exp_avg)(m[i], g, &s), vi = NAME(tg_adam_exp_avg_sq)(v[i], g, &s);
        m[i] = mi;
        v[i] = vi;
        T denom = NAME(div_fixed)(TG_SQRT(vi), s.bc2_sqrt, inv_bc2_sqrt) + s.eps;
        param[i] = NAME(tg_adam_param)(p, mi, denom, &s);
    }
}
static void NAME(adam)(T *param, const T *grad, T *m, T *v, T *vmax, int64_t n, tg_adam_args a) {
    T inv_bc2_sqrt = (T)1 / (T)a.bias_correction2_sqrt;
    if (fixed_division_by_fma() && inv_bc2_sqrt - inv_bc2_sqrt == 0 && !a.maximize && !a.amsgrad &&
        (a.decoupled || a.weight_decay == 0))
        NAME(adam_common_any)(param, grad, m, v, n, a);
    else NAME(adam_range)(param, grad, m, v, vmax, n, a);
}

TG_VECTOR_CLONES static void NAME(rmsprop_range)(T *restrict param, const T *restrict grad, T *restrict sq,
                                                 T *restrict gavg, T *restrict buf, int64_t n, tg_rmsprop_args a) {
    NAME(tg_rmsprop_scalars) s;
    NAME(tg_rmsprop_scalars_of)(&a, &s);
    for (int64_t i = 0; i < n; i++) NAME(tg_rmsprop_element)(param, grad, sq, gavg, buf, i, &s, &a);
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
#undef NAME
