/* Built-in modules: thin wrappers that own parameters and call the functional ops.
 * Initialisation mirrors torch/nn/modules/{linear,conv,batchnorm,normalization,
 * sparse}.py reset_parameters(). See nn/layers.h. */
#include "nn/layers.h"

#include <math.h>
#include <stdio.h>

#include "autograd/grad_mode.h"
#include "core/scope.h"
#include "nn/layer_helpers.h"
#include "nn/norm_state.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/shape.h"

/* ---- Linear ---- */

typedef struct {
    int64_t in_features, out_features;
} linear_state;

static void linear_repr(tg_module *self, char *buf, size_t size) {
    linear_state *s = tg_module_state(self);
    snprintf(buf, size, "in_features=%lld, out_features=%lld, bias=%s", (long long)s->in_features,
             (long long)s->out_features, tg_module_param(self, "bias") ? "True" : "False");
}

static tg_tensor *linear_forward(tg_module *self, tg_tensor *x) {
    linear_state *s = tg_module_state(self);
    if (tg_ndim(x) < 1 || tg_size(x, -1) != s->in_features) {
        char buf[96];
        tg_error("Linear(in_features=%lld, out_features=%lld): input %s must end in %lld features",
                 (long long)s->in_features, (long long)s->out_features, nn_shape_text(x, buf, sizeof buf),
                 (long long)s->in_features);
        return NULL;
    }
    return tg_linear(x, tg_module_param(self, "weight"), tg_module_param(self, "bias"));
}

static const tg_module_type linear_type = {"Linear", linear_forward, NULL, linear_repr};

/* kaiming_uniform_(weight, a=sqrt(5)); bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (torch.nn.Linear /
 * _ConvNd reset_parameters). */
tg_status nn_init_weight_and_bias(tg_module *m, tg_shape weight_shape, int64_t bias_size, bool bias) {
    tg_status status = TG_OK;
    TG_SCOPE {
        tg_tensor *w = tg_empty(weight_shape, (tg_opts){0});
        status = w ? tg_kaiming_uniform_(w, sqrt(5.0), TG_FAN_IN) : TG_ERROR;
        if (!status) status = tg_register_parameter(m, "weight", w);
        if (!status && bias) {
            int64_t fan_in = 0, fan_out = 0;
            status = tg_calculate_fans(weight_shape, &fan_in, &fan_out);
            double bound = fan_in > 0 ? 1.0 / sqrt((double)fan_in) : 0.0;
            tg_tensor *b = status ? NULL : tg_empty(TG_SHAPE(bias_size), (tg_opts){0});
            if (!status) status = b ? tg_uniform_(b, -bound, bound) : TG_ERROR;
            if (!status) status = tg_register_parameter(m, "bias", b);
        }
    }
    return status;
}

tg_module *tg_nn_linear(int64_t in_features, int64_t out_features, tg_linear_opts opts) {
    if (in_features < 0 || out_features < 0) {
        tg_error("tg_nn_linear: negative sizes (in_features=%lld, out_features=%lld)", (long long)in_features,
                 (long long)out_features);
        return NULL;
    }
    tg_module *m = tg_module_new(&linear_type, sizeof(linear_state));
    *(linear_state *)tg_module_state(m) = (linear_state){in_features, out_features};
    return nn_finish(m, nn_init_weight_and_bias(m, TG_SHAPE(out_features, in_features), out_features, !opts.no_bias));
}

/* ---- Conv2d ---- */

typedef struct {
    int64_t in_channels, out_channels;
    int kernel_size;
    tg_conv_opts opts;
} conv_state;

static tg_pair conv_kernel(int kernel_size, tg_conv_opts opts) {
    return opts.kernel_sizes.h || opts.kernel_sizes.w ? opts.kernel_sizes : (tg_pair){kernel_size, kernel_size};
}

static const char *const padding_mode_names[] = {"zeros", "reflect", "replicate", "circular"};

