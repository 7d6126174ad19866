/* Which device runs an op: the check that its tensors share one, and calling a CUDA
 * entry point that may not be compiled in (weak symbol, NULL then). */
#ifndef TG_OPS_DISPATCH_H
#define TG_OPS_DISPATCH_H

#include "core/error.h"
#include "core/tensor.h"

/* TG_OK when a and b are on one device, else "<op>: expected <what> on one device,
 * got cpu and cuda:0". */
tg_status tg_check_same_device(const char *op, const tg_tensor *a, const tg_tensor *b, const char *what);

#define TG_CUDA_CALL(op, fn, ...)                                                            \
    ((fn) ? (fn)(__VA_ARGS__)                                                                \
          : tg_error("%s: no CUDA kernel for this op in this build (%s is not compiled in)", \
                     (op), #fn))

#endif
