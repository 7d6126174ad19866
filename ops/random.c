/* Random tensors, dropout, the generator's state and torch.nn.init initialisers.
 *
 * CPU tensors draw from the mt19937 generator (core/rng.h) exactly as ATen's CPU
 * kernels do in PyTorch 1.13 (core/DistributionsHelper.h, core/TransformationHelper.h,
 * native/cpu/DistributionTemplates.h), one element after another in order, so the
 * numbers are PyTorch's for the same seed:
 *   uniform [a, b)  float32: 24 bits of one word, u * (b - a) + a fused, in float;
 *                   float64: 53 bits of a 64-bit draw, likewise in double
 *   normal          16 or more elements, contiguous: normal_fill (uniforms of the dtype,
 *                   Box-Muller in blocks of 16, the last block redrawn when n % 16 != 0;
 *                   float32 with ATen's AVX2 log and sincos, ops/cpu/random_normal_f32.c);
 *                   otherwise normal_distribution<double>, which keeps its second value
 *   randint         word % range (a 64-bit draw when range >= 2^32) + low
 *   bernoulli(p)    a uniform of p's dtype < p; bernoulli_(scalar p): a 53-bit uniform < p
 *   dropout         keep where a 53-bit uniform < 1 - p (bernoulli_(1 - p))
 *   randperm        Fisher-Yates from the bottom: swap i with i + word % (n - i)
 * A non-contiguous tensor is drawn in memory order, as PyTorch's TensorIterator does.
 * CUDA tensors draw from the Philox generator on the device (ops/cuda/random.h). */
#include "ops/random_impl.h"

#include <math.h>
#include <string.h>

#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "core/rng_impl.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "onnx/graph.h"
#include "ops/cuda/random.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/cpu/random_normal_f32.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/sort.h"

typedef enum { DIST_UNIFORM, DIST_NORMAL, DIST_RANDINT, DIST_BERNOULLI, DIST_BERNOULLI_SCALAR } dist_kind;

typedef struct {
    dist_kind kind;
    /* uniform [a, b), normal (mean a, std b), randint [a, a + range), bernoulli with a
     * scalar p = a, b where drawn (1; dropout's 1 / (1 - p)) */
    double a, b;
    uint64_t range;
    const void *p; /* bernoulli: probability per element, contiguous, of the output's dtype */
} dist;

/* ---- the CPU draws ---- */

static inline float unit_f32(tg_mt19937 *g) { return (float)(tg_mt19937_next(g) & 0xFFFFFFu) * 0x1p-24f; }
static inline double unit_f64(tg_mt19937 *g) { return (double)(tg_mt19937_next64(g) & 0x1FFFFFFFFFFFFFull) * 0x1p-53; }

/* at::normal_distribution<double>: Box-Muller on two uniforms, the sine kept for the next call. */
static double normal_f64(tg_rng_state *s) {
    if (s->has_next_normal) {
        s->has_next_normal = false;
        return s->next_normal;
    }
    double u1 = unit_f64(&s->cpu), u2 = unit_f64(&s->cpu);
    double r = sqrt(-2.0 * log(1.0 - u2)), theta = 2.0 * M_PI * u1;
    s->next_normal = r * sin(theta);
    s->has_next_normal = true;
    return r * cos(theta);
}

/* randint's word: a 64-bit draw when the range needs it (ATen's random_from_to) */
static inline uint64_t randint_bits(tg_mt19937 *g, uint64_t range) {
    return range >= (1ull << 32) ? tg_mt19937_next64(g) : tg_mt19937_next(g);
}

/* uniform [from, to): u (to - from) + from with one rounding, as ATen's (fused) */
WITH_FMA_CLONE static void uniform_f32(tg_mt19937 *g, float *o, int64_t n, float from, float to) {
    for (int64_t i = 0; i < n; i++) o[i] = fmaf(unit_f32(g), to - from, from);
}

WITH_FMA_CLONE static void uniform_f64(tg_mt19937 *g, double *o, int64_t n, double from, double to) {
    for (int64_t i = 0; i < n; i++) o[i] = fma(unit_f64(g), to - from, from);
}

static void normal_16_f64(double *d, double mean, double std) {
    for (int j = 0; j < 8; j++) {
        double radius = sqrt(-2.0 * log(1.0 - d[j])), theta = 2.0 * M_PI * d[j + 8];
        d[j] = fma(radius * cos(theta), std, mean);
        d[j + 8] = fma(radius * sin(theta), std, mean);
    }
}

