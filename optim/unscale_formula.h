/* GradScaler's unscale of one gradient element, the one definition both devices compile:
 * optim/kernels.c's CPU loop and optim/cuda/optim.cu's kernel expand TG_UNSCALE_ELEMENT, so
 * the CPU tests check the arithmetic the GPU runs. It is PyTorch 1.13's
 * _amp_foreach_non_finite_check_and_unscale_ element function:
 *
 *   found_inf = !isfinite(v) ? 1 : found_inf      (the value before the multiply)
 *   v = inv_scale == 1 ? v : v * inv_scale        (multiplied even when not finite)
 *
 * v: a T lvalue (float or double); inv_scale: float, cast to T (PyTorch's opmath);
 * found: an int lvalue, only ever set to 1. */
#ifndef TG_OPTIM_UNSCALE_FORMULA_H
#define TG_OPTIM_UNSCALE_FORMULA_H

#define TG_UNSCALE_ELEMENT(T, v, inv_scale, found)            \
    do {                                                      \
        T v_ = (v);                                           \
        if (!isfinite(v_)) (found) = 1;                       \
        (v) = (inv_scale) == 1.0f ? v_ : v_ * (T)(inv_scale); \
    } while (0)

#endif