/* As PyTorch's Conv2d.extra_repr: the defaults left out but stride. */
static void conv_repr(tg_module *self, char *buf, size_t size) {
    conv_state *s = tg_module_state(self);
    tg_pair k = conv_kernel(s->kernel_size, s->opts), st = tg_conv_opts_stride(s->opts);
    tg_pair pd = tg_conv_opts_padding(s->opts), dl = tg_conv_opts_dilation(s->opts);
    int n = snprintf(buf, size, "%lld, %lld, kernel_size=(%d, %d), stride=(%d, %d)", (long long)s->in_channels,
                     (long long)s->out_channels, k.h, k.w, st.h, st.w);
    if (s->opts.padding_same) n += snprintf(buf + n, size > (size_t)n ? size - n : 0, ", padding=same");
    else if (pd.h || pd.w) n += snprintf(buf + n, size > (size_t)n ? size - n : 0, ", padding=(%d, %d)", pd.h, pd.w);
    if (dl.h != 1 || dl.w != 1)
        n += snprintf(buf + n, size > (size_t)n ? size - n : 0, ", dilation=(%d, %d)", dl.h, dl.w);
    if (s->opts.groups > 1) n += snprintf(buf + n, size > (size_t)n ? size - n : 0, ", groups=%d", s->opts.groups);
    if (s->opts.no_bias) n += snprintf(buf + n, size > (size_t)n ? size - n : 0, ", bias=False");
    if (s->opts.padding_mode > TG_PAD_CONSTANT && s->opts.padding_mode <= TG_PAD_CIRCULAR)
        snprintf(buf + n, size > (size_t)n ? size - n : 0, ", padding_mode=%s",
                 padding_mode_names[s->opts.padding_mode]);
}

static tg_tensor *conv_forward(tg_module *self, tg_tensor *x) {
    conv_state *s = tg_module_state(self);
    int nd = tg_ndim(x);
    if ((nd != 4 && nd != 3) || tg_size(x, nd - 3) != s->in_channels) {
        char buf[96];
        tg_error("Conv2d(%lld, %lld, kernel_size=%d): input %s must be [N, %lld, H, W] or [%lld, H, W]",
                 (long long)s->in_channels, (long long)s->out_channels, s->kernel_size,
                 nn_shape_text(x, buf, sizeof buf), (long long)s->in_channels, (long long)s->in_channels);
        return NULL;
    }
    return tg_conv2d(x, tg_module_param(self, "weight"), tg_module_param(self, "bias"), s->opts);
}

static const tg_module_type conv_type = {"Conv2d", conv_forward, NULL, conv_repr};

tg_module *tg_nn_conv2d(int64_t in_channels, int64_t out_channels, int kernel_size, tg_conv_opts opts) {
    int groups = opts.groups ? opts.groups : 1;
    tg_pair k = conv_kernel(kernel_size, opts), st = tg_conv_opts_stride(opts);
    tg_pair pd = tg_conv_opts_padding(opts), dl = tg_conv_opts_dilation(opts);
    if (in_channels <= 0 || out_channels <= 0 || k.h <= 0 || k.w <= 0 || groups <= 0 || in_channels % groups ||
        out_channels % groups || st.h <= 0 || st.w <= 0 || pd.h < 0 || pd.w < 0 || dl.h <= 0 || dl.w <= 0 ||
        (unsigned)opts.padding_mode > TG_PAD_CIRCULAR) {
        tg_error("tg_nn_conv2d: invalid arguments (in_channels=%lld, out_channels=%lld, kernel_size=(%d, %d), "
                 "stride=(%d, %d), padding=(%d, %d), dilation=(%d, %d), groups=%d, padding_mode=%d): sizes must be "
                 "positive, padding not negative, channels divisible by groups",
                 (long long)in_channels, (long long)out_channels, k.h, k.w, st.h, st.w, pd.h, pd.w, dl.h, dl.w,
                 opts.groups, (int)opts.padding_mode);
        return NULL;
    }
    if (opts.padding_same && (st.h != 1 || st.w != 1)) {
        tg_error("tg_nn_conv2d: padding='same' is not supported for strided convolutions (stride (%d, %d))", st.h,
                 st.w);
        return NULL;
    }
    tg_module *m = tg_module_new(&conv_type, sizeof(conv_state));
    *(conv_state *)tg_module_state(m) = (conv_state){in_channels, out_channels, kernel_size, opts};
    return nn_finish(m, nn_init_weight_and_bias(m, TG_SHAPE(out_channels, in_channels / groups, k.h, k.w), out_channels,
                                                !opts.no_bias));
}

tg_status tg_nn_conv2d_get_opts(tg_module *conv, tg_conv_opts *opts) {
    if (!conv || tg_module_type_of(conv) != &conv_type || !opts)
        return tg_error("tg_nn_conv2d_get_opts: expected a Conv2d, got %s",
                        !conv ? "NULL" : tg_module_type_of(conv)->name);
    *opts = ((conv_state *)tg_module_state(conv))->opts;
    return TG_OK;
}