/* at::native normal_fill: every element a uniform first, then blocks of 16. */
static void normal_fill(tg_rng_state *s, tg_tensor *t, int64_t n, double mean, double std) {
    if (t->dtype == TG_FLOAT32) {
        float *o = tg_elem_ptr(t);
        for (int64_t i = 0; i < n; i++) o[i] = unit_f32(&s->cpu);
        tg_normal_blocks_f32(o, n / 16, (float)mean, (float)std);
        if (n % 16) { /* the last 16 again, from fresh uniforms */
            for (int64_t i = n - 16; i < n; i++) o[i] = unit_f32(&s->cpu);
            tg_normal_blocks_f32(o + n - 16, 1, (float)mean, (float)std);
        }
    } else {
        double *o = tg_elem_ptr(t);
        for (int64_t i = 0; i < n; i++) o[i] = unit_f64(&s->cpu);
        for (int64_t i = 0; i + 16 <= n; i += 16) normal_16_f64(o + i, mean, std);
        if (n % 16) {
            for (int64_t i = n - 16; i < n; i++) o[i] = unit_f64(&s->cpu);
            normal_16_f64(o + n - 16, mean, std);
        }
    }
}

/* One element, as a double: every dist but uniform (floating only: uniform_f32/f64)
 * and normal_fill's blocks. */
static double draw(tg_rng_state *s, const dist *d, tg_dtype dtype, int64_t i) {
    switch (d->kind) {
    case DIST_NORMAL: return fma(normal_f64(s), d->b, d->a);
    case DIST_RANDINT: return d->a + (double)(randint_bits(&s->cpu, d->range) % d->range);
    case DIST_BERNOULLI:
        if (dtype == TG_FLOAT32) return unit_f32(&s->cpu) < ((const float *)d->p)[i];
        return unit_f64(&s->cpu) < ((const double *)d->p)[i];
    case DIST_BERNOULLI_SCALAR: return unit_f64(&s->cpu) < d->a ? d->b : 0.0;
    case DIST_UNIFORM: break;
    }
    return 0;
}

/* Fills the contiguous CPU tensor t in element order. `strided_order`: t stands for a
 * non-contiguous tensor, which PyTorch's normal draws one element at a time. */
static void fill_contiguous(tg_tensor *t, const dist *d, bool strided_order) {
    int64_t n = tg_numel(t);
    void *data = tg_elem_ptr(t);
    tg_rng_state *s = tg_rng_lock_cpu();
    if (d->kind == DIST_NORMAL && n >= 16 && !strided_order) {
        normal_fill(s, t, n, d->a, d->b);
    } else if (d->kind == DIST_UNIFORM && t->dtype == TG_FLOAT32) {
        uniform_f32(&s->cpu, data, n, (float)d->a, (float)d->b);
    } else if (d->kind == DIST_UNIFORM && t->dtype == TG_FLOAT64) {
        uniform_f64(&s->cpu, data, n, d->a, d->b);
    } else if (d->kind == DIST_RANDINT && t->dtype == TG_INT64) { /* exact beyond 2^53 */
        int64_t *o = data;
        for (int64_t i = 0; i < n; i++)
            o[i] = (int64_t)((uint64_t)(int64_t)d->a + randint_bits(&s->cpu, d->range) % d->range);
    } else {
        size_t es = tg_dtype_size(t->dtype);
        for (int64_t i = 0; i < n; i++) {
            double v = draw(s, d, t->dtype, i);
            char *p = (char *)data + i * (int64_t)es;
            switch (t->dtype) {
            case TG_FLOAT32: *(float *)p = (float)v; break;
            case TG_FLOAT64: *(double *)p = v; break;
            case TG_INT64: *(int64_t *)p = (int64_t)v; break;
            case TG_INT32: *(int32_t *)p = (int32_t)v; break;
            case TG_UINT8: *(uint8_t *)p = (uint8_t)v; break;
            case TG_BOOL: *(bool *)p = v != 0; break;
            default: break;
            }
        }
    }
    tg_rng_unlock_cpu();
}

/* Philox counters a CUDA fill of n elements uses (ops/cuda/random.h's layout). */
static uint64_t cuda_counters(dist_kind kind, tg_dtype dtype, int64_t n) {
    return tg_philox_counters(n, kind == DIST_UNIFORM && dtype == TG_FLOAT64);
}

