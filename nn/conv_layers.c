/* Conv1d and ConvTranspose2d. Conv1d is a 2-D convolution over [N, C, 1, L] with a
 * [out, in/g, 1, k] kernel whose per-dim options act on the length only (padding 0,
 * stride and dilation 1 on the height), so the height stays 1. See nn/conv_layers.h. */
#include "nn/conv_layers.h"

#include <math.h>
#include <stdio.h>

#include "core/scope.h"
#include "ops/random.h"
#include "ops/shape.h"
#include "core/tensor_impl.h"
#include "nn/layer_helpers.h"

typedef struct {
    int64_t in_channels, out_channels;
    int kernel_size;
    tg_conv_opts opts;
} conv1d_state;

static void conv1d_repr(tg_module *self, char *buf, size_t size) {
    conv1d_state *s = tg_module_state(self);
    snprintf(buf, size,
             "%lld, %lld, kernel_size=(%d,), stride=(%d,), padding=(%d,), dilation=(%d,), groups=%d, bias=%s",
             (long long)s->in_channels, (long long)s->out_channels, s->kernel_size, s->opts.stride ? s->opts.stride : 1,
             s->opts.padding, s->opts.dilation ? s->opts.dilation : 1, s->opts.groups ? s->opts.groups : 1,
             s->opts.no_bias ? "False" : "True");
}

static tg_tensor *conv1d_forward(tg_module *self, tg_tensor *x) {
    conv1d_state *s = tg_module_state(self);
    int nd = tg_ndim(x);
    if ((nd != 2 && nd != 3) || tg_size(x, -2) != s->in_channels) {
        char buf[96];
        tg_error("Conv1d(%lld, %lld, kernel_size=%d): input %s must be [N, %lld, L] or [%lld, L]",
                 (long long)s->in_channels, (long long)s->out_channels, s->kernel_size,
                 tg_shape_str(tg_shape_of(x), buf, sizeof buf), (long long)s->in_channels, (long long)s->in_channels);
        return NULL;
    }
    tg_tensor *batched = nd == 2 ? tg_unsqueeze(x, 0) : x;
    tg_tensor *x4 = batched ? tg_unsqueeze(batched, 2) : NULL;
    tg_tensor *w4 = tg_unsqueeze(tg_module_param(self, "weight"), 2);
    /* A conv2d over [N, C, 1, L]: the options act on the last dim only. */
    tg_conv_opts opts = s->opts;
    opts.strides = (tg_pair){1, opts.stride ? opts.stride : 1};
    opts.paddings = (tg_pair){0, opts.padding};
    opts.dilations = (tg_pair){1, opts.dilation ? opts.dilation : 1};
    tg_tensor *y = x4 && w4 ? tg_conv2d(x4, w4, tg_module_param(self, "bias"), opts) : NULL;
    if (!y) return NULL;
    y = tg_squeeze(y, 2);
    return y && nd == 2 ? tg_squeeze(y, 0) : y;
}

static const tg_module_type conv1d_type = {"Conv1d", conv1d_forward, NULL, conv1d_repr};

tg_module *tg_nn_conv1d(int64_t in_channels, int64_t out_channels, int kernel_size, tg_conv_opts opts) {
    int groups = opts.groups ? opts.groups : 1;
    if (in_channels <= 0 || out_channels <= 0 || kernel_size <= 0 || groups <= 0 || in_channels % groups ||
        out_channels % groups || opts.stride < 0 || opts.padding < 0 || opts.dilation < 0) {
        tg_error("tg_nn_conv1d: in_channels=%lld and out_channels=%lld must be positive multiples of groups=%d, "
                 "kernel_size=%d positive, stride=%d, padding=%d, dilation=%d non-negative",
                 (long long)in_channels, (long long)out_channels, groups, kernel_size, opts.stride, opts.padding,
                 opts.dilation);
        return NULL;
    }
    tg_module *m = tg_module_new(&conv1d_type, sizeof(conv1d_state));
    *(conv1d_state *)tg_module_state(m) = (conv1d_state){in_channels, out_channels, kernel_size, opts};
    return nn_finish(m, nn_init_weight_and_bias(m, TG_SHAPE(out_channels, in_channels / groups, kernel_size),
                                                out_channels, !opts.no_bias));
}

/* ---- ConvTranspose2d ---- */

typedef struct {
    int64_t in_channels, out_channels;
    int kernel_size;
    tg_conv_transpose_opts opts;
} conv_transpose_state;

