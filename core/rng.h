/* The default random generator: Philox4x32-10, counter-based, so that the CPU and
 * CUDA kernels draw the same numbers for the same seed and a draw can be split across
 * threads. State is (seed, offset); each random op reserves a range of counters.
 * Process-wide, like PyTorch's default generator. */
#ifndef TG_CORE_RNG_H
#define TG_CORE_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint64_t seed;
    uint64_t offset; /* next unused counter */
} tg_rng_state;

/* torch.manual_seed. */
void tg_manual_seed(uint64_t seed);
tg_rng_state tg_rng_get_state(void);
void tg_rng_set_state(tg_rng_state state);
/* Reserves n counters (each gives four 32-bit words); returns the state to draw from. */
tg_rng_state tg_rng_reserve(uint64_t n);

/* Philox4x32-10 block `counter` under `seed`: four uniformly random 32-bit words. */
static inline void tg_philox(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* A uniform float in (0, 1] from 32 random bits (never 0, so log() is safe). */
static inline double tg_uint_to_unit(uint32_t bits) { return ((double)bits + 1.0) / 4294967296.0; }

#ifdef __cplusplus
}
#endif
#endif