/* Fills any tensor in place (staging through a contiguous CPU tensor when needed). */
static tg_status fill(tg_tensor *t, const dist *d) {
    bool contiguous = tg_is_contiguous(t);
    if (t->storage->device.kind == TG_DEVICE_CPU && contiguous) {
        fill_contiguous(t, d, false);
        tg_bump_version(t);
        return TG_OK;
    }
    if (tg_on_cuda(t) && tg_cuda_random_fill && contiguous && (d->kind == DIST_UNIFORM || d->kind == DIST_NORMAL) &&
        tg_dtype_is_floating(t->dtype)) {
        tg_philox_range r = tg_rng_reserve_cuda(cuda_counters(d->kind, t->dtype, tg_numel(t)));
        if (tg_cuda_random_fill(t, d->kind == DIST_UNIFORM ? 0 : 1, d->a, d->b, r.seed, r.offset)) return TG_ERROR;
        tg_bump_version(t);
        return TG_OK;
    }
    /* Staged on the CPU in t's memory order (dims by decreasing stride), the order in
     * which PyTorch's TensorIterator visits a non-contiguous tensor. */
    int order[TG_MAX_DIMS];
    for (int i = 0; i < t->shape.ndim; i++) order[i] = i;
    for (int i = 1; i < t->shape.ndim; i++)
        for (int j = i; j > 0 && t->strides[order[j - 1]] < t->strides[order[j]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    tg_status status = TG_OK;
    TG_SCOPE {
        tg_tensor *view = tg_permute(t, order);
        tg_tensor *tmp = view ? tg_empty(view->shape, (tg_opts){.dtype = t->dtype}) : NULL;
        if (tmp) fill_contiguous(tmp, d, !contiguous);
        status = tmp ? tg_copy_values_(view, tmp) : TG_ERROR;
    }
    return status;
}

static tg_tensor *make_random(const char *op, tg_shape shape, tg_opts opts, const dist *d) {
    if (tg_check_creation(op, shape, opts)) return NULL;
    bool want_grad = opts.requires_grad;
    opts.requires_grad = false;
    tg_tensor *t = tg_empty(shape, opts);
    if (!t || fill(t, d)) return NULL;
    return want_grad ? tg_requires_grad_(t, true) : t;
}

static tg_status check_floating(const char *op, tg_dtype dtype) {
    if (tg_dtype_is_floating(dtype) && !tg_dtype_is_low_precision(dtype)) return TG_OK;
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
    dist d = {.kind = DIST_RANDINT, .a = (double)low, .range = (uint64_t)high - (uint64_t)low};
    return make_random("tg_randint", shape, opts, &d);
}

/* A tensor like `like` (shape, dtype, device), filled from d. */
static tg_tensor *random_like(tg_tensor *like, const dist *d) {
    tg_tensor *t = tg_empty_like(like);
    return t && !fill(t, d) ? t : NULL;
}

/* rand_like / randn_like as an op of their own (no gradient), so that a model that
 * samples in its forward (a VAE's reparameterisation) is exported with ONNX's
 * RandomUniformLike / RandomNormalLike instead of the example's draw as a constant. */
static tg_tensor *random_like_forward(tg_ctx *ctx, tg_tensor *const *in) {
    return random_like(in[0], tg_ctx_attrs(ctx));
}

static tg_status random_like_onnx(tg_onnx_op *op) {
    const dist *d = tg_onnx_attrs(op);
    bool normal = d->kind == DIST_NORMAL;
    tg_onnx_node *n = tg_onnx_add_node_same(op, normal ? "RandomNormalLike" : "RandomUniformLike");
    tg_onnx_attr_float(n, normal ? "mean" : "low", (float)d->a);
    tg_onnx_attr_float(n, normal ? "scale" : "high", (float)d->b);
    return n ? TG_OK : TG_ERROR;
}

static const tg_function random_like_fn = {.name = "random_like",
                                           .num_inputs = 1,
                                           .forward = random_like_forward,
                                           .low_precision = TG_LOW_PRECISION_NATIVE,
                                           .onnx = random_like_onnx};

tg_tensor *tg_rand_like(tg_tensor *like) {
    if (tg_unusable_(like)) return tg_error_unusable_input("tg_rand_like", like, 0), NULL;
    if (check_floating("tg_rand_like", like->dtype)) return NULL;
    dist d = {.kind = DIST_UNIFORM, .a = 0, .b = 1};
    return tg_apply_args(&random_like_fn, &like, &d, sizeof d);
}

tg_tensor *tg_randn_like(tg_tensor *like) {
    if (tg_unusable_(like)) return tg_error_unusable_input("tg_randn_like", like, 0), NULL;
    if (check_floating("tg_randn_like", like->dtype)) return NULL;
    dist d = {.kind = DIST_NORMAL, .a = 0, .b = 1};
    return tg_apply_args(&random_like_fn, &like, &d, sizeof d);
}

tg_tensor *tg_randint_like(tg_tensor *like, int64_t low, int64_t high) {
    if (tg_unusable_(like)) return tg_error_unusable_input("tg_randint_like", like, 0), NULL;
    if (high <= low)
        return tg_error("tg_randint_like: expected low < high, got low %lld, high %lld", (long long)low,
                        (long long)high),
               NULL;
    if (like->dtype == TG_BOOL || like->dtype == TG_UINT8)
        return tg_error("tg_randint_like: %s is not supported (int32, int64, float32 or float64)",
                        tg_dtype_name(like->dtype)),
               NULL;
    dist d = {.kind = DIST_RANDINT, .a = (double)low, .range = (uint64_t)high - (uint64_t)low};
    return random_like(like, &d);
}

tg_tensor *tg_randperm(int64_t n, tg_opts opts) {
    if (n < 0) return tg_error("tg_randperm: n must be non-negative, got %lld", (long long)n), NULL;
    if (n >= (1ll << 32)) return tg_error("tg_randperm: n = %lld is too large (at most 2^32 - 1)", (long long)n), NULL;
    if (opts.dtype == TG_FLOAT32) opts.dtype = TG_INT64; /* as tg_randint */
    if (opts.requires_grad) return tg_error("tg_randperm: integer tensors cannot require grad"), NULL;
    if (tg_check_creation("tg_randperm", TG_SHAPE(n), opts)) return NULL;
    if (opts.dtype != TG_INT64 && opts.dtype != TG_INT32)
        return tg_error("tg_randperm: expected dtype int64 or int32, got %s", tg_dtype_name(opts.dtype)), NULL;
    tg_tensor *out = NULL;
    TG_SCOPE {
        tg_tensor *perm = tg_empty(TG_SHAPE(n), (tg_opts){.dtype = TG_INT64});
        if (perm) {
            tg_rng_state *s = tg_rng_lock_cpu();
            tg_mt19937_permutation(&s->cpu, tg_data_ptr(perm), n);
            tg_rng_unlock_cpu();
            tg_tensor *cast = opts.dtype == TG_INT64 ? perm : tg_cast(perm, opts.dtype);
            out = tg_scope_return(tg_tensor_to(cast, opts.device));
        }
    }
    return out;
}

tg_tensor *tg_bernoulli(tg_tensor *p) {
    if (tg_unusable_(p)) return tg_error_unusable_input("tg_bernoulli", p, 0), NULL;
    if (check_floating("tg_bernoulli", p->dtype)) return NULL;
    tg_tensor *out = NULL;
    if (tg_on_cuda(p) && tg_cuda_bernoulli) { /* drawn on the device */
        TG_SCOPE {
            tg_tensor *probs = tg_contiguous(tg_detach(p));
            tg_tensor *draws =
                probs ? tg_empty(p->shape, (tg_opts){.dtype = p->dtype, .device = p->storage->device}) : NULL;
            tg_philox_range r = tg_rng_reserve_cuda(tg_philox_counters(tg_numel(p), 0));
            if (draws && !tg_cuda_bernoulli(draws, probs, r.seed, r.offset)) out = tg_scope_return(draws);
        }
        return out;
    }
    TG_SCOPE {
        tg_tensor *probs = tg_contiguous(tg_tensor_to(tg_detach(p), TG_CPU));
        tg_tensor *cpu = probs ? tg_empty(p->shape, (tg_opts){.dtype = p->dtype}) : NULL;
        if (cpu) {
            dist d = {.kind = DIST_BERNOULLI, .p = tg_data_ptr(probs)};
            fill_contiguous(cpu, &d, false);
            out = tg_scope_return(tg_tensor_to(cpu, p->storage->device));
        }
    }
    return out;
}

/* The in-place rules (ops/inplace.h) around a fill: on a tensor of the graph, the
 * values are drawn into a tensor of t's layout (the same draw order) and recorded. */
static tg_status fill_inplace(const char *op, const tg_function *fn, tg_tensor *t, const dist *d,
                              tg_status (*draw)(tg_tensor *, const dist *)) {
    bool record = false;
    if (tg_inplace_check(op, t, NULL, 0, &record)) return TG_ERROR;
    if (!record) return draw(t, d);
    tg_status status = TG_ERROR;
    TG_SCOPE {
        tg_tensor *values = tg_empty_strided_like(t);
        if (values && !draw(values, d)) status = tg_inplace_overwrite(fn, t, values);
    }
    return status;
}

static const tg_function uniform_fn = TG_OVERWRITE_FUNCTION("uniform_");
static const tg_function normal_fn = TG_OVERWRITE_FUNCTION("normal_");
static const tg_function bernoulli_fn = TG_OVERWRITE_FUNCTION("bernoulli_");

tg_status tg_uniform_(tg_tensor *t, double low, double high) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_uniform_", t, 0);
    if (check_floating("tg_uniform_", t->dtype)) return TG_ERROR;
    if (!(low <= high)) return tg_error("tg_uniform_: expected low <= high, got %g and %g", low, high);
    dist d = {.kind = DIST_UNIFORM, .a = low, .b = high};
    return fill_inplace("tg_uniform_", &uniform_fn, t, &d, fill);
}

tg_status tg_normal_(tg_tensor *t, double mean, double std) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_normal_", t, 0);
    if (check_floating("tg_normal_", t->dtype)) return TG_ERROR;
    if (!(std >= 0)) return tg_error("tg_normal_: expected std >= 0, got %g", std);
    dist d = {.kind = DIST_NORMAL, .a = mean, .b = std};
    return fill_inplace("tg_normal_", &normal_fn, t, &d, fill);
}

