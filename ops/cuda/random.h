/* CUDA entry points of ops/cuda/random.cu, called by ops/random.c (weak: NULL without
 * CUDA, and optional with it: when absent, random CUDA tensors are drawn on the CPU and
 * copied). They draw from the CUDA generator (core/rng_impl.h): Philox4x32-10 (tg_philox)
 * under `seed`, a range of counters from `offset` reserved by tg_rng_reserve_cuda,
 * element i of the contiguous tensor t reading
 *   kind 0 uniform [a, b):   float32: counter offset + i/4, word i%4, (word >> 8) * 2^-24;
 *                            float64: counter offset + i/2, words (2(i%2), 2(i%2)+1) as
 *                            ((hi << 21) ^ (lo >> 11)) * 2^-53; then a + (b - a) u in double
 *   kind 1 normal (mean a, std b): counter offset + i/4; Box-Muller on words (0,1) for
 *                            elements 0-1, (2,3) for 2-3: r = sqrt(-2 log u1), th = 2 pi u2,
 *                            u = tg_uint_to_unit(word); even element r cos th, odd r sin th
 * The layout is fixed so that a test can compute the same numbers on the host
 * (tests/cuda/nn_ops_test.cc). */
#ifndef TG_OPS_CUDA_RANDOM_H
#define TG_OPS_CUDA_RANDOM_H

#include <stdint.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills the contiguous float32/float64 tensor t (kind 0 uniform, 1 normal). */
tg_status tg_cuda_random_fill(tg_tensor *t, int kind, double a, double b, uint64_t seed, uint64_t offset)
    __attribute__((weak));
/* tg_dropout's mask: element i of the contiguous float32/float64 `mask` is 0 where
 * word i%4 of counter offset + i/4 is below `threshold` (p * 2^32), else `scale`. */
tg_status tg_cuda_dropout_mask(tg_tensor *mask, uint64_t threshold, double scale, uint64_t seed, uint64_t offset)
    __attribute__((weak));
/* tg_bernoulli: out[i] = 1 where word i%4 of counter offset + i/4, times 2^-32, is below
 * probs[i] (in double), else 0; out and probs contiguous, of the same floating dtype. */
tg_status tg_cuda_bernoulli(tg_tensor *out, tg_tensor *probs, uint64_t seed, uint64_t offset) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
