/* The default random generators, one per device kind as in PyTorch, both seeded by
 * tg_manual_seed (torch.manual_seed):
 * - CPU: mt19937, as PyTorch's CPUGeneratorImpl. ops/random.c draws from it the way
 *   ATen's CPU kernels do, so after tg_manual_seed(s) the same calls give the numbers
 *   torch.manual_seed(s) gives: rand, randn, randint, randperm, bernoulli, dropout,
 *   nn.init and therefore every module's initial weights.
 * - CUDA: Philox4x32-10 under (seed, offset), counter-based so that a kernel's threads
 *   draw independently; each op reserves a range of counters (tg_rng_reserve_cuda).
 *   Its numbers are tapegrad's own (PyTorch's CUDA stream is not reproduced).
 * Process-wide and locked, like PyTorch's default generators. */
#ifndef TG_CORE_RNG_H
#define TG_CORE_RNG_H

#include <stdbool.h>
#include <stdint.h>

#include "core/philox.h" /* tg_philox, tg_uint_to_unit: the CUDA generator's words */

#ifdef __cplusplus
extern "C" {
#endif

/* mt19937 (Matsumoto and Nishimura), seeded as std::mt19937 and PyTorch do. Also a
 * private generator: data/loader.c's torch.Generator().manual_seed(seed). */
typedef struct {
    uint32_t words[624];
    uint32_t index; /* next word of `words` to temper; 624: regenerate first */
} tg_mt19937;

void tg_mt19937_seed(tg_mt19937 *g, uint64_t seed); /* uses the low 32 bits, as PyTorch */
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

typedef struct {
    uint64_t seed;        /* the last tg_manual_seed (torch.initial_seed) */
    tg_mt19937 cpu;       /* the CPU generator */
    bool has_next_normal; /* normal_distribution<double> caches its second Box-Muller value */
    double next_normal;
    uint64_t offset;      /* the CUDA generator: next unused Philox counter under `seed` */
} tg_rng_state;

/* torch.manual_seed: both generators, and forgets the cached normal value. */
void tg_manual_seed(uint64_t seed);
tg_rng_state tg_rng_get_state(void);
void tg_rng_set_state(tg_rng_state state);

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