/* ---- pooling ---- */

/* "3" or, per dim, "(3, 1)", as PyTorch prints an int or a tuple. */
static const char *pool_value(tg_pair pair, int scalar, char *buf, size_t size) {
    if (pair.h || pair.w) snprintf(buf, size, "(%d, %d)", pair.h, pair.w);
    else snprintf(buf, size, "%d", scalar);
    return buf;
}

static void pool_repr(tg_module *self, char *buf, size_t size) {
    tg_pool_opts *o = tg_module_state(self);
    char k[24], s[24], p[24], d[24];
    bool stride_set = o->stride || o->strides.h || o->strides.w;
    int n = snprintf(buf, size, "kernel_size=%s, stride=%s, padding=%s",
                     pool_value(o->kernel_sizes, o->kernel_size, k, sizeof k),
                     stride_set ? pool_value(o->strides, o->stride, s, sizeof s) : k,
                     pool_value(o->paddings, o->padding, p, sizeof p));
    bool dilated = o->dilation > 1 || o->dilations.h > 1 || o->dilations.w > 1;
    if (dilated && n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, ", dilation=%s", pool_value(o->dilations, o->dilation, d, sizeof d));
}
static tg_tensor *max_pool_forward(tg_module *self, tg_tensor *x) {
    return tg_max_pool2d(x, *(tg_pool_opts *)tg_module_state(self), NULL);
}
static tg_tensor *avg_pool_forward(tg_module *self, tg_tensor *x) {
    return tg_avg_pool2d(x, *(tg_pool_opts *)tg_module_state(self));
}
static const tg_module_type max_pool_type = {"MaxPool2d", max_pool_forward, NULL, pool_repr};

tg_status tg_nn_max_pool2d_get_opts(tg_module *pool, tg_pool_opts *opts) {
    if (!pool || tg_module_type_of(pool) != &max_pool_type || !opts)
        return tg_error("tg_nn_max_pool2d_get_opts: expected a MaxPool2d, got %s",
                        !pool ? "NULL" : tg_module_type_of(pool)->name);
    *opts = *(tg_pool_opts *)tg_module_state(pool);
    return TG_OK;
}
static const tg_module_type avg_pool_type = {"AvgPool2d", avg_pool_forward, NULL, pool_repr};

static tg_module *make_pool(const tg_module_type *type, const char *ctor, tg_pool_opts opts) {
    tg_pair k =
        opts.kernel_sizes.h || opts.kernel_sizes.w ? opts.kernel_sizes : TG_PAIR(opts.kernel_size, opts.kernel_size);
    tg_pair s = opts.strides.h || opts.strides.w ? opts.strides : TG_PAIR(opts.stride, opts.stride);
    tg_pair p = opts.paddings.h || opts.paddings.w ? opts.paddings : TG_PAIR(opts.padding, opts.padding);
    tg_pair d = opts.dilations.h || opts.dilations.w ? opts.dilations : TG_PAIR(opts.dilation, opts.dilation);
    char ks[24], ss[24], ps[24], ds[24];
    pool_value(k.h == k.w ? TG_PAIR(0, 0) : k, k.h, ks, sizeof ks),
        pool_value(s.h == s.w ? TG_PAIR(0, 0) : s, s.h, ss, sizeof ss);
    pool_value(p.h == p.w ? TG_PAIR(0, 0) : p, p.h, ps, sizeof ps),
        pool_value(d.h == d.w ? TG_PAIR(0, 0) : d, d.h, ds, sizeof ds);
    if (k.h <= 0 || k.w <= 0 || s.h < 0 || s.w < 0 || p.h < 0 || p.w < 0 || 2 * p.h > k.h || 2 * p.w > k.w) {
        tg_error("%s: kernel_size=%s must be positive, stride=%s non-negative and padding=%s at most half the kernel",
                 ctor, ks, ss, ps);
        return NULL;
    }
    if (d.h < 0 || d.w < 0 || (type == &avg_pool_type && (d.h > 1 || d.w > 1))) {
        tg_error("%s: dilation=%s must be %s", ctor, ds,
                 type == &avg_pool_type ? "0 or 1 (AvgPool2d has no dilation)" : "non-negative (0 means 1)");
        return NULL;
    }
    tg_module *m = tg_module_new(type, sizeof(tg_pool_opts));
    *(tg_pool_opts *)tg_module_state(m) = opts;
    return m;
}

