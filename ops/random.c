/* Random tensors, dropout and torch.nn.init initialisers.
 *
 * Numbers come from Philox4x32-10 (core/rng.h). Each call reserves a block of
 * counters with tg_rng_reserve and element i always reads the same counter and
 * words (note "philox layout"), so a seed gives the same tensor whatever the
 * thread count or chunking:
 *   float32 uniform, bernoulli:  counter offset + i/4, word i%4
 *   float64 uniform, randint:    counter offset + i/2, words 2(i%2), 2(i%2)+1
 *   normal (both dtypes):        counter offset + i/4; Box-Muller on words (0,1)
 *                                for elements 0-1 and on (2,3) for elements 2-3
 * CUDA tensors are filled on the CPU and copied (a device kernel may replace this
 * later; it would use the same layout, see ops/cuda/random.h). */
#include "ops/random.h"

#include <math.h>

#include "autograd/grad.h"
#include "core/rng.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/cuda/random.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

#define RANDOM_GRAIN 16384

typedef enum { DIST_UNIFORM, DIST_NORMAL, DIST_RANDINT, DIST_BERNOULLI } dist_kind;

typedef struct {
    dist_kind kind;
    double a, b; /* uniform [a, b), normal (mean a, std b), randint [a, a + range) */
    uint64_t range;
    const double *p; /* bernoulli: probability per element */
} dist;

static uint64_t counters_needed(dist_kind kind, tg_dtype dtype, int64_t n) {
    bool two_words = kind == DIST_RANDINT || (kind == DIST_UNIFORM && dtype == TG_FLOAT64);
    return two_words ? (uint64_t)(n + 1) / 2 : (uint64_t)(n + 3) / 4;
}

static double unit53(uint32_t hi, uint32_t lo) { /* [0, 1) with 53 random bits */
    return (double)(((uint64_t)hi << 21) ^ (lo >> 11)) * (1.0 / 9007199254740992.0);
}

/* The value of element i under the layout above. */
static inline double draw(const dist *d, tg_dtype dtype, tg_rng_state s, int64_t i) {
    uint32_t w[4];
    switch (d->kind) {
    case DIST_UNIFORM:
        if (dtype == TG_FLOAT64) {
            tg_philox(s.seed, s.offset + (uint64_t)i / 2, w);
            int k = 2 * (int)(i % 2);
            return d->a + (d->b - d->a) * unit53(w[k], w[k + 1]);
        } else {
            tg_philox(s.seed, s.offset + (uint64_t)i / 4, w);
            double u = (double)(w[i % 4] >> 8) * (1.0 / 16777216.0); /* 24 bits: float's mantissa */
            double v = d->a + (d->b - d->a) * u;
            /* Rounding to float may reach b; keep the interval half-open as torch.rand does. */
            if ((float)v >= (float)d->b && d->b > d->a) v = nextafterf((float)d->b, (float)d->a);
            return v;
        }
    case DIST_NORMAL: {
        tg_philox(s.seed, s.offset + (uint64_t)i / 4, w);
        int k = (int)(i % 4) / 2 * 2;
        double r = sqrt(-2.0 * log(tg_uint_to_unit(w[k])));
        double theta = 6.283185307179586476925 * tg_uint_to_unit(w[k + 1]);
        return d->a + d->b * (i % 2 == 0 ? r * cos(theta) : r * sin(theta));
    }
    case DIST_RANDINT: {
        tg_philox(s.seed, s.offset + (uint64_t)i / 2, w);
        int k = 2 * (int)(i % 2);
        uint64_t bits = ((uint64_t)w[k] << 32) | w[k + 1];
        return d->a + (double)(bits % d->range);
    }
    case DIST_BERNOULLI: {
        tg_philox(s.seed, s.offset + (uint64_t)i / 4, w);
        return (double)w[i % 4] * (1.0 / 4294967296.0) < d->p[i] ? 1.0 : 0.0;
    }
    }
    return 0;
}

