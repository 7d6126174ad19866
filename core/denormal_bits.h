/* The calling thread's subnormal-flushing bits, read and set (internal: core/denormal.c
 * and the thread pool, which runs each loop with its caller's bits). */
#ifndef TG_CORE_DENORMAL_BITS_H
#define TG_CORE_DENORMAL_BITS_H

#if defined(__x86_64__) || defined(__SSE2__)
#include <xmmintrin.h>
#define TG_HAVE_MXCSR 1
#define TG_MXCSR_FLUSH 0x8040u /* FTZ (bit 15) and DAZ (bit 6) */
static inline unsigned tg_flush_bits(void) { return _mm_getcsr() & TG_MXCSR_FLUSH; }
static inline void tg_set_flush_bits(unsigned bits) {
    unsigned csr = _mm_getcsr();
    if ((csr & TG_MXCSR_FLUSH) != bits) _mm_setcsr((csr & ~TG_MXCSR_FLUSH) | bits);
}
#else
#define TG_HAVE_MXCSR 0
#define TG_MXCSR_FLUSH 1u
static inline unsigned tg_flush_bits(void) { return 0; }
static inline void tg_set_flush_bits(unsigned bits) { (void)bits; }
#endif

#endif
