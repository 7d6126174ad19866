/* Random tensors, dropout and initialisers, from the default generators (core/rng.h),
 * seeded by tg_manual_seed. On the CPU the numbers are PyTorch's: after
 * tg_manual_seed(s) a contiguous tensor gets what torch.manual_seed(s) and the same
 * call give (ops/random.c says how each is drawn). CUDA tensors draw from tapegrad's
 * own Philox stream, as PyTorch's CUDA generator differs from its CPU one. */
#ifndef TG_OPS_RANDOM_H
#define TG_OPS_RANDOM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.rand: uniform [0, 1). torch.randn: standard normal. New references. */
tg_tensor *tg_rand(tg_shape shape, tg_opts opts);
tg_tensor *tg_randn(tg_shape shape, tg_opts opts);
/* torch.randint: integers in [low, high); int64 unless opts.dtype is another integer type. */
tg_tensor *tg_randint(int64_t low, int64_t high, tg_shape shape, tg_opts opts);
/* torch.rand_like / randn_like / randint_like: like's shape, dtype and device (a
 * contiguous result: PyTorch keeps a dense input's strides, so for a non-contiguous
 * `like` the same numbers land in other places). randint_like keeps like's dtype,
 * floating ones included. New references. */
tg_tensor *tg_rand_like(tg_tensor *like);
tg_tensor *tg_randn_like(tg_tensor *like);
tg_tensor *tg_randint_like(tg_tensor *like, int64_t low, int64_t high);
/* torch.randperm: a random permutation of 0..n-1, int64 unless opts.dtype is int32. */
tg_tensor *tg_randperm(int64_t n, tg_opts opts);
/* torch.bernoulli: 1 with probability p (elementwise), same dtype as p. */
tg_tensor *tg_bernoulli(tg_tensor *p);

/* In place (no graph; bump the version). bernoulli_ is Tensor.bernoulli_(p): 1 with
 * probability p, any dtype. */
tg_status tg_uniform_(tg_tensor *t, double low, double high);
tg_status tg_normal_(tg_tensor *t, double mean, double std);
tg_status tg_bernoulli_(tg_tensor *t, double p);

/* torch.get_rng_state / torch.set_rng_state: both generators' state as a new uint8
 * tensor, and back (an error for bytes that did not come from tg_get_rng_state).
 * Checkpoints save it so that a resumed run draws what the first one would have. */
tg_tensor *tg_get_rng_state(void);
tg_status tg_set_rng_state(tg_tensor *state);

/* torch.multinomial(probs, num_samples, replacement): indices (int64) of categories
 * drawn by the weights of probs [K] -> [num_samples] or [N, K] -> [N, num_samples]
 * (weights need not sum to 1), with PyTorch 1.13's numbers from the same seed: without
 * replacement, argmax / topk of probs / q with q ~ Exp(1) drawn in
 * row-major order (the exponential in double, -log(1 - u), then cast to the dtype);
 * with replacement, per row the cumulative distribution in the dtype (float for
 * bf16/fp16), normalised, and a binary search for each uniform double. Errors as
 * PyTorch's: a weight below 0, Inf or NaN, a row summing to 0, more samples than
 * categories without replacement. A CUDA input is drawn on the CPU and copied back. */
tg_tensor *tg_multinomial(tg_tensor *probs, int64_t num_samples, bool replacement);

/* torch.nn.functional.dropout: in training, zeroes elements with probability p and
 * scales the rest by 1/(1-p); identity in eval. Fails when p is outside [0, 1]. */
tg_tensor *tg_dropout(tg_tensor *x, double p, bool training);
/* torch.nn.functional.dropout2d (ATen's feature_dropout): zeroes whole channels,
 * one Bernoulli(1 - p) draw per [n, c] (a mask [N, C, 1, 1] scaled by 1/(1-p), drawn
 * as tg_dropout draws), identity in eval. Input [N, C, H, W], or [N, C, L] as
 * PyTorch 1.13 reads a 3-D input (channel-wise 1-D dropout); other ranks fail
 * (1.13 warns that they will). */
tg_tensor *tg_dropout2d(tg_tensor *x, double p, bool training);

/* torch.nn.init (fan_in/fan_out from dims 0 and 1 and the receptive field). */
typedef enum { TG_FAN_IN = 0, TG_FAN_OUT } tg_fan_mode;
tg_status tg_kaiming_uniform_(tg_tensor *t, double a, tg_fan_mode mode); /* leaky_relu gain */
tg_status tg_kaiming_normal_(tg_tensor *t, double a, tg_fan_mode mode);
tg_status tg_xavier_uniform_(tg_tensor *t, double gain);
tg_status tg_xavier_normal_(tg_tensor *t, double gain);
/* fan_in and fan_out of a weight shape, as torch.nn.init._calculate_fan_in_and_fan_out. */
tg_status tg_calculate_fans(tg_shape shape, int64_t *fan_in, int64_t *fan_out);

#ifdef __cplusplus
}
#endif
#endif