static tg_status bernoulli_fill(tg_tensor *t, const dist *scalar_p);

tg_status tg_bernoulli_(tg_tensor *t, double p) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_bernoulli_", t, 0);
    if (!(p >= 0 && p <= 1)) return tg_error("tg_bernoulli_: expected p in [0, 1], but got p=%g", p);
    if (tg_dtype_is_low_precision(t->dtype))
        return tg_error("tg_bernoulli_: %s is not supported (draw in float32 and cast)", tg_dtype_name(t->dtype));
    dist d = {.kind = DIST_BERNOULLI_SCALAR, .a = p, .b = 1};
    return fill_inplace("tg_bernoulli_", &bernoulli_fn, t, &d, bernoulli_fill);
}

static tg_status bernoulli_fill(tg_tensor *t, const dist *scalar_p) {
    double p = scalar_p->a;
    if (tg_on_cuda(t) && tg_cuda_bernoulli && tg_dtype_is_floating(t->dtype) &&
        tg_is_contiguous(t)) { /* the device kernel, with p for every element */
        tg_status status = TG_ERROR;
        TG_SCOPE {
            tg_tensor *probs = tg_full(t->shape, p, (tg_opts){.dtype = t->dtype, .device = t->storage->device});
            tg_philox_range r = tg_rng_reserve_cuda(tg_philox_counters(tg_numel(t), 0));
            if (probs && !tg_cuda_bernoulli(t, probs, r.seed, r.offset)) {
                tg_bump_version(t);
                status = TG_OK;
            }
        }
        return status;
    }
    dist d = {.kind = DIST_BERNOULLI_SCALAR, .a = p, .b = 1};
    return fill(t, &d);
}

