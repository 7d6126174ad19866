/* In-place writes: tg_copy_, tg_fill_, and the rules that every in-place entry point
 * follows (tg_add_, tg_mul_, the random fills, and custom in-place ops), as PyTorch's:
 *
 * - A leaf that requires grad cannot be written in place while grad mode is on
 *   (TG_NO_GRAD first, as an optimizer does).
 * - The target may not reach one element twice (an expanded, stride-0 tensor), and a
 *   source may not share some but not all of its elements with the target (a
 *   transpose of it, an overlapping slice): both are errors. The identical tensor
 *   (x += x) is allowed; a strided source whose layout might interleave with the
 *   target is read from a copy.
 * - When grad mode is on and the target or a source requires grad, the write is
 *   recorded: the op runs out of place with its normal gradient, the values go into
 *   the target, and the target's history moves to the new node (PyTorch's rebase).
 *   Recording needs a target whose storage no other tensor sees (not a view, nor the
 *   base of a live view): tapegrad has no CopySlices, so that case is an error.
 * - Every write bumps the storage's version, so a tensor saved for backward that was
 *   overwritten is detected when backward needs it.
 *
 * Each returns TG_OK, or TG_ERROR with a message that names the op. */
#ifndef TG_OPS_INPLACE_H
#define TG_OPS_INPLACE_H

#include "autograd/function.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.Tensor.copy_: src broadcast to dst's shape, cast to dst's dtype, across
 * devices. Recorded (dst's old value gets a zero gradient, src the incoming one). */
tg_status tg_copy_(tg_tensor *dst, tg_tensor *src);
/* torch.Tensor.fill_: every element set to value. Recorded with a zero gradient. */
tg_status tg_fill_(tg_tensor *t, double value);

/* ---- for in-place ops (built-in and custom) ----
 * An in-place op calls tg_inplace_check first. sources[0..num_sources) are the
 * tensors it reads (entries may be replaced by a copy that is safe to read while the
 * target is written; the copy belongs to the current scope). *record tells whether
 * the write must be recorded; then the op computes its result out of place with
 * recorded ops (reading tg_clone(target) if its backward saves the old value) and
 * calls tg_inplace_commit(target, result); otherwise it writes directly and bumps
 * the version (tg_bump_version). */
tg_status tg_inplace_check(const char *op, tg_tensor *target, tg_tensor **sources, int num_sources, bool *record);
/* Writes result (target's shape, dtype and device) into target and gives target
 * result's graph history. */
tg_status tg_inplace_commit(tg_tensor *target, tg_tensor *result);

/* Recorded form of a write that replaces every element (fill_, the random fills):
 * target takes `values` (same shape, dtype, device) and its old value gets a zero
 * gradient. fn names the graph node: static const tg_function f =
 * TG_OVERWRITE_FUNCTION("normal_"). */
tg_status tg_inplace_overwrite(const tg_function *fn, tg_tensor *target, tg_tensor *values);
tg_tensor *tg_overwrite_forward(tg_ctx *ctx, tg_tensor *const *in);
void tg_overwrite_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in);
#define TG_OVERWRITE_FUNCTION(op_name)                                                                        \
    {                                                                                                         \
        .name = op_name, .num_inputs = 1, .forward = tg_overwrite_forward, .backward = tg_overwrite_backward, \
        .low_precision = TG_LOW_PRECISION_NATIVE                                                              \
    }

#ifdef __cplusplus
}
#endif
#endif
