/* Convolution modules beyond Conv2d (torch.nn.Conv1d, ConvTranspose2d), on the 2-D
 * convolution ops (ops/conv.h), so they run on every device conv2d runs on.
 * Constructors as in nn/layers.h: a NEW module or NULL + error; float32 CPU;
 * parameters drawn as PyTorch's reset_parameters() draws them. */
#ifndef TG_NN_CONV_LAYERS_H
#define TG_NN_CONV_LAYERS_H

#include <stdint.h>

#include "nn/module.h"
#include "ops/conv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.nn.Conv1d(in_channels, out_channels, kernel_size, stride, padding, dilation,
 * groups, bias=!no_bias, padding_mode) from opts' scalar fields, padding_same and
 * padding_mode (its pairs are Conv2d's, ignored here): weight [out, in/groups, k] ~
 * kaiming_uniform_(a=sqrt(5)), bias [out] ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
 * fan_in = in/groups * k. Input [N, C_in, L] or unbatched [C_in, L]. */
tg_module *tg_nn_conv1d(int64_t in_channels, int64_t out_channels, int kernel_size, tg_conv_opts opts);

/* torch.nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride, padding,
 * output_padding, dilation, groups, bias=!no_bias) (tg_conv_transpose2d):
 * weight [in, out/groups, k, k] ~ kaiming_uniform_(a=sqrt(5)) with PyTorch's fan_in
 * of that shape (out/groups * k * k), bias [out] ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
 * Input [N, C_in, H, W] or unbatched [C_in, H, W]. tg_forward uses output_padding;
 * tg_nn_conv_transpose2d_forward_size is forward(input, output_size). */
tg_module *tg_nn_conv_transpose2d(int64_t in_channels, int64_t out_channels, int kernel_size,
                                  tg_conv_transpose_opts opts);

/* ConvTranspose2d m's forward(input, output_size): output_size holds n = 2 ([H, W]) or
 * x's rank (the leading [N, C] or [C] are ignored, as PyTorch's) sizes; each spatial
 * dim's output_padding is inferred (tg_conv_transpose2d_to_size). Fails, as PyTorch,
 * on another count or a size no output_padding in [0, stride) reaches. */
tg_tensor *tg_nn_conv_transpose2d_forward_size(tg_module *m, tg_tensor *x, const int64_t *output_size, int n);

#ifdef __cplusplus
}
#endif
#endif