/* ---- the generator's state as bytes (torch.get_rng_state / set_rng_state) ---- */

#define RNG_STATE_MAGIC "tgrng01"
enum { RNG_STATE_BYTES = 8 + 8 + 8 + 4 + 4 + 8 + 624 * 4 };

tg_tensor *tg_get_rng_state(void) {
    tg_rng_state s = tg_rng_get_state();
    tg_tensor *t = tg_empty(TG_SHAPE(RNG_STATE_BYTES), (tg_opts){.dtype = TG_UINT8});
    if (!t) return NULL;
    unsigned char *b = tg_data_ptr(t);
    uint32_t has_next = s.has_next_normal;
    memcpy(b, RNG_STATE_MAGIC, 8);
    memcpy(b + 8, &s.seed, 8);
    memcpy(b + 16, &s.offset, 8);
    memcpy(b + 24, &s.cpu.index, 4);
    memcpy(b + 28, &has_next, 4);
    memcpy(b + 32, &s.next_normal, 8);
    memcpy(b + 40, s.cpu.words, 624 * 4);
    return t;
}

static tg_status parse_rng_state(tg_tensor *state, tg_rng_state *out) {
    if (tg_unusable_(state)) return tg_error_unusable_input("tg_set_rng_state", state, 0);
    char buf[64];
    if (state->dtype != TG_UINT8 || state->shape.ndim != 1 || state->shape.dims[0] != RNG_STATE_BYTES)
        return tg_error("tg_set_rng_state: expected a uint8 tensor of shape [%d] from tg_get_rng_state, got %s %s",
                        RNG_STATE_BYTES, tg_dtype_name(state->dtype), tg_shape_str(state->shape, buf, sizeof buf));
    tg_status status = TG_OK;
    TG_SCOPE {
        tg_tensor *bytes = tg_contiguous(tg_tensor_to(state, TG_CPU));
        const unsigned char *b = bytes ? tg_data_ptr(bytes) : NULL;
        tg_rng_state s;
        uint32_t has_next = 0;
        if (b) {
            memcpy(&s.seed, b + 8, 8);
            memcpy(&s.offset, b + 16, 8);
            memcpy(&s.cpu.index, b + 24, 4);
            memcpy(&has_next, b + 28, 4);
            memcpy(&s.next_normal, b + 32, 8);
            memcpy(s.cpu.words, b + 40, 624 * 4);
            s.has_next_normal = has_next == 1;
        }
        if (!b) {
            status = TG_ERROR;
        } else if (memcmp(b, RNG_STATE_MAGIC, 8) != 0 || s.cpu.index > 624 || has_next > 1) {
            status = tg_error("tg_set_rng_state: these bytes are not a state from tg_get_rng_state");
        } else {
            *out = s;
        }
    }
    return status;
}

tg_status tg_set_rng_state(tg_tensor *state) {
    tg_rng_state s;
    if (parse_rng_state(state, &s)) return TG_ERROR;
    tg_rng_set_state(s);
    return TG_OK;
}

