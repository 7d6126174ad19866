/* Built-in modules (torch.nn.*). Functional ops own PyTorch's functional names
 * (tg_linear, tg_conv2d, tg_relu in ops/), so module constructors are tg_nn_*.
 *
 * Every constructor returns a NEW module owned by the caller (tg_module_free, or
 * hand it to tg_nn_sequential / tg_register_module), or NULL + error on bad
 * arguments. Modules are made float32 on the CPU; tg_module_to / tg_module_cast
 * move them. Parameters are initialised exactly as PyTorch's reset_parameters()
 * does, drawing from the default generator (core/rng.h) in the same order (weight,
 * then bias) and the same numbers: after tg_manual_seed(s) a module starts from the
 * values that torch.manual_seed(s) gives the same PyTorch module (tests/ops/random_test.cc).
 * Options structs: zero fields mean PyTorch's defaults; where 0 is a meaningful
 * value that differs from the default, start from the struct's TG_*_OPTS(...) macro
 * (PyTorch's defaults written out), in which a zero is a zero (core/options.h). */
#ifndef TG_NN_LAYERS_H
#define TG_NN_LAYERS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"
#include "nn/module.h"
#include "ops/conv.h"
#include "ops/interpolate.h"
#include "ops/pool.h"
#include "ops/shape.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    bool no_bias; /* PyTorch's bias=False */
} tg_linear_opts;

/* torch.nn.Linear(in_features, out_features): weight [out, in] ~ kaiming_uniform_(a=sqrt(5))
 * (= U(-1/sqrt(in), 1/sqrt(in))), bias [out] ~ U(-1/sqrt(in), 1/sqrt(in)).
 * Parameters "weight", "bias". Input [..., in] -> [..., out]. */
tg_module *tg_nn_linear(int64_t in_features, int64_t out_features, tg_linear_opts opts);

/* torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, dilation,
 * groups, bias=!no_bias, padding_mode): weight [out, in/groups, kH, kW] ~
 * kaiming_uniform_(a=sqrt(5)), bias [out] ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in =
 * in/groups * kH * kW. kH = kW = kernel_size unless opts.kernel_sizes is set (PyTorch's
 * kernel_size=(3, 1)); per-dim stride/padding/dilation, padding="same" and padding_mode
 * as tg_conv_opts (ops/conv.h). */
tg_module *tg_nn_conv2d(int64_t in_channels, int64_t out_channels, int kernel_size, tg_conv_opts opts);
/* A Conv2d's options as given to tg_nn_conv2d (zero fields: defaults); TG_ERROR for
 * another kind of module. */
tg_status tg_nn_conv2d_get_opts(tg_module *conv, tg_conv_opts *opts);

/* torch.nn.MaxPool2d / AvgPool2d (opts.kernel_size required; stride 0 = kernel_size). */
tg_module *tg_nn_max_pool2d(tg_pool_opts opts);
tg_module *tg_nn_avg_pool2d(tg_pool_opts opts);
/* torch.nn.AdaptiveAvgPool2d((out_h, out_w)) (tg_adaptive_avg_pool2d); (1, 1) is the
 * global average pooling of ResNets' heads. No parameters. */
tg_module *tg_nn_adaptive_avg_pool2d(int64_t out_h, int64_t out_w);
/* A MaxPool2d's options as given; TG_ERROR for another kind of module. */
tg_status tg_nn_max_pool2d_get_opts(tg_module *pool, tg_pool_opts *opts);

typedef struct {
    double eps;                  /* 0: 1e-5 */
    double momentum;             /* 0: 0.1; a real 0 (running stats frozen): TG_BATCH_NORM_OPTS(.momentum = 0) */
    bool cumulative;             /* PyTorch's momentum=None: cumulative moving average */
    bool no_affine;              /* affine=False */
    bool no_track_running_stats; /* track_running_stats=False */
    bool defaults_filled;        /* set by TG_BATCH_NORM_OPTS(...): every field as written (core/options.h) */
} tg_batch_norm_opts;
/* nn.BatchNorm's defaults written out, so that a zero is a zero: TG_BATCH_NORM_OPTS(.momentum = 0). */
#define TG_BATCH_NORM_OPTS(...) TG_OPTS_WITH_DEFAULTS(tg_batch_norm_opts, TG_BATCH_NORM_DEFAULTS, __VA_ARGS__)
#define TG_BATCH_NORM_DEFAULTS .eps = 1e-5, .momentum = 0.1

/* torch.nn.BatchNorm1d ([N, C] or [N, C, L]) / BatchNorm2d ([N, C, H, W]): parameters
 * "weight" (ones) and "bias" (zeros) unless no_affine; buffers "running_mean" (zeros),
 * "running_var" (ones), "num_batches_tracked" (int64 0) unless no_track_running_stats.
 * Training normalises with batch statistics and updates the running ones (unbiased
 * variance); eval uses the running ones. */
tg_module *tg_nn_batch_norm1d(int64_t num_features, tg_batch_norm_opts opts);
tg_module *tg_nn_batch_norm2d(int64_t num_features, tg_batch_norm_opts opts);
/* relu(bn(x) + residual) (residual NULL: relu(bn(x))), the same bits as
 * tg_relu(tg_add(tg_forward(bn, x), residual)). A BatchNorm1d/2d without hooks runs
 * tg_batch_norm_add_relu (ops/norm.h: one pass on the CPU in training) with its
 * parameters, running statistics and mode; any other norm module (a SyncBatchNorm after
 * conversion) or one with hooks runs those three ops. */
