/* Subnormal flushing (core/denormal.h): the FTZ and DAZ bits of the x86 MXCSR register,
 * which is per thread; core/parallel.c hands the caller's bits to the pool's workers. */
#include "core/denormal.h"

#include "core/denormal_bits.h"

bool tg_set_flush_denormal(bool on) {
#if TG_HAVE_MXCSR
    unsigned csr = _mm_getcsr();
    _mm_setcsr(on ? csr | TG_MXCSR_FLUSH : csr & ~TG_MXCSR_FLUSH);
    return true;
#else
    (void)on;
    return false;
#endif
}

bool tg_get_flush_denormal(void) { return tg_flush_bits() == TG_MXCSR_FLUSH; }