tg_status tg_check_rng_state(tg_tensor *state) {
    tg_rng_state s;
    return parse_rng_state(state, &s);
}

/* ---- multinomial ---- */

/* q ~ Exp(1) of probs' shape and dtype: at::exponential_distribution<double>, cast (through
 * float for bf16/fp16, as static_cast from a double is). */
static tg_tensor *exponential_like(tg_tensor *probs) {
    tg_tensor *draws = tg_empty(probs->shape, (tg_opts){.dtype = TG_FLOAT64});
    if (!draws) return NULL;
    double *d = tg_data_ptr(draws);
    tg_rng_state *s = tg_rng_lock_cpu();
    for (int64_t i = 0; i < tg_numel(draws); i++) d[i] = -1.0 * log(1.0 - unit_f64(&s->cpu));
    tg_rng_unlock_cpu();
    if (probs->dtype == TG_FLOAT64) return draws;
    tg_tensor *f = tg_cast(draws, TG_FLOAT32);
    return probs->dtype == TG_FLOAT32 ? f : tg_cast(f, probs->dtype);
}

/* ATen's multinomial_with_replacement_apply on one row of k weights: the cumulative
 * distribution in the weights' type (float for float32 and for bf16/fp16 rows, which
 * arrive widened, as its specialisation accumulates in float), normalised, kept as
 * doubles (exactly), and a binary search for each uniform double. */
static void cumulative_float(const float *w, int64_t k, double *cum) {
    float sum = 0;
    for (int64_t j = 0; j < k; j++) cum[j] = sum += w[j];
    for (int64_t j = 0; j < k; j++) cum[j] = (float)cum[j] / sum;
}
static void cumulative_double(const double *w, int64_t k, double *cum) {
    double sum = 0;
    for (int64_t j = 0; j < k; j++) cum[j] = sum += w[j];
    for (int64_t j = 0; j < k; j++) cum[j] /= sum;
}
static void search_row(const double *cum, int64_t k, int64_t n, int64_t *out, tg_mt19937 *g) {
    for (int64_t j = 0; j < n; j++) {
        double u = unit_f64(g);
        int64_t left = 0, right = k;
        while (right > left) {
            int64_t mid = left + (right - left) / 2;
            if (cum[mid] < u) left = mid + 1;
            else right = mid;
        }
        out[j] = left;
    }
}

static tg_tensor *sample_with_replacement(tg_tensor *w, int64_t rows, int64_t k, int64_t n, tg_shape out_shape) {
    tg_tensor *out = tg_empty(out_shape, (tg_opts){.dtype = TG_INT64});
    tg_tensor *cum = out ? tg_empty(TG_SHAPE(k), (tg_opts){.dtype = TG_FLOAT64}) : NULL;
    if (!cum) return NULL;
    int64_t *o = tg_data_ptr(out);
    double *c = tg_data_ptr(cum);
    tg_rng_state *s = tg_rng_lock_cpu();
    for (int64_t r = 0; r < rows; r++) {
        if (w->dtype == TG_FLOAT64) cumulative_double((const double *)tg_data_ptr(w) + r * k, k, c);
        else cumulative_float((const float *)tg_data_ptr(w) + r * k, k, c);
        search_row(c, k, n, o + r * n, &s->cpu);
    }
    tg_rng_unlock_cpu();
    return out;
}

/* PyTorch's checks, on the weights as doubles (a CPU contiguous float64 copy). */
static tg_status check_weights(const char *op, tg_tensor *w64, int64_t rows, int64_t k) {
    const double *w = tg_data_ptr(w64);
    for (int64_t r = 0; r < rows; r++) {
        bool any = false;
        for (int64_t j = 0; j < k; j++) {
            double v = w[r * k + j];
            if (!(v >= 0) || isinf(v))
                return tg_error("%s: probability tensor contains either `inf`, `nan` or element < 0 (row %lld, "
                                "category %lld: %g)",
                                op, (long long)r, (long long)j, v);
            any |= v > 0;
        }
        if (!any)
            return tg_error("%s: invalid multinomial distribution (sum of probabilities <= 0) in row %lld", op,
                            (long long)r);
    }
    return TG_OK;
}