tg_module *tg_nn_max_pool2d(tg_pool_opts opts) { return make_pool(&max_pool_type, "tg_nn_max_pool2d", opts); }
tg_module *tg_nn_avg_pool2d(tg_pool_opts opts) { return make_pool(&avg_pool_type, "tg_nn_avg_pool2d", opts); }

typedef struct {
    int64_t out_h, out_w;
} adaptive_pool_state;

static void adaptive_pool_repr(tg_module *self, char *buf, size_t size) {
    adaptive_pool_state *s = tg_module_state(self);
    snprintf(buf, size, "output_size=(%lld, %lld)", (long long)s->out_h, (long long)s->out_w);
}
static tg_tensor *adaptive_pool_forward(tg_module *self, tg_tensor *x) {
    adaptive_pool_state *s = tg_module_state(self);
    return tg_adaptive_avg_pool2d(x, s->out_h, s->out_w);
}
static const tg_module_type adaptive_avg_pool_type = {"AdaptiveAvgPool2d", adaptive_pool_forward, NULL,
                                                      adaptive_pool_repr};

tg_module *tg_nn_adaptive_avg_pool2d(int64_t out_h, int64_t out_w) {
    if (out_h <= 0 || out_w <= 0) {
        tg_error("tg_nn_adaptive_avg_pool2d: output_size=(%lld, %lld) must be positive", (long long)out_h,
                 (long long)out_w);
        return NULL;
    }
    tg_module *m = tg_module_new(&adaptive_avg_pool_type, sizeof(adaptive_pool_state));
    *(adaptive_pool_state *)tg_module_state(m) = (adaptive_pool_state){out_h, out_w};
    return m;
}

/* ---- BatchNorm1d / 2d ---- */

/* torch/nn/modules/batchnorm.py _BatchNorm.forward; with relu, relu(bn(x) + residual)
 * through tg_batch_norm_add_relu. */
static tg_tensor *batch_norm_apply(tg_module *self, tg_tensor *x, bool relu, tg_tensor *residual) {
    nn_batch_norm_state *s = tg_module_state(self);
    const char *type = tg_module_type_of(self)->name;
    bool is2d = type[9] == '2'; /* "BatchNorm2d" */
    int nd = tg_ndim(x);
    bool rank_ok = is2d ? nd == 4 : (nd == 2 || nd == 3);
    if (!rank_ok || tg_size(x, 1) != s->num_features) {
        char buf[96];
        tg_error("%s(%lld): input %s must be %s with %lld channels in dim 1", type, (long long)s->num_features,
                 nn_shape_text(x, buf, sizeof buf), is2d ? "[N, C, H, W]" : "[N, C] or [N, C, L]",
                 (long long)s->num_features);
        return NULL;
    }
    double factor;
    if (nn_batch_norm_factor(self, s, &factor)) return NULL;
    bool use_batch_stats = tg_is_training(self) || !s->track;
    tg_tensor *mean = tg_module_buffer(self, "running_mean"), *var = tg_module_buffer(self, "running_var");
    tg_tensor *w = tg_module_param(self, "weight"), *b = tg_module_param(self, "bias");
    if (relu) return tg_batch_norm_add_relu(x, residual, mean, var, w, b, use_batch_stats, factor, s->eps);
    return tg_batch_norm(x, mean, var, w, b, use_batch_stats, factor, s->eps);
}

static tg_tensor *batch_norm_forward(tg_module *self, tg_tensor *x) { return batch_norm_apply(self, x, false, NULL); }

static const tg_module_type batch_norm1d_type = {"BatchNorm1d", batch_norm_forward, NULL, nn_batch_norm_repr};
static const tg_module_type batch_norm2d_type = {"BatchNorm2d", batch_norm_forward, NULL, nn_batch_norm_repr};

tg_module *tg_nn_batch_norm1d(int64_t num_features, tg_batch_norm_opts opts) {
    return nn_batch_norm_new(&batch_norm1d_type, "tg_nn_batch_norm1d", num_features, opts);
}
tg_module *tg_nn_batch_norm2d(int64_t num_features, tg_batch_norm_opts opts) {
    return nn_batch_norm_new(&batch_norm2d_type, "tg_nn_batch_norm2d", num_features, opts);
}

