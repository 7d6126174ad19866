/* 2-D pooling on [N, C, H, W] (or [C, H, W]) tensors. */
#ifndef TG_OPS_POOL_H
#define TG_OPS_POOL_H

#include <stdbool.h>

#include "core/options.h" /* tg_pair */
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* kernel_size is required; stride 0 means kernel_size (PyTorch's default), padding
 * 0, ceil_mode false, dilation 0 means 1; avg pooling counts padding unless
 * count_exclude_pad. The scalars apply to both spatial dims; a pair (kernel_sizes,
 * strides, paddings, dilations) with either field set gives each dim its own value,
 * as PyTorch's kernel_size=(3, 1) (a stride pair of {0, 0} is kernel_sizes). */
typedef struct {
    int kernel_size, stride, padding;
    bool ceil_mode;
    bool count_exclude_pad; /* avg only: PyTorch's count_include_pad=False */
    int dilation;           /* max only */
    tg_pair kernel_sizes, strides, paddings, dilations;
} tg_pool_opts;

/* torch.nn.functional.max_pool2d. The window of output (oh, ow) reads rows
 * oh*stride - padding + i*dilation, i < kernel_size (columns alike); output size
 * floor((H + 2 padding - dilation (kernel_size - 1) - 1) / stride) + 1 (ceil with
 * ceil_mode). The argmax indices are saved for backward. If indices is not NULL,
 * *indices receives them (int64, flat in H*W, a new reference). Fails on a window
 * that holds no input element (possible with dilation: PyTorch returns -inf and an
 * index outside the input there). */
tg_tensor *tg_max_pool2d(tg_tensor *x, tg_pool_opts opts, tg_tensor **indices);
/* torch.nn.functional.avg_pool2d (no dilation: a dilation above 1 is an error). */
tg_tensor *tg_avg_pool2d(tg_tensor *x, tg_pool_opts opts);
/* torch.nn.functional.adaptive_avg_pool2d. An output of 1x1 (global average pooling)
 * is tg_mean over H and W with keepdim, as ATen's. */
tg_tensor *tg_adaptive_avg_pool2d(tg_tensor *x, int64_t out_h, int64_t out_w);

#ifdef __cplusplus
}
#endif
#endif