tg_tensor *tg_multinomial(tg_tensor *probs, int64_t num_samples, bool replacement) {
    const char *op = "tg_multinomial";
    if (tg_unusable_(probs)) return tg_error_unusable_input(op, probs, 0), NULL;
    char buf[64];
    if (probs->shape.ndim < 1 || probs->shape.ndim > 2)
        return tg_error("%s: prob_dist must be 1 or 2 dim, got %s", op, tg_shape_str(probs->shape, buf, sizeof buf)),
               NULL;
    if (!tg_dtype_is_floating(probs->dtype))
        return tg_error("%s: multinomial only supports floating-point dtypes for input, got %s", op,
                        tg_dtype_name(probs->dtype)),
               NULL;
    int64_t k = probs->shape.dims[probs->shape.ndim - 1];
    int64_t rows = probs->shape.ndim == 2 ? probs->shape.dims[0] : 1;
    if (num_samples <= 0)
        return tg_error("%s: cannot sample n_sample <= 0 samples (got %lld)", op, (long long)num_samples), NULL;
    if (!replacement && num_samples > k)
        return tg_error("%s: cannot sample n_sample > prob_dist.size(-1) samples without replacement (%lld > %lld)", op,
                        (long long)num_samples, (long long)k),
               NULL;
    if (k > (1 << 24))
        return tg_error("%s: number of categories cannot exceed 2^24 (got %lld)", op, (long long)k), NULL;
    tg_shape out_shape = probs->shape.ndim == 2 ? TG_SHAPE(rows, num_samples) : TG_SHAPE(num_samples);
    tg_tensor *out = NULL;
    TG_SCOPE {
        tg_tensor *w = tg_contiguous(tg_tensor_to(tg_detach(probs), TG_CPU));
        tg_tensor *w64 = w ? tg_cast(w, TG_FLOAT64) : NULL;
        if (!w64 || check_weights(op, w64, rows, k)) break;
        tg_tensor *picked;
        if (!replacement) { /* ATen's fast path: argmax / topk of p / q, q ~ Exp(1) */
            tg_tensor *q = exponential_like(w);
            tg_tensor *ratio = q ? tg_div(w, q) : NULL;
            /* bf16/fp16 ratios ranked as float32: the same values, so the same order */
            if (ratio && tg_dtype_is_low_precision_inline(ratio->dtype)) ratio = tg_cast(ratio, TG_FLOAT32);
            tg_tensor *top = NULL;
            if (ratio && num_samples == 1) top = tg_argmax(ratio, -1, true);
            else if (ratio) tg_topk(ratio, num_samples, -1, true, true, &top);
            picked = top;
        } else {
            bool wide = w->dtype == TG_FLOAT32 || w->dtype == TG_FLOAT64;
            tg_tensor *rows_w = wide ? w : tg_cast(w, TG_FLOAT32);
            picked = rows_w ? sample_with_replacement(rows_w, rows, k, num_samples, out_shape) : NULL;
        }
        if (picked) out = tg_scope_return(tg_tensor_to(picked, probs->storage->device));
    }
    return out;
}

/* ---- dropout ---- */

/* keep / (1 - p) with keep ~ Bernoulli(1 - p), of x's dtype and device, shaped
 * mask_shape (PyTorch: empty(...).bernoulli_(1 - p).div_(1 - p), the division in x's
 * dtype); p == 1 keeps nothing (zeros). A new reference in the current scope. */
static tg_tensor *dropout_mask(tg_tensor *x, tg_shape mask_shape, double p) {
    double keep = 1.0 - p, scale = x->dtype == TG_FLOAT32 ? (double)(1.0f / (float)keep) : 1.0 / keep;
    tg_opts opts = {.dtype = x->dtype, .device = x->storage->device};
    tg_tensor *mask = p == 1 ? tg_zeros(mask_shape, opts) : tg_empty(mask_shape, opts);
    if (mask && p < 1 && tg_on_cuda(x) && tg_cuda_dropout_mask) {
        uint64_t threshold = (uint64_t)(p * 4294967296.0); /* drop when word < p * 2^32 */
        tg_philox_range r = tg_rng_reserve_cuda(tg_philox_counters(tg_numel(mask), 0));
        if (tg_cuda_dropout_mask(mask, threshold, scale, r.seed, r.offset)) mask = NULL;
    } else if (mask && p < 1) {
        dist d = {.kind = DIST_BERNOULLI_SCALAR, .a = keep, .b = scale};
        if (fill(mask, &d)) mask = NULL;
    }
    return mask;
}

tg_tensor *tg_dropout(tg_tensor *x, double p, bool training) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_dropout", x, 0), NULL;
    if (!(p >= 0 && p <= 1))
        return tg_error("tg_dropout: dropout probability has to be between 0 and 1, but got %g", p), NULL;
    if (check_floating("tg_dropout", x->dtype)) return NULL;
    if (!training || p == 0) return tg_scope_track(tg_retain(x)); /* identity, as F.dropout */
    tg_tensor *out = NULL;
    TG_SCOPE {
        /* the product's backward multiplies the gradient by the saved mask */
        tg_tensor *mask = dropout_mask(x, tg_shape_of(x), p);
        if (mask) out = tg_scope_return(tg_mul(x, mask));
    }
    return out;
}

