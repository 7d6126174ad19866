/* 2-D convolution and its transpose (im2col + GEMM on the CPU, im2col + cuBLAS on CUDA). */
#ifndef TG_OPS_CONV_H
#define TG_OPS_CONV_H

#include "core/options.h" /* tg_pair */
#include "core/tensor.h"
#include "ops/pad.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Zero fields mean PyTorch's defaults: stride 1, padding 0, dilation 1, groups 1,
 * padding_mode zeros. stride, padding and dilation apply to both spatial dims; a pair
 * (strides, paddings, dilations) with either field set gives each dim its own value
 * and wins over the scalar (a field of 0 in it is 0: a stride or dilation of 0 is an
 * error). padding_same is PyTorch's padding="same": the output has the input's size
 * (stride 1 only, as PyTorch), padded dilation * (k - 1) in all, the odd one at the
 * end; "valid" is padding 0, the default. padding_mode pads the input with
 * tg_pad's mode (reflect, replicate, circular) instead of zeros, as Conv2d's
 * padding_mode; tg_conv2d takes it too. no_bias is for the module. */
typedef struct {
    int stride, padding, dilation, groups;
    bool no_bias;
    tg_pair strides, paddings, dilations;
    bool padding_same;
    tg_pad_mode padding_mode; /* TG_PAD_CONSTANT (0) is "zeros" */
    tg_pair kernel_sizes;     /* the modules': a kernel of its own size per dim, wins over kernel_size */
} tg_conv_opts;

/* The per-dim stride, padding and dilation opts give (a pair with either field set, else
 * the scalar for both dims, else the default); padding_same is not resolved here. */
tg_pair tg_conv_opts_stride(tg_conv_opts opts);
tg_pair tg_conv_opts_padding(tg_conv_opts opts);
tg_pair tg_conv_opts_dilation(tg_conv_opts opts);

/* torch.nn.functional.conv2d: x [N, C_in, H, W], weight [C_out, C_in / groups, kH, kW],
 * bias [C_out] or NULL -> [N, C_out, H_out, W_out]. Fails on wrong ranks, channel
 * counts that do not match the groups, or an empty output. */
tg_tensor *tg_conv2d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, tg_conv_opts opts);

/* Zero fields mean PyTorch's defaults: stride 1, padding 0, output_padding 0,
 * dilation 1, groups 1 (both spatial dims alike). no_bias is for the module. */
typedef struct {
    int stride, padding, output_padding, dilation, groups;
    bool no_bias;
} tg_conv_transpose_opts;

/* torch.nn.functional.conv_transpose2d: x [N, C_in, H, W] (or unbatched [C_in, H, W]),
 * weight [C_in, C_out / groups, kH, kW], bias [C_out] or NULL ->
 * [N, C_out, (H-1)*stride - 2*padding + dilation*(kH-1) + output_padding + 1, ...].
 * It is conv2d's input gradient (the same kernels, CPU and CUDA), so it is
 * differentiable to any order. output_padding must be smaller than stride or
 * dilation, as PyTorch's. */
tg_tensor *tg_conv_transpose2d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, tg_conv_transpose_opts opts);

/* conv_transpose2d to the output size [out_h, out_w], as torch.nn.ConvTranspose2d's
 * forward(input, output_size): each spatial dim gets the output_padding that reaches
 * its size (opts.output_padding is not used, as PyTorch ignores it there). Fails
 * unless each size lies between the size output_padding 0 gives and that plus
 * stride - 1, with PyTorch's message ("requested an output size of ..."). */
tg_tensor *tg_conv_transpose2d_to_size(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, tg_conv_transpose_opts opts,
                                       int64_t out_h, int64_t out_w);

#ifdef __cplusplus
}
#endif
#endif
