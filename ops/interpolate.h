/* torch.nn.functional.interpolate for 4-D inputs, nearest, bilinear and bicubic, composed of
 * index_select and broadcast multiply-adds (so it runs, and differentiates, on every
 * device those run on; the backward is index_select's scatter-add). */
#ifndef TG_OPS_INTERPOLATE_H
#define TG_OPS_INTERPOLATE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TG_INTERP_NEAREST = 0, TG_INTERP_BILINEAR, TG_INTERP_BICUBIC } tg_interp_mode;

/* Either size or scale_factor (not both). size {H, W}: size[1] == 0 means size[0] for
 * both; scale_factor {sh, sw}: [1] == 0 means [0] for both; the output is
 * floor(in * scale) and, as PyTorch with recompute_scale_factor unset, the source
 * positions use 1/scale itself. align_corners is for bilinear and bicubic (nearest
 * refuses it, as PyTorch does). */
typedef struct {
    tg_interp_mode mode;
    int64_t size[2];
    double scale_factor[2];
    bool align_corners;
} tg_interpolate_opts;

/* x [N, C, H, W] (float32 or float64) -> [N, C, H_out, W_out]. Nearest: source
 * index min(floor(dst * s), in - 1) with s = 1/scale or in/out in float, as ATen's
 * nearest_idx. Bilinear: source (dst + 0.5) * s - 0.5 clamped at 0 (align_corners:
 * dst * (in - 1)/(out - 1)), weights in the input's dtype. Bicubic: the same source
 * position unclamped, four taps floor(src) - 1 .. + 2 clamped into the input, Keys'
 * cubic weights with A = -0.75 (ATen's upsample_bicubic2d); the input itself when
 * both sizes are unchanged. */
tg_tensor *tg_interpolate(tg_tensor *x, tg_interpolate_opts opts);

#ifdef __cplusplus
}
#endif
#endif