/* Fills the contiguous CPU tensor t. */
static void fill_contiguous(tg_tensor *t, const dist *d) {
    int64_t n = t->shape.ndim ? tg_shape_numel(t->shape) : 1;
    tg_rng_state s = tg_rng_reserve(counters_needed(d->kind, t->dtype, n));
    void *data = tg_elem_ptr(t);
    switch (t->dtype) {
    case TG_FLOAT32: {
        float *o = data;
#pragma omp parallel for if (n >= RANDOM_GRAIN)
        for (int64_t i = 0; i < n; i++) o[i] = (float)draw(d, t->dtype, s, i);
        break;
    }
    case TG_FLOAT64: {
        double *o = data;
#pragma omp parallel for if (n >= RANDOM_GRAIN)
        for (int64_t i = 0; i < n; i++) o[i] = draw(d, t->dtype, s, i);
        break;
    }
    case TG_INT64: { /* randint: exact in int64 even beyond 2^53 */
        int64_t *o = data;
#pragma omp parallel for if (n >= RANDOM_GRAIN)
        for (int64_t i = 0; i < n; i++) {
            uint32_t w[4];
            tg_philox(s.seed, s.offset + (uint64_t)i / 2, w);
            int k = 2 * (int)(i % 2);
            uint64_t bits = ((uint64_t)w[k] << 32) | w[k + 1];
            o[i] = (int64_t)d->a + (int64_t)(bits % d->range);
        }
        break;
    }
    default: {
        size_t es = tg_dtype_size(t->dtype);
#pragma omp parallel for if (n >= RANDOM_GRAIN)
        for (int64_t i = 0; i < n; i++) {
            double v = draw(d, t->dtype, s, i);
            char *p = (char *)data + i * (int64_t)es;
            switch (t->dtype) {
            case TG_INT32: *(int32_t *)p = (int32_t)v; break;
            case TG_UINT8: *(uint8_t *)p = (uint8_t)v; break;
            case TG_BOOL: *(bool *)p = v != 0; break;
            default: break;
            }
        }
    }
    }
}

/* Fills any tensor in place (staging through a contiguous CPU tensor when needed). */
static tg_status fill(tg_tensor *t, const dist *d) {
    if (t->storage->device.kind == TG_DEVICE_CPU && tg_is_contiguous(t)) {
        fill_contiguous(t, d);
        tg_bump_version(t);
        return TG_OK;
    }
    if (t->storage->device.kind == TG_DEVICE_CUDA && tg_cuda_random_fill && tg_is_contiguous(t) &&
        (d->kind == DIST_UNIFORM || d->kind == DIST_NORMAL) && tg_dtype_is_floating(t->dtype)) {
        int64_t n = t->shape.ndim ? tg_shape_numel(t->shape) : 1;
        tg_rng_state s = tg_rng_reserve(counters_needed(d->kind, t->dtype, n));
        if (tg_cuda_random_fill(t, d->kind == DIST_UNIFORM ? 0 : 1, d->a, d->b, s.seed, s.offset)) return TG_ERROR;
        tg_bump_version(t);
        return TG_OK;
    }
    tg_status status = TG_OK;
    TG_SCOPE {
        tg_tensor *tmp = tg_empty(t->shape, (tg_opts){.dtype = t->dtype});
        if (tmp) fill_contiguous(tmp, d);
        status = tmp ? tg_copy_(t, tmp) : TG_ERROR;
    }
    return status;
}

static tg_tensor *make_random(const char *op, tg_shape shape, tg_opts opts, const dist *d) {
    if (tg_check_creation(op, shape, opts)) return NULL;
    bool want_grad = opts.requires_grad;
    opts.requires_grad = false;
    tg_tensor *t = tg_empty(shape, opts);
    if (!t || fill(t, d)) return NULL;
    return want_grad ? tg_requires_grad(t, true) : t;
}

static tg_status check_floating(const char *op, tg_dtype dtype) {
    if (tg_dtype_is_floating(dtype) && tg_dtype_is_supported(dtype)) return TG_OK;
    return tg_error("%s: expected a floating dtype (float32 or float64), got %s", op, tg_dtype_name(dtype));
}

tg_tensor *tg_rand(tg_shape shape, tg_opts opts) {
    if (check_floating("tg_rand", opts.dtype)) return NULL;
    dist d = {.kind = DIST_UNIFORM, .a = 0, .b = 1};
    return make_random("tg_rand", shape, opts, &d);
}

tg_tensor *tg_randn(tg_shape shape, tg_opts opts) {
    if (check_floating("tg_randn", opts.dtype)) return NULL;
    dist d = {.kind = DIST_NORMAL, .a = 0, .b = 1};
    return make_random("tg_randn", shape, opts, &d);
}

tg_tensor *tg_randint(int64_t low, int64_t high, tg_shape shape, tg_opts opts) {
    if (high <= low)
        return tg_error("tg_randint: expected low < high, got low %lld, high %lld", (long long)low, (long long)high),
               NULL;
    if (opts.dtype == TG_FLOAT32) opts.dtype = TG_INT64; /* the zeroed default means int64 here */
    if (opts.requires_grad) return tg_error("tg_randint: integer tensors cannot require grad"), NULL;
    dist d = {.kind = DIST_RANDINT, .a = (double)low, .range = (uint64_t)(high - low)};
    return make_random("tg_randint", shape, opts, &d);
}

