/* Philox4x32-10 and the bits-to-uniform maps of the CUDA generator (core/rng.h), the one
 * definition both devices compile: ops/cuda/random.cu's kernels and the host (the
 * CPU's reference in tests, gradcheck's directions) call these, so the words and
 * uniforms a kernel draws are the ones a host computation gets. */
#ifndef TG_CORE_PHILOX_H
#define TG_CORE_PHILOX_H

#include <stdint.h>

#include "core/host_device.h"

/* Philox4x32-10 block `counter` under `seed`: four uniformly random 32-bit words. */
TG_HD_INLINE void tg_philox(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
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
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* A uniform double in (0, 1] from 32 random bits (never 0, so log() is safe). */
TG_HD_INLINE double tg_uint_to_unit(uint32_t bits) { return ((double)bits + 1.0) / 4294967296.0; }

/* A uniform in [0, 1) with float32's 24 bits: the word's top 24 bits times 2^-24. */
TG_HD_INLINE double tg_philox_unit_f32(uint32_t word) { return (double)(word >> 8) * (1.0 / 16777216.0); }

/* A uniform in [0, 1) with float64's 53 bits from two words: ((hi << 21) ^ (lo >> 11)) * 2^-53. */
TG_HD_INLINE double tg_philox_unit_f64(uint32_t hi, uint32_t lo) {
    return (double)((((uint64_t)hi) << 21) ^ (lo >> 11)) * (1.0 / 9007199254740992.0);
}

/* A uniform in [0, 1) with 32 bits (Bernoulli draws: one < p). */
TG_HD_INLINE double tg_philox_unit_u32(uint32_t word) { return (double)word * (1.0 / 4294967296.0); }

/* Philox counters a fill of n elements reserves: one per two float64 uniforms
 * (two words each), one per four elements otherwise (uniform float32, normal,
 * Bernoulli and dropout: a word or a Box-Muller half-pair each). */
TG_HD_INLINE uint64_t tg_philox_counters(int64_t n, int float64_uniform) {
    return float64_uniform ? (uint64_t)(n + 1) / 2 : (uint64_t)(n + 3) / 4;
}

#endif
