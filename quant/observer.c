/* Observers (quant/observer.h): PyTorch 1.13's arithmetic, step by step in float32 where
 * its tensor ops run in float32 (python scalars cast to float32), and in double
 * where it works on python floats (.item()). */
#include "quant/observer.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

typedef enum { MINMAX, MOVING_MINMAX, PER_CHANNEL, MOVING_PER_CHANNEL, HISTOGRAM } observer_kind;

typedef struct {
    observer_kind kind;
    tg_observer_info info;
    bool custom_range;
    float averaging_constant;
    int bins, upsample_rate, dst_nbins;
} observer_state;

static void observer_repr(tg_module *self, char *buf, size_t size);
static tg_tensor *observer_forward(tg_module *self, tg_tensor *x);

static const tg_module_type types[] = {
    [MINMAX] = {.name = "MinMaxObserver", .forward = observer_forward, .extra_repr = observer_repr},
    [MOVING_MINMAX] = {.name = "MovingAverageMinMaxObserver", .forward = observer_forward, .extra_repr = observer_repr},
    [PER_CHANNEL] = {.name = "PerChannelMinMaxObserver", .forward = observer_forward, .extra_repr = observer_repr},
    [MOVING_PER_CHANNEL] = {.name = "MovingAveragePerChannelMinMaxObserver",
                            .forward = observer_forward,
                            .extra_repr = observer_repr},
    [HISTOGRAM] = {.name = "HistogramObserver", .forward = observer_forward, .extra_repr = observer_repr},
};

bool tg_is_observer(tg_module *m) {
    const tg_module_type *t = m ? tg_module_type_of(m) : NULL;
    return t && t >= types && t < types + 5;
}

static const char *qscheme_name(tg_qscheme q) {
    switch (q) {
    case TG_PER_TENSOR_SYMMETRIC: return "per_tensor_symmetric";
    case TG_PER_CHANNEL_AFFINE: return "per_channel_affine";
    case TG_PER_CHANNEL_SYMMETRIC: return "per_channel_symmetric";
    default: return "per_tensor_affine";
    }
}

static void observer_repr(tg_module *self, char *buf, size_t size) {
    observer_state *s = tg_module_state(self);
    snprintf(buf, size, "dtype=torch.%s, qscheme=torch.%s, quant_min=%lld, quant_max=%lld",
             s->info.dtype == TG_QINT8 ? "qint8" : "quint8", qscheme_name(s->info.qscheme),
             (long long)s->info.quant_min, (long long)s->info.quant_max);
}

/* ---- reading and writing the state ---- */

/* t as a contiguous float32 CPU tensor (in the current scope). */
static tg_tensor *host_f32(tg_tensor *t) {
    tg_tensor *h = tg_tensor_to(tg_detach(t), TG_CPU);
    if (h && h->dtype != TG_FLOAT32) h = tg_cast(h, TG_FLOAT32);
    return h ? tg_contiguous(h) : NULL;
}

static float buffer_scalar(tg_module *m, const char *name) {
    tg_tensor *h = host_f32(tg_module_buffer(m, name));
    return h ? *(const float *)tg_data_ptr(h) : NAN;
}

/* Writes n floats into buffer `name` (same element count). */
static tg_status write_buffer(tg_module *m, const char *name, const float *v, tg_shape shape) {
    tg_tensor *b = tg_module_buffer(m, name);
    tg_tensor *src = tg_from_data(v, shape, (tg_opts){.dtype = TG_FLOAT32});
    if (!src) return TG_ERROR;
    if (b->dtype != TG_FLOAT32) src = tg_cast(src, b->dtype);
    return tg_copy_values_(b, src);
}

/* Replaces the per-channel min_val / max_val (whose length changes from 0 to C),
 * keeping their order after "eps" and their device. */