tg_tensor *tg_nn_batch_norm_add_relu(tg_module *bn, tg_tensor *x, tg_tensor *residual) {
    if (!bn) return tg_error("tg_nn_batch_norm_add_relu: the module is NULL"), NULL;
    const tg_module_type *type = tg_module_type_of(bn);
    if ((type == &batch_norm1d_type || type == &batch_norm2d_type) && !tg_module_has_hooks(bn))
        return batch_norm_apply(bn, x, true, residual);
    tg_tensor *y = NULL; /* another norm (SyncBatchNorm after conversion) or hooks to run: the three ops */
    TG_SCOPE {
        tg_tensor *n = tg_forward(bn, x);
        if (n && residual) n = tg_add(n, residual);
        if (n) y = tg_scope_return(tg_relu(n));
    }
    return y;
}

/* ---- LayerNorm ---- */

typedef struct {
    tg_shape normalized_shape;
    double eps;
} layer_norm_state;

static void layer_norm_repr(tg_module *self, char *buf, size_t size) {
    layer_norm_state *s = tg_module_state(self);
    char shape[96];
    snprintf(buf, size, "%s, eps=%g", tg_shape_str(s->normalized_shape, shape, sizeof shape), s->eps);
}

static tg_tensor *layer_norm_forward(tg_module *self, tg_tensor *x) {
    layer_norm_state *s = tg_module_state(self);
    int k = s->normalized_shape.ndim, nd = tg_ndim(x);
    bool ok = nd >= k;
    for (int i = 0; ok && i < k; i++) ok = tg_size(x, nd - k + i) == s->normalized_shape.dims[i];
    if (!ok) {
        char a[96], b[96];
        tg_error("LayerNorm(%s): input %s must end in the normalized shape",
                 tg_shape_str(s->normalized_shape, a, sizeof a), nn_shape_text(x, b, sizeof b));
        return NULL;
    }
    return tg_layer_norm(x, k, tg_module_param(self, "weight"), tg_module_param(self, "bias"), s->eps);
}

static const tg_module_type layer_norm_type = {"LayerNorm", layer_norm_forward, NULL, layer_norm_repr};

tg_module *tg_nn_layer_norm(tg_shape normalized_shape, tg_layer_norm_opts opts) {
    if (normalized_shape.ndim < 1 || tg_shape_numel(normalized_shape) <= 0) {
        tg_error("tg_nn_layer_norm: normalized_shape must have at least one dim and positive sizes");
        return NULL;
    }
    tg_module *m = tg_module_new(&layer_norm_type, sizeof(layer_norm_state));
    *(layer_norm_state *)tg_module_state(m) =
        (layer_norm_state){normalized_shape, tg_option(opts.eps, 1e-5, opts.defaults_filled)};
    tg_status status = TG_OK;
    if (!opts.no_affine) TG_SCOPE {
            status = tg_register_parameter(m, "weight", tg_ones(normalized_shape, (tg_opts){0}));
            if (!status) status = tg_register_parameter(m, "bias", tg_zeros(normalized_shape, (tg_opts){0}));
        }
    return nn_finish(m, status);
}

/* ---- Dropout, Embedding ---- */

static void dropout_repr(tg_module *self, char *buf, size_t size) {
    snprintf(buf, size, "p=%g", *(double *)tg_module_state(self));
}
static tg_tensor *dropout_forward(tg_module *self, tg_tensor *x) {
    return tg_dropout(x, *(double *)tg_module_state(self), tg_is_training(self));
}
static const tg_module_type dropout_type = {"Dropout", dropout_forward, NULL, dropout_repr};

tg_module *tg_nn_dropout(double p) {
    if (!(p >= 0 && p <= 1)) {
        tg_error("tg_nn_dropout: p must be in [0, 1], got %g", p);
        return NULL;
    }
    tg_module *m = tg_module_new(&dropout_type, sizeof(double));
    *(double *)tg_module_state(m) = p;
    return m;
}

static tg_tensor *dropout2d_forward(tg_module *self, tg_tensor *x) {
    return tg_dropout2d(x, *(double *)tg_module_state(self), tg_is_training(self));
}
static const tg_module_type dropout2d_type = {"Dropout2d", dropout2d_forward, NULL, dropout_repr};

tg_module *tg_nn_dropout2d(double p) {
    if (!(p >= 0 && p <= 1)) {
        tg_error("tg_nn_dropout2d: p must be in [0, 1], got %g", p);
        return NULL;
    }
    tg_module *m = tg_module_new(&dropout2d_type, sizeof(double));
    *(double *)tg_module_state(m) = p;
    return m;
}

