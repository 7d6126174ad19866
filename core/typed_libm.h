/* libm by element type, for the formulas both devices compile (docs/design.md, "One
 * formula per op, both devices"): TG_EXP(x) is expf for a float x and exp for a double
 * one, and so on; in C through _Generic, under nvcc through overloads that the host and
 * the device both compile. A formula written with these names is the same text for
 * both devices, and no file keeps its own shim. Only float and double arguments
 * (integer formulas convert to double first: tg_int_pow). */
#ifndef TG_CORE_TYPED_LIBM_H
#define TG_CORE_TYPED_LIBM_H

#include <math.h>

#include "core/host_device.h"

#ifdef __CUDACC__

#define TG_LIBM_1(fn, ff, fd)                        \
    TG_HD_INLINE float fn(float x) { return ff(x); } \
    TG_HD_INLINE double fn(double x) { return fd(x); }
#define TG_LIBM_2(fn, ff, fd)                                    \
    TG_HD_INLINE float fn(float x, float y) { return ff(x, y); } \
    TG_HD_INLINE double fn(double x, double y) { return fd(x, y); }
TG_LIBM_1(tg_libm_exp, expf, exp)
TG_LIBM_1(tg_libm_log, logf, log)
TG_LIBM_1(tg_libm_log1p, log1pf, log1p)
TG_LIBM_1(tg_libm_sqrt, sqrtf, sqrt)
TG_LIBM_1(tg_libm_tanh, tanhf, tanh)
TG_LIBM_1(tg_libm_erf, erff, erf)
TG_LIBM_1(tg_libm_fabs, fabsf, fabs)
TG_LIBM_1(tg_libm_sin, sinf, sin)
TG_LIBM_1(tg_libm_cos, cosf, cos)
TG_LIBM_1(tg_libm_expm1, expm1f, expm1)
TG_LIBM_1(tg_libm_floor, floorf, floor)
TG_LIBM_1(tg_libm_ceil, ceilf, ceil)
TG_LIBM_1(tg_libm_nearbyint, nearbyintf, nearbyint)
TG_LIBM_1(tg_libm_trunc, truncf, trunc)
TG_LIBM_2(tg_libm_pow, powf, pow)
TG_LIBM_2(tg_libm_atan2, atan2f, atan2)
TG_LIBM_2(tg_libm_fmod, fmodf, fmod)
#undef TG_LIBM_1
#undef TG_LIBM_2
#define TG_EXP(x) tg_libm_exp(x)
#define TG_LOG(x) tg_libm_log(x)
#define TG_LOG1P(x) tg_libm_log1p(x)
#define TG_SQRT(x) tg_libm_sqrt(x)
#define TG_TANH(x) tg_libm_tanh(x)
#define TG_ERF(x) tg_libm_erf(x)
#define TG_FABS(x) tg_libm_fabs(x)
#define TG_SIN(x) tg_libm_sin(x)
#define TG_COS(x) tg_libm_cos(x)
#define TG_EXPM1(x) tg_libm_expm1(x)
#define TG_FLOOR(x) tg_libm_floor(x)
#define TG_CEIL(x) tg_libm_ceil(x)
#define TG_NEARBYINT(x) tg_libm_nearbyint(x)
#define TG_TRUNC(x) tg_libm_trunc(x)
#define TG_POW(x, y) tg_libm_pow(x, y)
#define TG_ATAN2(x, y) tg_libm_atan2(x, y)
#define TG_FMOD(x, y) tg_libm_fmod(x, y)

#else

#include "core/vector_libm.h"

#define TG_EXP(x) _Generic((x), float : expf, default : exp)(x)
#define TG_LOG(x) _Generic((x), float : logf, default : log)(x)
#define TG_LOG1P(x) _Generic((x), float : log1pf, default : log1p)(x)
#define TG_SQRT(x) _Generic((x), float : sqrtf, default : sqrt)(x)
#define TG_TANH(x) _Generic((x), float : tg_vtanhf, default : tanh)(x) /* vectorizable: core/vector_libm.h */
#define TG_ERF(x) _Generic((x), float : erff, default : erf)(x)
#define TG_FABS(x) _Generic((x), float : fabsf, default : fabs)(x)
#define TG_SIN(x) _Generic((x), float : sinf, default : sin)(x)
#define TG_COS(x) _Generic((x), float : cosf, default : cos)(x)
#define TG_EXPM1(x) _Generic((x), float : expm1f, default : expm1)(x)
#define TG_FLOOR(x) _Generic((x), float : floorf, default : floor)(x)
#define TG_CEIL(x) _Generic((x), float : ceilf, default : ceil)(x)
#define TG_NEARBYINT(x) _Generic((x), float : nearbyintf, default : nearbyint)(x)
#define TG_TRUNC(x) _Generic((x), float : truncf, default : trunc)(x)
#define TG_POW(x, y) _Generic((x), float : powf, default : pow)(x, y)
#define TG_ATAN2(x, y) _Generic((x), float : atan2f, default : atan2)(x, y)
#define TG_FMOD(x, y) _Generic((x), float : fmodf, default : fmod)(x, y)

#endif

/* x^y for integer-valued x and y, as integer pow is computed on both devices (then cast
 * to the integer type). For y >= 0 the exact result is an integer, and it is rounded to
 * it: CUDA's pow allows 2 ulp, so 3^2 could come back as 8.999... and truncate to 8
 * (exact below 2^51, where 2 ulp < 0.5). glibc's pow is within 0.52 ulp, so it returns a
 * representable integer exactly, and any double at or above 2^53 is an integer: on the
 * host the rint changes nothing. */
TG_HD_INLINE double tg_int_pow(double x, double y) {
    double r = pow(x, y);
    return y >= 0 ? rint(r) : r;
}

#endif
