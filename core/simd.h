/* Vector instructions for hot loops without building for one CPU (internal). */
#ifndef TG_CORE_SIMD_H
#define TG_CORE_SIMD_H

/* A loop function built three times, for the baseline x86-64 (SSE2), AVX2 and AVX-512;
 * the program picks one when it starts (GCC's target_clones, an ifunc), so a binary built
 * here still runs on any x86-64. The numbers are the same in every build: -std=c11 keeps
 * GCC from fusing a*b+c into an FMA, so each clone rounds each operation as the source
 * says, only more elements at a time. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TG_VECTOR_CLONES __attribute__((target_clones("default", "avx2", "avx512f")))
#else
#define TG_VECTOR_CLONES
#endif

#endif
