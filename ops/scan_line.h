/* One line of a running sum, the formula both devices run: the CPU loop in ops/scan.c
 * and the CUDA kernel in ops/cuda/scan.cu expand this macro, so the CPU tests check
 * the arithmetic the GPU does. T: the element type, ACC: the accumulator (double for
 * float32 too, as PyTorch's CPU kernel); x and out are read and written at strides
 * xs and os (elements). */
#ifndef TG_OPS_SCAN_LINE_H
#define TG_OPS_SCAN_LINE_H

#define TG_CUMSUM_LINE(T, ACC, x, xs, out, os, len) \
    do {                                            \
        ACC acc_ = 0;                               \
        for (int64_t k_ = 0; k_ < (len); k_++) {    \
            acc_ += (ACC)(x)[k_ * (xs)];            \
            (out)[k_ * (os)] = (T)acc_;             \
        }                                           \
    } while (0)

#endif