static void conv_transpose_repr(tg_module *self, char *buf, size_t size) {
    conv_transpose_state *s = tg_module_state(self);
    const tg_conv_transpose_opts *o = &s->opts;
    snprintf(buf, size,
             "%lld, %lld, kernel_size=(%d, %d), stride=(%d, %d), padding=(%d, %d), output_padding=(%d, %d), "
             "dilation=(%d, %d), groups=%d, bias=%s",
             (long long)s->in_channels, (long long)s->out_channels, s->kernel_size, s->kernel_size,
             o->stride ? o->stride : 1, o->stride ? o->stride : 1, o->padding, o->padding, o->output_padding,
             o->output_padding, o->dilation ? o->dilation : 1, o->dilation ? o->dilation : 1, o->groups ? o->groups : 1,
             o->no_bias ? "False" : "True");
}

static tg_status check_conv_transpose_input(conv_transpose_state *s, tg_tensor *x) {
    int nd = tg_ndim(x);
    if ((nd != 3 && nd != 4) || tg_size(x, -3) != s->in_channels) {
        char buf[96];
        return tg_error("ConvTranspose2d(%lld, %lld, kernel_size=%d): input %s must be [N, %lld, H, W] or [%lld, H, W]",
                        (long long)s->in_channels, (long long)s->out_channels, s->kernel_size,
                        tg_shape_str(tg_shape_of(x), buf, sizeof buf), (long long)s->in_channels,
                        (long long)s->in_channels);
    }
    return TG_OK;
}

static tg_tensor *conv_transpose_forward(tg_module *self, tg_tensor *x) {
    conv_transpose_state *s = tg_module_state(self);
    if (check_conv_transpose_input(s, x)) return NULL;
    return tg_conv_transpose2d(x, tg_module_param(self, "weight"), tg_module_param(self, "bias"), s->opts);
}

static const tg_module_type conv_transpose_type = {"ConvTranspose2d", conv_transpose_forward, NULL,
                                                   conv_transpose_repr};

tg_tensor *tg_nn_conv_transpose2d_forward_size(tg_module *m, tg_tensor *x, const int64_t *output_size, int n) {
    const char *op = "tg_nn_conv_transpose2d_forward_size";
    if (!m) return tg_error_null_input(op, 0), NULL;
    if (tg_unusable_(x)) return tg_error_unusable_input(op, x, 1), NULL;
    if (tg_module_type_of(m) != &conv_transpose_type)
        return tg_error("%s: expected a ConvTranspose2d module, got %s", op, tg_module_type_of(m)->name), NULL;
    conv_transpose_state *s = tg_module_state(m);
    if (check_conv_transpose_input(s, x)) return NULL;
    int nd = tg_ndim(x);
    if (!output_size || (n != 2 && n != nd)) /* PyTorch's ValueError */
        return tg_error("ConvTranspose2D: for %dD input, output_size must have 2 or %d elements (got %d)", nd, nd,
                        output_size ? n : 0),
               NULL;
    const int64_t *hw = output_size + (n - 2);
    return tg_conv_transpose2d_to_size(x, tg_module_param(m, "weight"), tg_module_param(m, "bias"), s->opts, hw[0],
                                       hw[1]);
}

tg_module *tg_nn_conv_transpose2d(int64_t in_channels, int64_t out_channels, int kernel_size,
                                  tg_conv_transpose_opts opts) {
    int groups = opts.groups ? opts.groups : 1, stride = opts.stride ? opts.stride : 1;
    if (in_channels <= 0 || out_channels <= 0 || kernel_size <= 0 || groups <= 0 || in_channels % groups ||
        out_channels % groups || opts.stride < 0 || opts.padding < 0 || opts.dilation < 0 || opts.output_padding < 0 ||
        (opts.output_padding >= stride && opts.output_padding >= (opts.dilation ? opts.dilation : 1))) {
        tg_error("tg_nn_conv_transpose2d: in_channels=%lld and out_channels=%lld must be positive multiples of "
                 "groups=%d, kernel_size=%d positive, stride=%d, padding=%d, dilation=%d non-negative and "
                 "output_padding=%d non-negative and below stride or dilation",
                 (long long)in_channels, (long long)out_channels, groups, kernel_size, opts.stride, opts.padding,
                 opts.dilation, opts.output_padding);
        return NULL;
    }
    tg_module *m = tg_module_new(&conv_transpose_type, sizeof(conv_transpose_state));
    *(conv_transpose_state *)tg_module_state(m) = (conv_transpose_state){in_channels, out_channels, kernel_size, opts};
    return nn_finish(m,
                     nn_init_weight_and_bias(m, TG_SHAPE(in_channels, out_channels / groups, kernel_size, kernel_size),
                                             out_channels, !opts.no_bias));
}
