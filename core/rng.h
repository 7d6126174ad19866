/* The default random generators, one per device kind as in PyTorch, both seeded by
 * tg_manual_seed (torch.manual_seed):
 * - CPU: mt19937, as PyTorch's CPUGeneratorImpl. ops/random.c draws from it the way
 *   ATen's CPU kernels do, so after tg_manual_seed(s) the same calls give the numbers
 *   torch.manual_seed(s) gives: rand, randn, randint, randperm, bernoulli, dropout,
 *   nn.init and therefore every module's initial weights.
 * - CUDA: Philox4x32-10 under (seed, offset), counter-based so that a kernel's threads
 *   draw independently; each op reserves a range of counters (core/rng_impl.h).
 *   Its numbers are tapegrad's own (PyTorch's CUDA stream is not reproduced).
 * Process-wide and locked, like PyTorch's default generators. */
#ifndef TG_CORE_RNG_H
#define TG_CORE_RNG_H

#include <stdbool.h>
#include <stdint.h>

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

typedef struct {
    uint64_t seed;        /* the last tg_manual_seed (torch.initial_seed) */
    tg_mt19937 cpu;       /* the CPU generator */
    bool has_next_normal; /* normal_distribution<double> caches its second Box-Muller value */
    double next_normal;
    uint64_t offset; /* the CUDA generator: next unused Philox counter under `seed` */
} tg_rng_state;

/* torch.manual_seed: both generators, and forgets the cached normal value. */
void tg_manual_seed(uint64_t seed);
tg_rng_state tg_rng_get_state(void);
void tg_rng_set_state(tg_rng_state state);

#ifdef __cplusplus
}
#endif
#endif