static tg_tensor *embedding_forward(tg_module *self, tg_tensor *x) {
    return tg_embedding(tg_module_param(self, "weight"), x, *(tg_embedding_opts *)tg_module_state(self));
}
static void embedding_repr(tg_module *self, char *buf, size_t size) {
    tg_tensor *w = tg_module_param(self, "weight");
    tg_embedding_opts *o = tg_module_state(self);
    int n = snprintf(buf, size, "%lld, %lld", (long long)tg_size(w, 0), (long long)tg_size(w, 1));
    if (o->use_padding_idx && n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, ", padding_idx=%lld", (long long)o->padding_idx);
}
static const tg_module_type embedding_type = {"Embedding", embedding_forward, NULL, embedding_repr};

tg_module *tg_nn_embedding(int64_t num_embeddings, int64_t embedding_dim, tg_embedding_opts opts) {
    if (num_embeddings <= 0 || embedding_dim <= 0) {
        tg_error("tg_nn_embedding: sizes must be positive (num_embeddings=%lld, embedding_dim=%lld)",
                 (long long)num_embeddings, (long long)embedding_dim);
        return NULL;
    }
    if (opts.use_padding_idx && (opts.padding_idx < -num_embeddings || opts.padding_idx >= num_embeddings)) {
        tg_error("tg_nn_embedding: padding_idx %lld is out of range for %lld embeddings (expected %lld <= "
                 "padding_idx < %lld)",
                 (long long)opts.padding_idx, (long long)num_embeddings, (long long)-num_embeddings,
                 (long long)num_embeddings);
        return NULL;
    }
    if (opts.use_padding_idx && opts.padding_idx < 0) opts.padding_idx += num_embeddings; /* stored so, as PyTorch */
    tg_module *m = tg_module_new(&embedding_type, sizeof opts);
    *(tg_embedding_opts *)tg_module_state(m) = opts;
    tg_status status = TG_OK;
    TG_SCOPE {
        tg_tensor *w = tg_empty(TG_SHAPE(num_embeddings, embedding_dim), (tg_opts){0});
        status = w ? tg_normal_(w, 0.0, 1.0) : TG_ERROR;
        /* as reset_parameters: the padding row starts at zero */
        if (!status && opts.use_padding_idx) status = tg_fill_(tg_narrow(w, 0, opts.padding_idx, 1), 0.0);
        if (!status) status = tg_register_parameter(m, "weight", w);
    }
    return nn_finish(m, status);
}

/* ---- activations, Flatten ---- */

static tg_tensor *relu_forward(tg_module *self, tg_tensor *x) { return tg_relu(x); }
static tg_tensor *sigmoid_forward(tg_module *self, tg_tensor *x) { return tg_sigmoid(x); }
static tg_tensor *tanh_forward(tg_module *self, tg_tensor *x) { return tg_tanh(x); }
static tg_tensor *gelu_forward(tg_module *self, tg_tensor *x) { return tg_gelu(x); }
static tg_tensor *leaky_relu_forward(tg_module *self, tg_tensor *x) {
    return tg_leaky_relu(x, *(double *)tg_module_state(self));
}
static void leaky_relu_repr(tg_module *self, char *buf, size_t size) {
    snprintf(buf, size, "negative_slope=%g", *(double *)tg_module_state(self));
}
static const tg_module_type relu_type = {"ReLU", relu_forward, NULL, NULL};
static const tg_module_type sigmoid_type = {"Sigmoid", sigmoid_forward, NULL, NULL};
static const tg_module_type tanh_type = {"Tanh", tanh_forward, NULL, NULL};
static const tg_module_type gelu_type = {"GELU", gelu_forward, NULL, NULL};
static const tg_module_type leaky_relu_type = {"LeakyReLU", leaky_relu_forward, NULL, leaky_relu_repr};

tg_module *tg_nn_relu(void) { return tg_module_new(&relu_type, 0); }
tg_module *tg_nn_sigmoid(void) { return tg_module_new(&sigmoid_type, 0); }
tg_module *tg_nn_tanh(void) { return tg_module_new(&tanh_type, 0); }
tg_module *tg_nn_gelu(void) { return tg_module_new(&gelu_type, 0); }
tg_module *tg_nn_leaky_relu(double negative_slope) {
    tg_module *m = tg_module_new(&leaky_relu_type, sizeof(double));
    *(double *)tg_module_state(m) = tg_option(negative_slope, 0.01, false);
    return m;
}

