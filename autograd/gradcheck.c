#include "autograd/gradcheck.h"

#include <math.h>
#include <stdlib.h>

#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "core/rng_impl.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape.h"

#define MAX_INPUTS 16

/* Element k of a float64 tensor in logical (row-major) order: its address on the
 * tensor's device. */
static double *element(tg_tensor *t, long k) {
    int64_t off = 0, rest = k;
    for (int d = t->shape.ndim - 1; d >= 0; d--) {
        off += (rest % t->shape.dims[d]) * t->strides[d];
        rest /= t->shape.dims[d];
    }
    return (double *)tg_elem_ptr(t) + off;
}

/* Reads and writes element k of a float64 input on any device (the finite differences
 * perturb inputs in place, as PyTorch's gradcheck does, CUDA tensors included). */
static tg_status read_element(tg_tensor *t, long k, double *value) {
    tg_device dev = t->storage->device;
    if (dev.kind == TG_DEVICE_CPU) return *value = *element(t, k), TG_OK;
    const tg_device_backend *b = tg_backend_for(dev, "tg_gradcheck");
    return b ? b->copy(value, TG_CPU, element(t, k), dev, sizeof *value) : TG_ERROR;
}

static tg_status write_element(tg_tensor *t, long k, double value) {
    tg_device dev = t->storage->device;
    if (dev.kind == TG_DEVICE_CPU) return *element(t, k) = value, TG_OK;
    const tg_device_backend *b = tg_backend_for(dev, "tg_gradcheck");
    return b ? b->copy(element(t, k), dev, &value, TG_CPU, sizeof value) : TG_ERROR;
}

/* fn's output as a contiguous float64 host copy (owned by the current scope). */
static tg_tensor *evaluate(tg_gradcheck_fn fn, tg_tensor *const *inputs, void *user) {
    tg_tensor *y = NULL;
    TG_NO_GRAD { y = fn(inputs, user); }
    /* A copy, never y itself: an output that is a view of an input (tg_view, tg_sum_to
     * of the same shape) would otherwise change with the next perturbation, and the
     * difference of two such outputs be 0 (as PyTorch's gradcheck, which clones). */
    return y ? tg_clone(tg_tensor_to(y, TG_CPU)) : NULL;
}

tg_status tg_gradcheck(tg_gradcheck_fn fn, int n, tg_tensor *const *inputs, tg_gradcheck_opts *opts) {
    tg_gradcheck_opts defaults = {0};
    if (!opts) opts = &defaults;
    double eps = opts->eps ? opts->eps : 1e-6, atol = opts->atol ? opts->atol : 1e-5,
           rtol = opts->rtol ? opts->rtol : 1e-3;
    if (n > MAX_INPUTS) return tg_error("tg_gradcheck: at most %d inputs", MAX_INPUTS);
    for (int i = 0; i < n; i++) {
        if (tg_unusable_(inputs[i])) return tg_error_unusable_input("tg_gradcheck", inputs[i], i);
        if (inputs[i]->requires_grad && inputs[i]->dtype != TG_FLOAT64)
            return tg_error("tg_gradcheck: input %d is %s; gradcheck needs float64 inputs (on any device) for "
                            "finite differences to be accurate",
                            i, tg_dtype_name(inputs[i]->dtype));
    }
    tg_status status = TG_OK;
    opts->worst_error = -1;
    double worst_excess = -INFINITY; /* max over elements of |diff| - (atol + rtol |numeric|) */
    TG_SCOPE {
        tg_tensor *y = NULL;
        y = fn(inputs, opts->user);
        if (!y) {
            status = TG_ERROR;
        } else if (!y->requires_grad) {
            status = tg_error("tg_gradcheck: the function's output does not require grad");
        } else if (y->dtype != TG_FLOAT64) {
            status = tg_error("tg_gradcheck: the function's output is %s, not float64", tg_dtype_name(y->dtype));
        }
        long out_numel = y ? (long)tg_numel(y) : 0;
        /* Analytic Jacobian, one row per output element: backward with a one-hot gradient. */
        double *analytic[MAX_INPUTS] = {0};
        for (int i = 0; i < n; i++)
            if (inputs[i]->requires_grad)
                analytic[i] = calloc((size_t)(out_numel * tg_numel(inputs[i])) + 1, sizeof(double));
        for (long j = 0; status == TG_OK && j < out_numel; j++) {
            TG_SCOPE {
                tg_tensor *onehot = tg_zeros(y->shape, (tg_opts){.dtype = TG_FLOAT64});
                *element(onehot, j) = 1;
                onehot = tg_tensor_to(onehot, y->storage->device);
                tg_tensor *grads[MAX_INPUTS] = {0}, *checked[MAX_INPUTS];
                int m = 0;
                for (int i = 0; i < n; i++)
                    if (inputs[i]->requires_grad) checked[m++] = inputs[i];
                if (tg_grad_of(&y, &onehot, 1, checked, m, grads, (tg_backward_opts){.retain_graph = true}))
                    status = TG_ERROR;
                for (int i = 0, k = 0; status == TG_OK && i < n; i++) {
                    if (!inputs[i]->requires_grad) continue;
                    tg_tensor *g = grads[k++];
                    if (!g) continue; /* not reached: a zero row */
                    g = tg_contiguous(tg_tensor_to(tg_cast(g, TG_FLOAT64), TG_CPU));
                    if (!g) {
                        status = TG_ERROR;
                        break;
                    }
                    for (long e = 0; e < tg_numel(inputs[i]); e++)
                        analytic[i][j * tg_numel(inputs[i]) + e] = ((double *)tg_data_ptr(g))[e];
                }
            }
        }
        /* Numeric Jacobian, one column per input element. */
        for (int i = 0; status == TG_OK && i < n; i++) {
            if (!inputs[i]->requires_grad) continue;
            long in_numel = (long)tg_numel(inputs[i]);
            for (long e = 0; status == TG_OK && e < in_numel; e++) {
                tg_tensor *x = inputs[i];
                double saved = 0;
                if (read_element(x, e, &saved)) status = TG_ERROR;
                TG_SCOPE {
                    tg_tensor *plus = NULL, *minus = NULL;
                    if (!status && !write_element(x, e, saved + eps)) plus = evaluate(fn, inputs, opts->user);
                    if (!status && !write_element(x, e, saved - eps)) minus = evaluate(fn, inputs, opts->user);
                    if (write_element(x, e, saved) || !plus || !minus) status = TG_ERROR;
                    for (long j = 0; status == TG_OK && j < out_numel; j++) {
                        double numeric =
                            (((double *)tg_data_ptr(plus))[j] - ((double *)tg_data_ptr(minus))[j]) / (2 * eps);
                        double a = analytic[i][j * in_numel + e], err = fabs(a - numeric);
                        double excess = err - (atol + rtol * fabs(numeric));
                        /* Report the worst violation if there is one, else the largest error. */
                        bool worse = worst_excess > 0 ? excess > worst_excess : excess > 0 || err > opts->worst_error;
                        if (worse) {
                            worst_excess = excess;
                            opts->worst_input = i;
                            opts->worst_element = e;
                            opts->worst_analytic = a;
                            opts->worst_numeric = numeric;
                            opts->worst_error = err;
                        }
                    }
                }
            }
        }
        for (int i = 0; i < n; i++) free(analytic[i]);
        if (status == TG_OK && worst_excess > 0)
            status = tg_error("tg_gradcheck: Jacobian mismatch for input %d, element %ld: analytic %.10g vs "
                              "numeric %.10g (|difference| %.3g > atol %.1g + rtol %.1g * |numeric|)",
                              opts->worst_input, opts->worst_element, opts->worst_analytic, opts->worst_numeric,
                              opts->worst_error, atol, rtol);
    }
    return status;
}