static tg_status set_channel_range(tg_module *m, const float *mins, const float *maxs, int64_t c) {
    tg_tensor *old = tg_module_buffer(m, "min_val");
    if (tg_numel(old) == c) {
        if (write_buffer(m, "min_val", mins, TG_SHAPE(c))) return TG_ERROR;
        return write_buffer(m, "max_val", maxs, TG_SHAPE(c));
    }
    tg_device dev = tg_device_of(old);
    tg_tensor *lo = tg_tensor_to(tg_from_data(mins, TG_SHAPE(c), (tg_opts){.dtype = TG_FLOAT32}), dev);
    tg_tensor *hi = tg_tensor_to(tg_from_data(maxs, TG_SHAPE(c), (tg_opts){.dtype = TG_FLOAT32}), dev);
    if (!lo || !hi) return TG_ERROR;
    if (tg_unregister_buffer(m, "min_val") || tg_unregister_buffer(m, "max_val")) return TG_ERROR;
    if (tg_register_buffer(m, "min_val", lo)) return TG_ERROR;
    return tg_register_buffer(m, "max_val", hi);
}

/* min and max that propagate NaN, as torch.aminmax / torch.min do: a NaN input makes
 * the range NaN (and calculate_qparams / convert refuse it) instead of being skipped. */
static inline float min_nan(float a, float b) { return isnan(a) || a < b ? a : b; }
static inline float max_nan(float a, float b) { return isnan(a) || a > b ? a : b; }

static void aminmax(const float *x, int64_t n, float *lo, float *hi) {
    float a = INFINITY, b = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        a = min_nan(x[i], a);
        b = max_nan(x[i], b);
    }
    *lo = a;
    *hi = b;
}

/* ---- forward: min-max ---- */

static tg_status observe_per_tensor(tg_module *self, const float *x, int64_t n) {
    observer_state *s = tg_module_state(self);
    float min = buffer_scalar(self, "min_val"), max = buffer_scalar(self, "max_val"), lo, hi;
    aminmax(x, n, &lo, &hi);
    if (s->kind == MOVING_MINMAX && !(min == INFINITY && max == -INFINITY)) {
        min = min + s->averaging_constant * (lo - min);
        max = max + s->averaging_constant * (hi - max);
    } else {
        min = min_nan(lo, min);
        max = max_nan(hi, max);
    }
    if (write_buffer(self, "min_val", &min, TG_SCALAR_SHAPE)) return TG_ERROR;
    return write_buffer(self, "max_val", &max, TG_SCALAR_SHAPE);
}

static tg_status observe_per_channel(tg_module *self, tg_tensor *xh) {
    observer_state *s = tg_module_state(self);
    tg_shape shape = tg_shape_of(xh);
    int axis = s->info.ch_axis < 0 ? s->info.ch_axis + shape.ndim : s->info.ch_axis;
    if (axis < 0 || axis >= shape.ndim) {
        char buf[64];
        tg_shape_str(shape, buf, sizeof buf);
        return tg_error("%s: ch_axis %d is out of range for an input of shape %s", tg_module_type_of(self)->name,
                        s->info.ch_axis, buf);
    }
    int64_t c = shape.dims[axis], inner = 1;
    for (int d = axis + 1; d < shape.ndim; d++) inner *= shape.dims[d];
    float *lo = malloc((size_t)c * sizeof *lo + 1), *hi = malloc((size_t)c * sizeof *hi + 1);
    float *old_lo = malloc((size_t)c * sizeof *lo + 1), *old_hi = malloc((size_t)c * sizeof *hi + 1);
    TG_ASSERT(lo && hi && old_lo && old_hi);
    for (int64_t j = 0; j < c; j++) lo[j] = INFINITY, hi[j] = -INFINITY;
    const float *x = tg_data_ptr(xh);
    for (int64_t i = 0, n = tg_numel(xh); i < n; i++) {
        int64_t j = i / inner % c;
        lo[j] = min_nan(x[i], lo[j]);
        hi[j] = max_nan(x[i], hi[j]);
    }
    tg_status st = TG_OK;
    int64_t have = tg_numel(tg_module_buffer(self, "min_val"));
    if (have != 0 && have != c) {
        st = tg_error("%s: the input has %lld channels along ch_axis %d, the observer saw %lld before",
                      tg_module_type_of(self)->name, (long long)c, s->info.ch_axis, (long long)have);
    } else if (have) {
        tg_tensor *a = host_f32(tg_module_buffer(self, "min_val")), *b = host_f32(tg_module_buffer(self, "max_val"));
        if (!a || !b) {
            st = TG_ERROR;
        } else {
            memcpy(old_lo, tg_data_ptr(a), (size_t)c * sizeof *lo);
            memcpy(old_hi, tg_data_ptr(b), (size_t)c * sizeof *hi);
            for (int64_t j = 0; j < c; j++) {
                if (s->kind == MOVING_PER_CHANNEL) {
                    lo[j] = old_lo[j] + s->averaging_constant * (lo[j] - old_lo[j]);
                    hi[j] = old_hi[j] + s->averaging_constant * (hi[j] - old_hi[j]);
                } else {
                    lo[j] = min_nan(lo[j], old_lo[j]);
                    hi[j] = max_nan(hi[j], old_hi[j]);
                }
            }
        }
    }
    if (!st) st = set_channel_range(self, lo, hi, c);
    free(lo);
    free(hi);
    free(old_lo);
    free(old_hi);
    return st;
}

