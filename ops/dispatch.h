/* Calling a CUDA entry point that may not be compiled in (weak symbol, NULL then). */
#ifndef TG_OPS_DISPATCH_H
#define TG_OPS_DISPATCH_H

#include "core/error.h"

#define TG_CUDA_CALL(op, fn, ...)                                                            \
    ((fn) ? (fn)(__VA_ARGS__)                                                                \
          : tg_error("%s: no CUDA kernel for this op in this build (%s is not compiled in)", \
                     (op), #fn))

#endif
