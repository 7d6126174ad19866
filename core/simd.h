/* Vector instructions for hot loops without building for one CPU (internal). */
#ifndef TG_CORE_SIMD_H
#define TG_CORE_SIMD_H

/* A loop function built three times, for the baseline x86-64 (SSE2), x86-64-v3 (AVX2 with
 * FMA) and x86-64-v4 (AVX-512); the program picks one when it starts (GCC's target_clones,
 * an ifunc), so a binary built here still runs on any x86-64. The numbers are the same in
 * every build: -std=c11 keeps GCC from fusing a*b+c into an FMA, so each clone rounds each
 * operation as the source says, only more elements at a time. The levels, not "avx2": that
 * clone lacks FMA, so an explicit fmaf (Adam's exact division) was a libm call per element
 * and the loop scalar, 7 ms of the MLP's 11 ms step on an AVX2-only AMD EPYC. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TG_VECTOR_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define TG_VECTOR_CLONES
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
/* r[j] (16 32-bit lanes each) becomes column j of the 16 x 16 matrix whose rows are the
 * r's: the packing of the GEMM kernels (ops/cpu/gemm.c, ops/cpu/gemm_bf16.c). Callers are
 * compiled for AVX-512 and check the CPU first. */
__attribute__((target("avx512f"), always_inline)) static inline void tg_transpose16_epi32(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int i = 0; i < 2; i++)
        for (int c = 0; c < 4; c++) {
            t[8 * i + c] = _mm512_shuffle_i32x4(r[8 * i + c], r[8 * i + 4 + c], 0x88);
            t[8 * i + 4 + c] = _mm512_shuffle_i32x4(r[8 * i + c], r[8 * i + 4 + c], 0xdd);
        }
    for (int c = 0; c < 8; c++) {
        r[c] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0x88);
        r[c + 8] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0xdd);
    }
}

/* 16 bfloat16 values (bit patterns) widened to float32, exactly: each moves to the top half
 * of its 32-bit lane (core/lowp.h's tg_bf16_bits_to_float, 16 at a time). For the bfloat16
 * kernels (ops/cpu/gemm_bf16.c, ops/cpu/norm_bf16.c, ops/cpu/relu_bf16.c, ops/cpu/max_pool2x2.c). */
__attribute__((target("avx512f"), always_inline)) static inline __m512 tg_widen_bf16x16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#endif

#endif