/* ---- forward: histogram ---- */

/* torch.histc(x, bins, min=lo, max=hi) on the CPU (ATen's histogramdd kernel,
 * linear bin selection in float32); adds into hist. */
static void histc(const float *x, int64_t n, int bins, double lo, double hi, float *hist) {
    if (lo == hi && n > 0) {
        float a, b;
        aminmax(x, n, &a, &b);
        lo = a;
        hi = b;
    }
    if (lo == hi) lo -= 1, hi += 1;
    const float left = (float)lo, right = (float)hi;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        if (!(v >= left && v <= right)) continue;
        int64_t pos = (int64_t)((v - left) * (float)bins / (right - left));
        if (pos == bins) pos -= 1;
        hist[pos] += 1.0f;
    }
}

/* _combine_histograms: the old histogram (covering [min_val, max_val]) upsampled by
 * `up`, placed at start_idx on the combined grid, summed in double over groups of
 * `down` and added to hist (the new values' histogram). */
static void combine_histograms(float *hist, const float *old, int bins, int up, int64_t down, int64_t start_idx) {
    const int64_t total = (int64_t)bins * down, placed = (int64_t)bins * up;
    double acc = 0, prev = 0;
    int k = 0;
    for (int64_t pos = 0; pos < total; pos++) {
        int64_t src = pos - start_idx;
        if (src >= 0 && src < placed) acc += (double)old[src / up];
        if ((pos + 1) % down == 0) {
            /* shifted_integral_histogram is float32: the previous sum rounded */
            double shifted = k == 0 ? 0.0 : (double)(float)prev;
            hist[k] = hist[k] + (float)((acc - shifted) / up);
            prev = acc;
            k++;
        }
    }
}

static tg_status observe_histogram(tg_module *self, const float *x, int64_t n) {
    observer_state *s = tg_module_state(self);
    const int bins = s->bins;
    float min_val = buffer_scalar(self, "min_val"), max_val = buffer_scalar(self, "max_val");
    float *hist = calloc((size_t)bins, sizeof *hist);
    TG_ASSERT(hist != NULL);
    float lo, hi;
    aminmax(x, n, &lo, &hi);
    if (n > 0 && (!isfinite(lo) || !isfinite(hi))) {
        /* PyTorch fails here too (int(min_val) of NaN or Inf raises in Python) */
        free(hist);
        return tg_error("HistogramObserver: the input holds %g: a histogram needs a finite range",
                        isfinite(lo) ? hi : lo);
    }
    bool uninitialized = min_val == INFINITY && max_val == -INFINITY;
    if (uninitialized || min_val == max_val) {
        histc(x, n, bins, (double)(int64_t)lo, (double)(int64_t)hi, hist);
        min_val = lo;
        max_val = hi;
    } else {
        tg_tensor *old_t = host_f32(tg_module_buffer(self, "histogram"));
        if (!old_t) {
            free(hist);
            return TG_ERROR;
        }
        const float *old = tg_data_ptr(old_t);
        float cmin = lo < min_val ? lo : min_val, cmax = hi > max_val ? hi : max_val;
        /* _adjust_min_max: a grid of (max - min) / (bins * upsample_rate), the combined
         * range a whole number `down` of old histogram widths; only the max is relaxed */
        float hist_bin_width = (max_val - min_val) / (float)((int64_t)bins * s->upsample_rate);
        float width = (float)bins * hist_bin_width;
        int64_t down = (int64_t)ceilf((cmax - cmin) / width);
        float e = (float)down * width - (cmax - cmin);
        cmax = cmax + e;
        int64_t start_idx = (int64_t)nearbyintf((min_val - cmin) / hist_bin_width);
        histc(x, n, bins, (double)(int64_t)cmin, (double)(int64_t)cmax, hist);
        if (cmin == min_val && cmax == max_val) {
            for (int i = 0; i < bins; i++) hist[i] += old[i];
        } else {
            combine_histograms(hist, old, bins, s->upsample_rate, down, start_idx);
        }
        min_val = cmin;
        max_val = cmax;
    }
    tg_status st = write_buffer(self, "histogram", hist, TG_SHAPE(bins));
    if (!st) st = write_buffer(self, "min_val", &min_val, TG_SCALAR_SHAPE);
    if (!st) st = write_buffer(self, "max_val", &max_val, TG_SCALAR_SHAPE);
    free(hist);
    return st;
}