tg_tensor *tg_bernoulli(tg_tensor *p) {
    if (!p) return tg_error_null_input("tg_bernoulli", 0), NULL;
    if (check_floating("tg_bernoulli", p->dtype)) return NULL;
    tg_tensor *out = NULL;
    if (p->storage->device.kind == TG_DEVICE_CUDA && tg_cuda_bernoulli) { /* drawn on the device */
        TG_SCOPE {
            tg_tensor *probs = tg_contiguous(tg_detach(p));
            tg_tensor *draws = probs ? tg_empty(p->shape, (tg_opts){.dtype = p->dtype, .device = p->storage->device})
                                     : NULL;
            int64_t n = tg_numel(p);
            tg_rng_state s = tg_rng_reserve((uint64_t)(n + 3) / 4); /* as fill_contiguous's DIST_BERNOULLI */
            if (draws && !tg_cuda_bernoulli(draws, probs, s.seed, s.offset)) out = tg_scope_return(draws);
        }
        return out;
    }
    TG_SCOPE {
        tg_tensor *probs = tg_contiguous(tg_tensor_to(tg_cast(tg_detach(p), TG_FLOAT64), TG_CPU));
        tg_tensor *cpu = probs ? tg_empty(p->shape, (tg_opts){.dtype = p->dtype}) : NULL;
        if (cpu) {
            dist d = {.kind = DIST_BERNOULLI, .p = tg_data_ptr(probs)};
            fill_contiguous(cpu, &d);
            out = tg_scope_return(tg_tensor_to(cpu, p->storage->device));
        }
    }
    return out;
}

tg_status tg_uniform_(tg_tensor *t, double low, double high) {
    if (!t) return tg_error_null_input("tg_uniform_", 0);
    if (check_floating("tg_uniform_", t->dtype)) return TG_ERROR;
    if (!(low <= high)) return tg_error("tg_uniform_: expected low <= high, got %g and %g", low, high);
    dist d = {.kind = DIST_UNIFORM, .a = low, .b = high};
    return fill(t, &d);
}

tg_status tg_normal_(tg_tensor *t, double mean, double std) {
    if (!t) return tg_error_null_input("tg_normal_", 0);
    if (check_floating("tg_normal_", t->dtype)) return TG_ERROR;
    if (!(std >= 0)) return tg_error("tg_normal_: expected std >= 0, got %g", std);
    dist d = {.kind = DIST_NORMAL, .a = mean, .b = std};
    return fill(t, &d);
}

/* ---- dropout ---- */

