/* torch.einsum: the equation is parsed once and reduced to diagonal (a letter twice
 * in one operand), sum (a letter nowhere else), permute, reshape and one batched
 * matmul per pair of operands (left to right), so it runs on every device and
 * differentiates to any order. Returns a NEW reference, or NULL with a message naming
 * the op, the equation and what is wrong. */
#ifndef TG_OPS_EINSUM_H
#define TG_OPS_EINSUM_H

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.einsum(equation, operands[0..count)): letters a-z A-Z, spaces ignored, "..."
 * for the remaining dims (broadcast between operands, aligned right), "->" and the
 * output letters, or none: then the output is the ellipsis dims and the letters used
 * once, in ASCII order (PyTorch's rule). Dims of one letter must have one size, or
 * size 1 (broadcast). Examples: "ij,jk->ik", "bhqd,bhkd->bhqk", "ii->i", "ij->",
 * "...ij,...jk". An output without "..." when an operand has one is an error. */
tg_tensor *tg_einsum(const char *equation, tg_tensor *const *operands, int count);

#ifdef __cplusplus
}
#endif
#endif