static tg_tensor *observer_forward(tg_module *self, tg_tensor *x) {
    observer_state *s = tg_module_state(self);
    if (!tg_dtype_is_floating(tg_dtype_of(x))) {
        tg_error("%s: expected a floating input, got %s", tg_module_type_of(self)->name, tg_dtype_name(tg_dtype_of(x)));
        return NULL;
    }
    if (tg_numel(x) > 0) {
        bool prev = tg_set_grad_enabled(false);
        tg_tensor *xh = host_f32(x);
        tg_status st = TG_ERROR;
        if (xh) {
            if (s->kind == PER_CHANNEL || s->kind == MOVING_PER_CHANNEL) st = observe_per_channel(self, xh);
            else if (s->kind == HISTOGRAM) st = observe_histogram(self, tg_data_ptr(xh), tg_numel(xh));
            else st = observe_per_tensor(self, tg_data_ptr(xh), tg_numel(xh));
        }
        tg_set_grad_enabled(prev);
        if (st) return NULL;
    }
    return tg_scope_track(tg_retain(x));
}

/* ---- calculate_qparams ---- */

/* _calculate_qparams for one (min, max) pair, in float32 as PyTorch's tensor ops. */
static void qparams_of(const observer_state *s, float min, float max, float eps, float *scale, int64_t *zero_point) {
    const int64_t qmin = s->info.quant_min, qmax = s->info.quant_max;
    float min_neg = min < 0.f ? min : 0.f, max_pos = max > 0.f ? max : 0.f;
    if (s->info.qscheme == TG_PER_TENSOR_SYMMETRIC || s->info.qscheme == TG_PER_CHANNEL_SYMMETRIC) {
        float amax = -min_neg > max_pos ? -min_neg : max_pos;
        float sc = amax / (float)((double)(qmax - qmin) / 2);
        *scale = sc > eps ? sc : eps;
        if (s->info.dtype == TG_QUINT8) {
            int64_t sum = qmin + qmax;
            *zero_point = s->custom_range ? (sum >= 0 ? sum / 2 : -((-sum + 1) / 2)) : 128;
        } else {
            *zero_point = 0;
        }
    } else {
        float sc = (max_pos - min_neg) / (float)(qmax - qmin);
        sc = sc > eps ? sc : eps;
        *scale = sc;
        int64_t zp = qmin - (int64_t)(int32_t)nearbyintf(min_neg / sc);
        *zero_point = zp < qmin ? qmin : zp > qmax ? qmax : zp;
    }
}

/* The float32 sum of PyTorch's norm.sum(), here accumulated in double and rounded once. */
static double sum_f32(const float *v, int n) {
    double acc = 0;
    for (int i = 0; i < n; i++) acc += v[i];
    return (double)(float)acc;
}