tg_tensor *tg_dropout2d(tg_tensor *x, double p, bool training) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_dropout2d", x, 0), NULL;
    if (!(p >= 0 && p <= 1))
        return tg_error("tg_dropout2d: dropout probability has to be between 0 and 1, but got %g", p), NULL;
    if (check_floating("tg_dropout2d", x->dtype)) return NULL;
    tg_shape shape = tg_shape_of(x);
    if (shape.ndim != 3 && shape.ndim != 4) {
        char buf[96];
        return tg_error("tg_dropout2d: input %s must be [N, C, H, W] (or [N, C, L])",
                        tg_shape_str(shape, buf, sizeof buf)),
               NULL;
    }
    if (!training || p == 0) return tg_scope_track(tg_retain(x));
    tg_tensor *out = NULL;
    TG_SCOPE {
        tg_shape mask_shape = shape; /* [N, C, 1, 1]: one draw per channel, broadcast over H, W */
        for (int d = 2; d < shape.ndim; d++) mask_shape.dims[d] = 1;
        tg_tensor *mask = dropout_mask(x, mask_shape, p);
        if (mask) out = tg_scope_return(tg_mul(x, mask));
    }
    return out;
}

/* ---- torch.nn.init ---- */

tg_status tg_calculate_fans(tg_shape shape, int64_t *fan_in, int64_t *fan_out) {
    if (shape.ndim < 2) {
        char buf[128];
        return tg_error("tg_calculate_fans: fan in and fan out can not be computed for a tensor with fewer "
                        "than 2 dimensions, got %s",
                        tg_shape_str(shape, buf, sizeof buf));
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
                    "got %s",
                    op, tg_shape_str(shape, buf, sizeof buf));
}

/* nn.init writes under no_grad, so that it can initialise a parameter that requires grad. */
static tg_status init_uniform(tg_tensor *t, double bound) {
    bool was = tg_set_grad_enabled(false);
    tg_status status = tg_uniform_(t, -bound, bound);
    tg_set_grad_enabled(was);
    return status;
}

static tg_status init_normal(tg_tensor *t, double std) {
    bool was = tg_set_grad_enabled(false);
    tg_status status = tg_normal_(t, 0, std);
    tg_set_grad_enabled(was);
    return status;
}

/* torch.nn.init.calculate_gain('leaky_relu', a) = sqrt(2 / (1 + a^2)). */
static tg_status kaiming_std(const char *op, tg_tensor *t, double a, tg_fan_mode mode, double *std) {
    if (tg_unusable_(t)) return tg_error_unusable_input(op, t, 0);
    if (check_floating(op, t->dtype)) return TG_ERROR;
    int64_t fan_in = 0, fan_out = 0;
    if (fans(op, t->shape, &fan_in, &fan_out)) return TG_ERROR;
    int64_t fan = mode == TG_FAN_OUT ? fan_out : fan_in;
    if (fan == 0) return tg_error("%s: cannot initialise a tensor with zero elements", op);
    *std = sqrt(2.0 / (1.0 + a * a)) / sqrt((double)fan);
    return TG_OK;
}

tg_status tg_kaiming_uniform_(tg_tensor *t, double a, tg_fan_mode mode) {
    double std = 0; /* set when the check passes; 0 keeps -Wmaybe-uninitialized quiet */
    if (kaiming_std("tg_kaiming_uniform_", t, a, mode, &std)) return TG_ERROR;
    return init_uniform(t, sqrt(3.0) * std);
}

tg_status tg_kaiming_normal_(tg_tensor *t, double a, tg_fan_mode mode) {
    double std = 0; /* set when the check passes; 0 keeps -Wmaybe-uninitialized quiet */
    if (kaiming_std("tg_kaiming_normal_", t, a, mode, &std)) return TG_ERROR;
    return init_normal(t, std);
}

static tg_status xavier_std(const char *op, tg_tensor *t, double gain, double *std) {
    if (tg_unusable_(t)) return tg_error_unusable_input(op, t, 0);
    if (check_floating(op, t->dtype)) return TG_ERROR;
    int64_t fan_in = 0, fan_out = 0;
    if (fans(op, t->shape, &fan_in, &fan_out)) return TG_ERROR;
    if (fan_in + fan_out == 0) return tg_error("%s: cannot initialise a tensor with zero elements", op);
    *std = gain * sqrt(2.0 / (double)(fan_in + fan_out));
    return TG_OK;
}

tg_status tg_xavier_uniform_(tg_tensor *t, double gain) {
    double std = 0; /* set when the check passes; 0 keeps -Wmaybe-uninitialized quiet */
    if (xavier_std("tg_xavier_uniform_", t, gain, &std)) return TG_ERROR;
    return init_uniform(t, sqrt(3.0) * std);
}

tg_status tg_xavier_normal_(tg_tensor *t, double gain) {
    double std = 0; /* set when the check passes; 0 keeps -Wmaybe-uninitialized quiet */
    if (xavier_std("tg_xavier_normal_", t, gain, &std)) return TG_ERROR;
    return init_normal(t, std);
}
