/* Which device runs an op: the check that its tensors share one, and calling a CUDA
 * entry point that may not be compiled in (weak symbol, NULL then). */
#ifndef TG_OPS_DISPATCH_H
#define TG_OPS_DISPATCH_H

#include "core/error.h"
#include "core/tensor.h"
#include "core/tensor_impl.h"

/* TG_OK when a and b are on one device, else "<op>: expected <what> on one device,
 * got cpu and cuda:0". */
tg_status tg_check_same_device(const char *op, const tg_tensor *a, const tg_tensor *b, const char *what);

/* Whether t's storage is on a CUDA device (its kernels are the CUDA entry points). */
static inline bool tg_on_cuda(const tg_tensor *t) { return t->storage->device.kind == TG_DEVICE_CUDA; }

#define TG_CUDA_CALL(op, fn, ...) \
    ((fn) ? (fn)(__VA_ARGS__)     \
          : tg_error("%s: no CUDA kernel for this op in this build (%s is not compiled in)", (op), #fn))

/* An op's device ladder, as one expression: on a CUDA tensor t, cuda_call (a
 * TG_CUDA_CALL); on the CPU, cpu_f32 or cpu_f64 (void kernels, taking the same
 * arguments) by t's dtype. TG_OK or TG_ERROR; only the chosen branch's arguments are
 * evaluated.
 *     if (TG_DEVICE_DISPATCH(x, TG_CUDA_CALL("tg_avg_pool2d", tg_cuda_avg_pool2d_forward, y, x, q),
 *                            tg_cpu_avg_pool_f32, tg_cpu_avg_pool_f64, q, planes, tg_data_ptr(x), tg_data_ptr(y)))
 *         return NULL; */
#define TG_DEVICE_DISPATCH(t, cuda_call, cpu_f32, cpu_f64, ...) \
    (tg_on_cuda(t) ? (cuda_call) : ((t)->dtype == TG_FLOAT32 ? cpu_f32(__VA_ARGS__) : cpu_f64(__VA_ARGS__), TG_OK))

#endif