/* _compute_quantization_error(next_start_bin, next_end_bin), elementwise in float32. */
static double quantization_error(const observer_state *s, const float *hist, float min_val, float max_val, int start,
                                 int end, float *norm) {
    const int bins = s->bins;
    double bin_width = ((double)max_val - (double)min_val) / bins;
    double dst_bin_width = bin_width * (end - start + 1) / s->dst_nbins;
    if (dst_bin_width == 0.0) return 0.0;
    const float bw = (float)bin_width, dbw = (float)dst_bin_width, half = (float)(dst_bin_width / 2);
    const float neg_half = (float)(-dst_bin_width / 2), top = (float)(s->dst_nbins - 1);
    const float inner = (half * half * half - neg_half * neg_half * neg_half) / 3.0f;
    for (int i = 0; i < bins; i++) {
        float begin = (float)(int64_t)(i - start) * bw, finish = begin + bw;
        /* torch.div(..., rounding_mode='floor') on floats (c10's div_floor_floating) */
        float dob, doe;
        for (int side = 0; side < 2; side++) {
            float a = side ? finish : begin, mod = fmodf(a, dbw), div = (a - mod) / dbw, fl;
            if (mod != 0 && (dbw < 0) != (mod < 0)) div -= 1.0f;
            if (div != 0) {
                fl = floorf(div);
                if (div - fl > 0.5f) fl += 1.0f;
            } else {
                fl = copysignf(0.0f, a / dbw);
            }
            fl = fl < 0.f ? 0.f : fl > top ? top : fl;
            if (side) doe = fl;
            else dob = fl;
        }
        float density = hist[i] / bw;
        float db = begin - (dob + 0.5f) * dbw;
        float v = 0.0f;
        v += density * ((half * half * half - db * db * db) / 3.0f);
        v += (doe - dob - 1.0f) * (density * inner);
        float end_center = doe * dbw + half;
        float de = finish - end_center;
        v += density * ((de * de * de - neg_half * neg_half * neg_half) / 3.0f);
        norm[i] = v;
    }
    return sum_f32(norm, bins);
}

/* _non_linear_param_search: the min and max that the L2 search settles on. */
static void non_linear_param_search(const observer_state *s, const float *hist, float min_val, float max_val,
                                    float *new_min, float *new_max) {
    const int bins = s->bins;
    float bin_width = (max_val - min_val) / (float)bins;
    float *csum = malloc((size_t)bins * sizeof *csum), *norm = malloc((size_t)bins * sizeof *norm);
    TG_ASSERT(csum && norm);
    double running = 0;
    for (int i = 0; i < bins; i++) { /* cumsum of float32 accumulates in double */
        running += hist[i];
        csum[i] = (float)running;
    }
    double total = sum_f32(hist, bins);
    const double stepsize = 1e-5;
    double alpha = 0.0, beta = 1.0, norm_min = INFINITY;
    int start_bin = 0, end_bin = bins - 1;
    while (alpha < beta) {
        double next_alpha = alpha + stepsize, next_beta = beta - stepsize;
        int l = start_bin, r = end_bin;
        while (l < end_bin && csum[l] < (float)(next_alpha * total)) l++;
        while (r > start_bin && csum[r] > (float)(next_beta * total)) r--;
        int next_start = start_bin, next_end = end_bin;
        if (l - start_bin > end_bin - r) {
            next_start = l;
            alpha = next_alpha;
        } else {
            next_end = r;
            beta = next_beta;
        }
        if (next_start == start_bin && next_end == end_bin) continue;
        double err = quantization_error(s, hist, min_val, max_val, next_start, next_end, norm);
        if (err > norm_min) break;
        norm_min = err;
        start_bin = next_start;
        end_bin = next_end;
    }
    *new_min = min_val + bin_width * (float)start_bin;
    *new_max = min_val + bin_width * (float)(end_bin + 1);
    free(csum);
    free(norm);
}