/* gradgradcheck: the first-order gradients, projected on fixed random weights,
 * as a function of (inputs..., grad_output). */
typedef struct {
    tg_gradcheck_fn fn;
    void *user;
    int n;
    tg_tensor *weights[MAX_INPUTS];
} projection;

static tg_tensor *projected_gradient(tg_tensor *const *args, void *vctx) {
    projection *p = vctx;
    /* The first-order gradients need a graph even when the caller evaluates this
     * under no-grad (the finite differences do). */
    bool grad_was = tg_set_grad_enabled(true);
    tg_tensor *y = p->fn(args, p->user);
    if (!y) {
        tg_set_grad_enabled(grad_was);
        return NULL;
    }
    tg_tensor *checked[MAX_INPUTS], *grads[MAX_INPUTS] = {0};
    int idx[MAX_INPUTS], m = 0;
    for (int i = 0; i < p->n; i++)
        if (args[i]->requires_grad) checked[m] = args[i], idx[m++] = i;
    tg_tensor *grad_output = args[p->n];
    tg_status s = tg_grad_of(&y, &grad_output, 1, checked, m, grads, (tg_backward_opts){.create_graph = true});
    tg_tensor *total =
        s ? NULL : tg_zeros(TG_SCALAR_SHAPE, (tg_opts){.dtype = TG_FLOAT64, .device = y->storage->device});
    for (int k = 0; total && k < m; k++)
        if (grads[k]) total = tg_add(total, tg_sum(tg_mul(grads[k], p->weights[idx[k]])));
    tg_set_grad_enabled(grad_was);
    return total;
}

static tg_tensor *random_like(tg_shape shape, uint64_t counter) {
    tg_tensor *t = tg_empty(shape, (tg_opts){.dtype = TG_FLOAT64});
    double *d = tg_data_ptr(t);
    for (int64_t i = 0; i < tg_numel(t); i++) {
        uint32_t bits[4];
        tg_philox(0x5eed, counter + (uint64_t)i, bits);
        d[i] = tg_uint_to_unit(bits[0]) * 2 - 1;
    }
    return t;
}

tg_status tg_gradgradcheck(tg_gradcheck_fn fn, int n, tg_tensor *const *inputs, tg_gradcheck_opts *opts) {
    if (n >= MAX_INPUTS) return tg_error("tg_gradgradcheck: at most %d inputs", MAX_INPUTS - 1);
    tg_status status = TG_ERROR;
    TG_SCOPE {
        projection p = {.fn = fn, .user = opts ? opts->user : NULL, .n = n};
        tg_tensor *y = NULL;
        TG_NO_GRAD { y = fn(inputs, p.user); }
        if (y) {
            tg_tensor *args[MAX_INPUTS];
            for (int i = 0; i < n; i++) {
                args[i] = inputs[i];
                p.weights[i] =
                    tg_tensor_to(random_like(inputs[i]->shape, 1000u * (uint64_t)(i + 1)), inputs[i]->storage->device);
            }
            args[n] = tg_requires_grad_(tg_tensor_to(random_like(y->shape, 7), y->storage->device), true);
            tg_gradcheck_opts o = opts ? *opts : (tg_gradcheck_opts){0};
            o.user = &p;
            status = tg_gradcheck(projected_gradient, n + 1, args, &o);
            if (opts) {
                void *user = opts->user;
                *opts = o;
                opts->user = user;
            }
        }
    }
    return status;
}
