/* torch.nn.functional.pad: constant, reflect, replicate and circular padding, with
 * PyTorch's pad list (last dim first: (left, right, top, bottom, ...)). A composition
 * of narrow, cat and index_select, so it runs on every device and differentiates to
 * any order. Returns a NEW reference, or NULL with a message naming the op, the pads
 * and the shape. */
#ifndef TG_OPS_PAD_H
#define TG_OPS_PAD_H

#include <stdint.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TG_PAD_CONSTANT = 0, TG_PAD_REFLECT, TG_PAD_REPLICATE, TG_PAD_CIRCULAR } tg_pad_mode;

/* F.pad(x, pad, mode, value): pad[0..count) pairs (before, after) for the last
 * count / 2 dims, the last dim first. A negative pad removes elements (all modes, as
 * PyTorch). constant: any number of dims, filled with `value` (cast to x's dtype).
 * reflect (the edge not repeated), replicate (the edge repeated) and circular (wrap
 * around): the last 1, 2 or 3 dims of an input with one or two more dims (PyTorch's
 * batched and unbatched forms); reflect needs pads smaller than the dim, circular
 * pads no larger than it. Circular crops the negative pads first and wraps what is
 * left (PyTorch's order: [0,1,2,3,4] with (-1, 2) gives [1,2,3,4,1,2]), so its pads
 * must not exceed that. `value` must be 0 for those modes. */
tg_tensor *tg_pad(tg_tensor *x, const int64_t *pad, int count, tg_pad_mode mode, double value);

#ifdef __cplusplus
}
#endif
#endif