tg_status tg_observer_calculate_qparams(tg_module *observer, tg_tensor **scale, tg_tensor **zero_point) {
    const char *op = "tg_observer_calculate_qparams";
    if (!observer || !scale || !zero_point) return tg_error("%s: observer, scale and zero_point must not be NULL", op);
    *scale = *zero_point = NULL;
    if (!tg_is_observer(observer)) {
        const tg_module_type *t = tg_module_type_of(observer);
        return tg_error("%s: expected an observer, got %s", op, t && t->name ? t->name : "Module");
    }
    observer_state *s = tg_module_state(observer);
    float eps = buffer_scalar(observer, "eps");
    tg_tensor *mins = host_f32(tg_module_buffer(observer, "min_val"));
    tg_tensor *maxs = host_f32(tg_module_buffer(observer, "max_val"));
    if (!mins || !maxs) return TG_ERROR;
    int64_t n = tg_numel(mins);
    const float *lo = tg_data_ptr(mins), *hi = tg_data_ptr(maxs);
    bool unobserved = n == 0 || (!s->info.per_channel && lo[0] == INFINITY && hi[0] == -INFINITY);
    float one = 1.0f;
    int64_t zero = 0;
    if (unobserved) {
        *scale = tg_from_data(&one, TG_SHAPE(1), (tg_opts){.dtype = TG_FLOAT32});
        *zero_point = tg_from_data(&zero, TG_SHAPE(1), (tg_opts){.dtype = TG_INT64});
        return *scale && *zero_point ? TG_OK : TG_ERROR;
    }
    for (int64_t j = 0; j < n; j++)
        if (!isfinite(lo[j]) || !isfinite(hi[j]))
            /* PyTorch asserts "min nan should be less than max nan" and makes an Inf scale of Inf */
            return tg_error("%s: min_val %g and max_val %g%s: the observer saw NaN or Inf, no finite scale and zero "
                            "point quantise that",
                            op, lo[j], hi[j], s->info.per_channel ? " of a channel" : "");
    float *sc = malloc((size_t)n * sizeof *sc);
    int64_t *zp = malloc((size_t)n * sizeof *zp);
    TG_ASSERT(sc && zp);
    for (int64_t j = 0; j < n; j++) {
        float a = lo[j], b = hi[j];
        if (s->kind == HISTOGRAM) {
            tg_tensor *h = host_f32(tg_module_buffer(observer, "histogram"));
            if (!h) {
                free(sc);
                free(zp);
                return TG_ERROR;
            }
            non_linear_param_search(s, tg_data_ptr(h), lo[0], hi[0], &a, &b);
        }
        qparams_of(s, a, b, eps, &sc[j], &zp[j]);
    }
    *scale = tg_from_data(sc, TG_SHAPE(n), (tg_opts){.dtype = TG_FLOAT32});
    *zero_point = tg_from_data(zp, TG_SHAPE(n), (tg_opts){.dtype = TG_INT64});
    free(sc);
    free(zp);
    return *scale && *zero_point ? TG_OK : TG_ERROR;
}

tg_status tg_observer_get_info(tg_module *observer, tg_observer_info *info) {
    if (!tg_is_observer(observer) || !info) {
        const tg_module_type *t = observer ? tg_module_type_of(observer) : NULL;
        return tg_error("tg_observer_get_info: expected an observer, got %s", !observer      ? "NULL"
                                                                              : t && t->name ? t->name
                                                                                             : "Module");
    }
    *info = ((observer_state *)tg_module_state(observer))->info;
    return TG_OK;
}

/* ---- construction ---- */

