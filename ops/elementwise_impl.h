/* The elementwise kernels' entry for the library (not installed: tapegrad.h does not
 * include it): the kinds of ops/elementwise_kinds.h, generated from the formula tables,
 * run without a graph. */
#ifndef TG_OPS_ELEMENTWISE_IMPL_H
#define TG_OPS_ELEMENTWISE_IMPL_H

#include "autograd/function.h"
#include "core/tensor.h"
#include "ops/elementwise.h"
#include "ops/elementwise_kinds.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out = f(x) / f(a, b) into a preallocated out of the result's shape and dtype. */
tg_status tg_unary_into(const char *op, tg_unary_kind kind, tg_tensor *out, tg_tensor *x, double a, double b);
tg_status tg_binary_into(const char *op, tg_binary_kind kind, tg_tensor *out, tg_tensor *a, tg_tensor *b);
/* The ONNX nodes of a unary / binary kind (ops/elementwise_onnx.c). */
tg_status tg_unary_to_onnx(tg_onnx_op *op, tg_unary_kind kind, double a, double b);
tg_status tg_binary_to_onnx(tg_onnx_op *op, tg_binary_kind kind);
/* (x > a) as 0/1 in x's dtype; never recorded (masks in backward formulas). New reference. */
tg_tensor *tg_gt_mask(tg_tensor *x, double a);

#ifdef __cplusplus
}
#endif
#endif
