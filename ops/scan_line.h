/* One line of a running sum or product, the formula both devices run: the CPU loop in
 * ops/scan.c and the CUDA kernel in ops/cuda/scan.cu expand this macro, so the CPU
 * tests check the arithmetic the GPU does. KIND: TG_SCAN_SUM or TG_SCAN_PROD; T: the
 * element type, ACC: the accumulator (double for float32 too, as PyTorch's CPU
 * kernels); x and out are read and written at strides xs and os (elements). */
#ifndef TG_OPS_SCAN_LINE_H
#define TG_OPS_SCAN_LINE_H

typedef enum { TG_SCAN_SUM, TG_SCAN_PROD } tg_scan_kind;

#define TG_SCAN_LINE(KIND, T, ACC, x, xs, out, os, len)           \
    do {                                                          \
        ACC acc_ = (KIND) == TG_SCAN_SUM ? (ACC)0 : (ACC)1;       \
        for (int64_t k_ = 0; k_ < (len); k_++) {                  \
            ACC v_ = (ACC)(x)[k_ * (xs)];                         \
            acc_ = (KIND) == TG_SCAN_SUM ? acc_ + v_ : acc_ * v_; \
            (out)[k_ * (os)] = (T)acc_;                           \
        }                                                         \
    } while (0)

#endif