static tg_tensor *softmax_forward(tg_module *self, tg_tensor *x) {
    return tg_softmax(x, *(int *)tg_module_state(self));
}
static tg_tensor *log_softmax_forward(tg_module *self, tg_tensor *x) {
    return tg_log_softmax(x, *(int *)tg_module_state(self));
}
static void dim_repr(tg_module *self, char *buf, size_t size) {
    snprintf(buf, size, "dim=%d", *(int *)tg_module_state(self));
}
static const tg_module_type softmax_type = {"Softmax", softmax_forward, NULL, dim_repr};
static const tg_module_type log_softmax_type = {"LogSoftmax", log_softmax_forward, NULL, dim_repr};

static tg_module *make_dim_module(const tg_module_type *type, int dim) {
    tg_module *m = tg_module_new(type, sizeof(int));
    *(int *)tg_module_state(m) = dim;
    return m;
}
tg_module *tg_nn_softmax(int dim) { return make_dim_module(&softmax_type, dim); }
tg_module *tg_nn_log_softmax(int dim) { return make_dim_module(&log_softmax_type, dim); }

static tg_tensor *upsample_forward(tg_module *self, tg_tensor *x) {
    return tg_interpolate(x, *(tg_interpolate_opts *)tg_module_state(self));
}
static void upsample_repr(tg_module *self, char *buf, size_t size) {
    tg_interpolate_opts *o = tg_module_state(self);
    const char *mode = o->mode == TG_INTERP_BILINEAR  ? "bilinear"
                       : o->mode == TG_INTERP_BICUBIC ? "bicubic"
                                                      : "nearest";
    if (o->size[0])
        snprintf(buf, size, "size=(%lld, %lld), mode='%s'", (long long)o->size[0],
                 (long long)(o->size[1] ? o->size[1] : o->size[0]), mode);
    else
        snprintf(buf, size, "scale_factor=(%g, %g), mode='%s'", o->scale_factor[0],
                 o->scale_factor[1] ? o->scale_factor[1] : o->scale_factor[0], mode);
}
static const tg_module_type upsample_type = {"Upsample", upsample_forward, NULL, upsample_repr};

tg_module *tg_nn_upsample(tg_interpolate_opts opts) {
    /* PyTorch's constructor accepts anything and its forward fails; tapegrad refuses early */
    bool has_size = opts.size[0] != 0 || opts.size[1] != 0;
    bool has_scale = opts.scale_factor[0] != 0 || opts.scale_factor[1] != 0;
    if (has_size == has_scale || opts.size[0] < 0 || opts.size[1] < 0 || opts.scale_factor[0] < 0 ||
        opts.scale_factor[1] < 0 ||
        (opts.mode != TG_INTERP_NEAREST && opts.mode != TG_INTERP_BILINEAR && opts.mode != TG_INTERP_BICUBIC) ||
        (opts.align_corners && opts.mode == TG_INTERP_NEAREST)) {
        tg_error("tg_nn_upsample: give exactly one of size (positive) or scale_factor (positive), mode nearest, "
                 "bilinear or bicubic, align_corners only with bilinear or bicubic");
        return NULL;
    }
    tg_module *m = tg_module_new(&upsample_type, sizeof opts);
    *(tg_interpolate_opts *)tg_module_state(m) = opts;
    return m;
}

static tg_tensor *identity_forward(tg_module *self, tg_tensor *x) { return tg_scope_track(tg_retain(x)); }
static const tg_module_type identity_type = {"Identity", identity_forward, NULL, NULL};
tg_module *tg_nn_identity(void) { return tg_module_new(&identity_type, 0); }

typedef struct {
    int start_dim, end_dim;
} flatten_state;
static tg_tensor *flatten_forward(tg_module *self, tg_tensor *x) {
    flatten_state *s = tg_module_state(self);
    return tg_flatten(x, s->start_dim, s->end_dim);
}
static void flatten_repr(tg_module *self, char *buf, size_t size) {
    flatten_state *s = tg_module_state(self);
    snprintf(buf, size, "start_dim=%d, end_dim=%d", s->start_dim, s->end_dim);
}
static const tg_module_type flatten_type = {"Flatten", flatten_forward, NULL, flatten_repr};