tg_tensor *tg_dropout(tg_tensor *x, double p, bool training) {
    if (!x) return tg_error_null_input("tg_dropout", 0), NULL;
    if (!(p >= 0 && p <= 1))
        return tg_error("tg_dropout: dropout probability has to be between 0 and 1, but got %g", p), NULL;
    if (check_floating("tg_dropout", x->dtype)) return NULL;
    if (!training || p == 0) return tg_scope_track(tg_retain(x)); /* identity, as F.dropout */
    tg_tensor *out = NULL;
    TG_SCOPE {
        /* mask = keep / (1 - p), keep ~ Bernoulli(1 - p); the product's backward
         * multiplies the gradient by the saved mask. p == 1 keeps nothing (zeros). */
        tg_tensor *mask = NULL;
        double scale = 1.0 / (1.0 - p);
        uint64_t threshold = (uint64_t)(p * 4294967296.0); /* drop when word < p * 2^32 */
        if (p == 1) {
            mask = tg_zeros(x->shape, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
        } else if (x->storage->device.kind == TG_DEVICE_CUDA && tg_cuda_dropout_mask) { /* the same mask, drawn there */
            mask = tg_empty(x->shape, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
            tg_rng_state s = tg_rng_reserve((uint64_t)(tg_numel(x) + 3) / 4);
            if (mask && tg_cuda_dropout_mask(mask, threshold, scale, s.seed, s.offset)) mask = NULL;
        } else {
            tg_tensor *cpu = tg_empty(x->shape, (tg_opts){.dtype = x->dtype});
            if (cpu) {
                int64_t n = tg_numel(cpu);
                tg_rng_state s = tg_rng_reserve((uint64_t)(n + 3) / 4);
                if (cpu->dtype == TG_FLOAT32) {
                    float *m = tg_data_ptr(cpu);
#pragma omp parallel for if (n >= RANDOM_GRAIN)
                    for (int64_t i = 0; i < n; i++) {
                        uint32_t w[4];
                        tg_philox(s.seed, s.offset + (uint64_t)i / 4, w);
                        m[i] = w[i % 4] < threshold ? 0.0f : (float)scale;
                    }
                } else {
                    double *m = tg_data_ptr(cpu);
#pragma omp parallel for if (n >= RANDOM_GRAIN)
                    for (int64_t i = 0; i < n; i++) {
                        uint32_t w[4];
                        tg_philox(s.seed, s.offset + (uint64_t)i / 4, w);
                        m[i] = w[i % 4] < threshold ? 0.0 : scale;
                    }
                }
                mask = tg_tensor_to(cpu, x->storage->device);
            }
        }
        if (mask) out = tg_scope_return(tg_mul(x, mask));
    }
    return out;
}

/* ---- torch.nn.init ---- */

tg_status tg_calculate_fans(tg_shape shape, int64_t *fan_in, int64_t *fan_out) {
    if (shape.ndim < 2) {
        char buf[128];
        return tg_error("tg_calculate_fans: fan in and fan out can not be computed for a tensor with fewer "
                        "than 2 dimensions, got %s", tg_shape_str(shape, buf, sizeof buf));
    }
    int64_t receptive = 1;
    for (int d = 2; d < shape.ndim; d++) receptive *= shape.dims[d];
    if (fan_in) *fan_in = shape.dims[1] * receptive;
    if (fan_out) *fan_out = shape.dims[0] * receptive;
    return TG_OK;
}

static tg_status fans(const char *op, tg_shape shape, int64_t *fan_in, int64_t *fan_out) {
    if (shape.ndim >= 2) return tg_calculate_fans(shape, fan_in, fan_out);
    char buf[128];
    return tg_error("%s: fan in and fan out can not be computed for a tensor with fewer than 2 dimensions, "
                    "got %s", op, tg_shape_str(shape, buf, sizeof buf));
}

/* torch.nn.init.calculate_gain('leaky_relu', a) = sqrt(2 / (1 + a^2)). */
static tg_status kaiming_std(const char *op, tg_tensor *t, double a, tg_fan_mode mode, double *std) {
    if (!t) return tg_error_null_input(op, 0);
    if (check_floating(op, t->dtype)) return TG_ERROR;
    int64_t fan_in = 0, fan_out = 0;
    if (fans(op, t->shape, &fan_in, &fan_out)) return TG_ERROR;
    int64_t fan = mode == TG_FAN_OUT ? fan_out : fan_in;
    if (fan == 0) return tg_error("%s: cannot initialise a tensor with zero elements", op);
    *std = sqrt(2.0 / (1.0 + a * a)) / sqrt((double)fan);
    return TG_OK;
}

tg_status tg_kaiming_uniform_(tg_tensor *t, double a, tg_fan_mode mode) {
    double std;
    if (kaiming_std("tg_kaiming_uniform_", t, a, mode, &std)) return TG_ERROR;
    double bound = sqrt(3.0) * std;
    return tg_uniform_(t, -bound, bound);
}

tg_status tg_kaiming_normal_(tg_tensor *t, double a, tg_fan_mode mode) {
    double std;
    if (kaiming_std("tg_kaiming_normal_", t, a, mode, &std)) return TG_ERROR;
    return tg_normal_(t, 0, std);
}

static tg_status xavier_std(const char *op, tg_tensor *t, double gain, double *std) {
    if (!t) return tg_error_null_input(op, 0);
    if (check_floating(op, t->dtype)) return TG_ERROR;
    int64_t fan_in = 0, fan_out = 0;
    if (fans(op, t->shape, &fan_in, &fan_out)) return TG_ERROR;
    if (fan_in + fan_out == 0) return tg_error("%s: cannot initialise a tensor with zero elements", op);
    *std = gain * sqrt(2.0 / (double)(fan_in + fan_out));
    return TG_OK;
}

tg_status tg_xavier_uniform_(tg_tensor *t, double gain) {
    double std;
    if (xavier_std("tg_xavier_uniform_", t, gain, &std)) return TG_ERROR;
    double a = sqrt(3.0) * std;
    return tg_uniform_(t, -a, a);
}

tg_status tg_xavier_normal_(tg_tensor *t, double gain) {
    double std;
    if (xavier_std("tg_xavier_normal_", t, gain, &std)) return TG_ERROR;
    return tg_normal_(t, 0, std);
}
