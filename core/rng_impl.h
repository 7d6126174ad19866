/* The default generators as the library's kernels use them (not installed: tapegrad.h
 * does not include it): mt19937's words, the locked CPU generator, the CUDA generator's
 * Philox counters (core/philox.h). */
#ifndef TG_CORE_RNG_IMPL_H
#define TG_CORE_RNG_IMPL_H

#include <stdint.h>

#include "core/philox.h" /* tg_philox, tg_uint_to_unit: the CUDA generator's words */
#include "core/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

void tg_mt19937_regenerate(tg_mt19937 *g);

static inline uint32_t tg_mt19937_next(tg_mt19937 *g) {
    if (g->index >= 624) tg_mt19937_regenerate(g);
    uint32_t y = g->words[g->index++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

/* CPUGeneratorImpl::random64: two words, the first one high. */
static inline uint64_t tg_mt19937_next64(tg_mt19937 *g) {
    uint64_t hi = tg_mt19937_next(g);
    return hi << 32 | tg_mt19937_next(g);
}

/* torch.randperm(n, generator=g) on the CPU: perm[0..n-1] (n < 2^32). */
void tg_mt19937_permutation(tg_mt19937 *g, int64_t *perm, int64_t n);

/* The CPU generator, locked: a fill draws its numbers between these two calls. */
tg_rng_state *tg_rng_lock_cpu(void);
void tg_rng_unlock_cpu(void);

/* Reserves n Philox counters (each gives four 32-bit words) of the CUDA generator;
 * the kernel draws counters offset .. offset + n - 1 under seed. */
typedef struct {
    uint64_t seed, offset;
} tg_philox_range;
tg_philox_range tg_rng_reserve_cuda(uint64_t n);

#ifdef __cplusplus
}
#endif
#endif