tg_module *tg_nn_flatten(int start_dim, int end_dim) {
    tg_module *m = tg_module_new(&flatten_type, sizeof(flatten_state));
    *(flatten_state *)tg_module_state(m) = (flatten_state){start_dim, end_dim};
    return m;
}

/* ---- Sequential and ModuleList: children named by their index ---- */

static tg_status append_indexed(tg_module *container, tg_module *m) {
    char name[24];
    snprintf(name, sizeof name, "%d", tg_module_num_children(container));
    return tg_register_module(container, name, m);
}

/* Whether c is a container of `type`, else an error naming what it is. */
static bool is_container(const char *op, tg_module *c, const tg_module_type *type) {
    if (c && tg_module_type_of(c) == type) return true;
    tg_error("%s: the first argument is %s, not a %s", op, c ? tg_module_type_of(c)->name : "NULL", type->name);
    return false;
}

/* Appends m to a container of `type`; m is taken (freed on failure). */
static tg_status append_checked(const char *op, const tg_module_type *type, tg_module *container, tg_module *m) {
    if (!is_container(op, container, type)) {
        tg_module_free(m);
        return TG_ERROR;
    }
    return append_indexed(container, m);
}

/* Takes modules[0 .. count): on any failure all of them are freed. */
static tg_module *indexed_container(const char *op, const tg_module_type *type, int count, tg_module *const *modules) {
    bool ok = count >= 0 && (count == 0 || modules);
    for (int i = 0; ok && i < count; i++) ok = modules[i] != NULL;
    if (!ok) {
        int missing = -1;
        for (int i = 0; modules && i < count; i++) {
            if (!modules[i] && missing < 0) missing = i;
            tg_module_free(modules[i]);
        }
        if (!tg_has_error() || missing < 0)
            tg_error("%s: module %d of %d is NULL (did its constructor fail?)", op, missing, count);
        return NULL;
    }
    tg_module *container = tg_module_new(type, 0);
    tg_status status = TG_OK;
    for (int i = 0; i < count; i++) {
        if (status == TG_OK) status = append_indexed(container, modules[i]);
        else tg_module_free(modules[i]);
    }
    return nn_finish(container, status);
}

/* ---- Sequential ---- */

static tg_tensor *sequential_forward(tg_module *self, tg_tensor *x) {
    int n = tg_module_num_children(self);
    if (n == 0) return tg_scope_track(tg_retain(x));
    tg_tensor *y = x;
    for (int i = 0; i < n && y; i++) y = tg_forward(tg_module_child_at(self, i, NULL), y);
    return y;
}
static const tg_module_type sequential_type = {"Sequential", sequential_forward, NULL, NULL};

tg_status tg_nn_sequential_append(tg_module *sequential, tg_module *m) {
    return append_checked("tg_nn_sequential_append", &sequential_type, sequential, m);
}

tg_module *tg_nn_sequential(int count, tg_module *const *modules) {
    return indexed_container("tg_nn_sequential", &sequential_type, count, modules);
}

/* ---- ModuleList ---- */

static tg_tensor *module_list_forward(tg_module *self, tg_tensor *x) {
    tg_error("ModuleList (%d modules) has no forward: call its modules (tg_nn_module_list_get) from a forward of your "
             "own",
             tg_module_num_children(self));
    return NULL;
}
static const tg_module_type module_list_type = {"ModuleList", module_list_forward, NULL, NULL};

static bool is_module_list(const char *op, tg_module *list) { return is_container(op, list, &module_list_type); }

tg_status tg_nn_module_list_append(tg_module *list, tg_module *m) {
    return append_checked("tg_nn_module_list_append", &module_list_type, list, m);
}

tg_module *tg_nn_module_list_get(tg_module *list, int i) {
    if (!is_module_list("tg_nn_module_list_get", list)) return NULL;
    int n = tg_module_num_children(list);
    if (i < -n || i >= n) {
        tg_error("tg_nn_module_list_get: index %d is out of range for a ModuleList of %d modules", i, n);
        return NULL;
    }
    return tg_module_child_at(list, i < 0 ? i + n : i, NULL);
}

int tg_nn_module_list_len(tg_module *list) {
    return is_module_list("tg_nn_module_list_len", list) ? tg_module_num_children(list) : -1;
}

tg_module *tg_nn_module_list(int count, tg_module *const *modules) {
    return indexed_container("tg_nn_module_list", &module_list_type, count, modules);
}