tg_tensor *tg_nn_batch_norm_add_relu(tg_module *bn, tg_tensor *x, tg_tensor *residual);

typedef struct {
    double eps;           /* 0: 1e-5 */
    bool no_affine;       /* elementwise_affine=False */
    bool defaults_filled; /* set by TG_LAYER_NORM_OPTS(...): every field as written (core/options.h) */
} tg_layer_norm_opts;
#define TG_LAYER_NORM_OPTS(...) TG_OPTS_WITH_DEFAULTS(tg_layer_norm_opts, .eps = 1e-5, __VA_ARGS__)

/* torch.nn.LayerNorm(normalized_shape): over the last normalized_shape.ndim dims;
 * "weight" ones, "bias" zeros of normalized_shape. */
tg_module *tg_nn_layer_norm(tg_shape normalized_shape, tg_layer_norm_opts opts);

/* torch.nn.Dropout(p): zeroes with probability p in training, identity in eval. */
tg_module *tg_nn_dropout(double p);

/* torch.nn.Dropout2d(p): zeroes whole channels of [N, C, H, W] ([N, C, L]) with
 * probability p in training (tg_dropout2d), identity in eval. */
tg_module *tg_nn_dropout2d(double p);

/* torch.nn.Embedding(num_embeddings, embedding_dim, padding_idx): "weight" [num, dim]
 * ~ N(0, 1), the padding_idx row zeros; input int64 indices [...] -> [..., dim]
 * (tg_embedding, whose options these are). Fails on a padding_idx out of [-num, num). */
tg_module *tg_nn_embedding(int64_t num_embeddings, int64_t embedding_dim, tg_embedding_opts opts);

/* Activations (no parameters). leaky_relu: slope 0 means PyTorch's 0.01. */
tg_module *tg_nn_relu(void);
tg_module *tg_nn_leaky_relu(double negative_slope);
tg_module *tg_nn_sigmoid(void);
tg_module *tg_nn_tanh(void);
tg_module *tg_nn_gelu(void);

/* torch.nn.Softmax(dim) / LogSoftmax(dim) (dim required: PyTorch's dim=None is a
 * deprecated guess); the dim is checked against the input at forward. */
tg_module *tg_nn_softmax(int dim);
tg_module *tg_nn_log_softmax(int dim);

/* torch.nn.Upsample(size | scale_factor, mode, align_corners) on [N, C, H, W]
 * (tg_interpolate, whose options these are: nearest, bilinear or bicubic). */
tg_module *tg_nn_upsample(tg_interpolate_opts opts);

/* torch.nn.Identity: returns its input (the same tensor, as PyTorch). */
tg_module *tg_nn_identity(void);

/* torch.nn.Flatten(start_dim, end_dim); PyTorch's defaults are (1, -1). */
tg_module *tg_nn_flatten(int start_dim, int end_dim);

/* torch.nn.Sequential: children named "0", "1", ... run in order. Takes ownership of
 * the `count` modules, also when it fails (a NULL entry, e.g. a constructor that
 * failed: the others are freed and NULL returned, the first error kept). */
tg_module *tg_nn_sequential(int count, tg_module *const *modules);
/* Appends m as the next child (Sequential.append); takes ownership of m. */
tg_status tg_nn_sequential_append(tg_module *sequential, tg_module *m);

/* torch.nn.ModuleList: holds modules as children "0", "1", ... (so the state dict
 * names them as PyTorch's) without running them: its forward fails, as PyTorch's
 * does; a user module's forward calls tg_nn_module_list_get(list, i). Ownership and
 * NULL entries as tg_nn_sequential (count 0 makes an empty list). */
tg_module *tg_nn_module_list(int count, tg_module *const *modules);
/* ModuleList.append: takes ownership of m (also on failure). */
tg_status tg_nn_module_list_append(tg_module *list, tg_module *m);
/* list[i] (borrowed; negative i counts from the end), or NULL + error naming the index and the length. */
tg_module *tg_nn_module_list_get(tg_module *list, int i);
/* len(list); -1 + error when list is not a ModuleList. */
int tg_nn_module_list_len(tg_module *list);

#ifdef __cplusplus
}
#include <initializer_list>
/* TG_NN_SEQUENTIAL(a, b, c): tg_nn_sequential over the listed modules. */
static inline tg_module *tg_nn_sequential_list(std::initializer_list<tg_module *> modules) {
    return tg_nn_sequential((int)modules.size(), modules.begin());
}
#define TG_NN_SEQUENTIAL(...) tg_nn_sequential_list({__VA_ARGS__})
#else
/* TG_NN_SEQUENTIAL(a, b, c): tg_nn_sequential over the listed modules. */
#define TG_NN_SEQUENTIAL(...) \
    tg_nn_sequential((int)(sizeof((tg_module *[]){__VA_ARGS__}) / sizeof(tg_module *)), (tg_module *[]){__VA_ARGS__})
#endif

#endif