static tg_module *make_observer(observer_kind kind, tg_observer_opts o) {
    const char *name = types[kind].name;
    bool per_channel_kind = kind == PER_CHANNEL || kind == MOVING_PER_CHANNEL;
    tg_qscheme q = o.qscheme;
    if (q == TG_QSCHEME_DEFAULT) q = per_channel_kind ? TG_PER_CHANNEL_AFFINE : TG_PER_TENSOR_AFFINE;
    bool per_channel_scheme = q == TG_PER_CHANNEL_AFFINE || q == TG_PER_CHANNEL_SYMMETRIC;
    if (q < TG_PER_TENSOR_AFFINE || q > TG_PER_CHANNEL_SYMMETRIC || per_channel_scheme != per_channel_kind) {
        tg_error("tg_nn_%s: qscheme %s is not supported (%s takes %s)", name, qscheme_name(q), name,
                 per_channel_kind ? "per_channel_affine or per_channel_symmetric"
                                  : "per_tensor_affine or per_tensor_symmetric");
        return NULL;
    }
    if (o.dtype != TG_QUINT8 && o.dtype != TG_QINT8) {
        tg_error("tg_nn_%s: dtype must be TG_QUINT8 or TG_QINT8, got %d", name, (int)o.dtype);
        return NULL;
    }
    if ((q == TG_PER_TENSOR_SYMMETRIC || q == TG_PER_CHANNEL_SYMMETRIC) && o.reduce_range && o.dtype == TG_QUINT8 &&
        kind != HISTOGRAM) {
        tg_error("tg_nn_%s: cannot reduce range for symmetric quantization for quint8", name);
        return NULL;
    }
    bool custom = o.quant_min != 0 || o.quant_max != 0;
    int64_t qmin, qmax;
    if (custom) {
        int64_t lo = o.dtype == TG_QINT8 ? -128 : 0, hi = o.dtype == TG_QINT8 ? 127 : 255;
        if (!(o.quant_min <= 0 && 0 <= o.quant_max) || o.quant_min >= o.quant_max || o.quant_min < lo ||
            o.quant_max > hi) {
            tg_error("tg_nn_%s: quant_min %lld and quant_max %lld must satisfy %lld <= quant_min <= 0 <= quant_max <= "
                     "%lld, quant_min < quant_max",
                     name, (long long)o.quant_min, (long long)o.quant_max, (long long)lo, (long long)hi);
            return NULL;
        }
        qmin = o.quant_min;
        qmax = o.quant_max;
        if (o.reduce_range) { /* python's // 2 */
            qmin = qmin >= 0 ? qmin / 2 : -((-qmin + 1) / 2);
            qmax = qmax / 2;
        }
    } else if (o.dtype == TG_QINT8) {
        qmin = o.reduce_range ? -64 : -128;
        qmax = o.reduce_range ? 63 : 127;
    } else {
        qmin = 0;
        qmax = o.reduce_range ? 127 : 255;
    }
    if (o.bins < 0 || o.upsample_rate < 0 || o.averaging_constant < 0 || o.averaging_constant > 1) {
        tg_error("tg_nn_%s: bins and upsample_rate must be positive and averaging_constant in (0, 1], got %d, %d, %g",
                 name, o.bins, o.upsample_rate, o.averaging_constant);
        return NULL;
    }
    tg_module *m = tg_module_new(&types[kind], sizeof(observer_state));
    if (!m) return NULL;
    observer_state *s = tg_module_state(m);
    s->kind = kind;
    s->info = (tg_observer_info){.dtype = o.dtype,
                                 .qscheme = q,
                                 .quant_min = qmin,
                                 .quant_max = qmax,
                                 .ch_axis = o.ch_axis,
                                 .per_channel = per_channel_kind};
    s->custom_range = custom;
    s->averaging_constant = (float)(o.averaging_constant > 0 ? o.averaging_constant : 0.01);
    s->bins = o.bins ? o.bins : 2048;
    s->upsample_rate = o.upsample_rate ? o.upsample_rate : 128;
    s->dst_nbins = 256; /* 2 ** torch.iinfo(dtype).bits */
    tg_status st = TG_ERROR;
    TG_SCOPE {
        float eps = FLT_EPSILON, inf = INFINITY, ninf = -INFINITY;
        st = tg_register_buffer(m, "eps", tg_from_data(&eps, TG_SHAPE(1), (tg_opts){.dtype = TG_FLOAT32}));
        if (!st && kind == HISTOGRAM)
            st = tg_register_buffer(m, "histogram", tg_zeros(TG_SHAPE(s->bins), (tg_opts){0}));
        if (per_channel_kind) {
            if (!st) st = tg_register_buffer(m, "min_val", tg_zeros(TG_SHAPE(0), (tg_opts){0}));
            if (!st) st = tg_register_buffer(m, "max_val", tg_zeros(TG_SHAPE(0), (tg_opts){0}));
        } else {
            if (!st) st = tg_register_buffer(m, "min_val", tg_from_data(&inf, TG_SCALAR_SHAPE, (tg_opts){0}));
            if (!st) st = tg_register_buffer(m, "max_val", tg_from_data(&ninf, TG_SCALAR_SHAPE, (tg_opts){0}));
        }
    }
    if (st) {
        tg_module_free(m);
        return NULL;
    }
    return m;
}

tg_module *tg_nn_minmax_observer(tg_observer_opts opts) { return make_observer(MINMAX, opts); }
tg_module *tg_nn_moving_average_minmax_observer(tg_observer_opts opts) { return make_observer(MOVING_MINMAX, opts); }
tg_module *tg_nn_per_channel_minmax_observer(tg_observer_opts opts) { return make_observer(PER_CHANNEL, opts); }
tg_module *tg_nn_moving_average_per_channel_minmax_observer(tg_observer_opts opts) {
    return make_observer(MOVING_PER_CHANNEL, opts);
}
tg_module *tg_nn_histogram_observer(tg_observer_opts opts) { return make_observer(HISTOGRAM, opts); }
