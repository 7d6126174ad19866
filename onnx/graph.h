/* ONNX nodes for one recorded op: what a tg_function's .onnx mapping writes.
 *
 * tg_onnx_export (onnx/export.h) runs a module's forward with every top-level op
 * observed; for each op it calls the op's .onnx with a tg_onnx_op that names the
 * call's inputs and outputs as ONNX values. The mapping adds the nodes computing the
 * outputs from the inputs, with constants where ONNX wants inputs for what tapegrad
 * keeps as attributes. A custom op gets exported the same way:
 *
 *     static tg_status swish_onnx(tg_onnx_op *op) {   // x * sigmoid(x)
 *         const char *s = tg_onnx_value(op);
 *         tg_onnx_add_node(op, "Sigmoid", 1, (const char *[]){tg_onnx_input_name(op, 0)}, 1, &s);
 *         return tg_onnx_add_node(op, "Mul", 2, (const char *[]){tg_onnx_input_name(op, 0), s}, 1,
 *                             (const char *[]){tg_onnx_output_name(op, 0)}) ? TG_OK : TG_ERROR;
 *     }
 *     static const tg_function swish = {..., .onnx = swish_onnx};
 *
 * Every name returned here is owned by the graph being built (valid until the export
 * ends). Shapes are those of the example inputs: a mapping that bakes in a size
 * (Reshape's target, Expand's shape) says which dims follow the input's instead
 * (tg_onnx_reshape_target), so the exported model takes any batch size. */
#ifndef TG_ONNX_GRAPH_H
#define TG_ONNX_GRAPH_H

#include <stdint.h>

#include "autograd/function.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_onnx_node tg_onnx_node;

/* ---- the recorded call ---- */
int tg_onnx_num_inputs(const tg_onnx_op *op);
int tg_onnx_num_outputs(const tg_onnx_op *op);
/* The tensors of the call (borrowed): their shapes and dtypes are the example's. */
tg_tensor *tg_onnx_input(const tg_onnx_op *op, int i);
tg_tensor *tg_onnx_output(const tg_onnx_op *op, int i);
/* The ONNX value names of the call's inputs and outputs. */
const char *tg_onnx_input_name(const tg_onnx_op *op, int i);
const char *tg_onnx_output_name(const tg_onnx_op *op, int i);
/* The arguments the op was applied with (tg_apply_args), or NULL. */
const void *tg_onnx_attrs(const tg_onnx_op *op);
/* The opset being written (tg_onnx_opts.opset). */
int tg_onnx_opset(const tg_onnx_op *op);
/* The function applied (for a family of ops sharing one mapping). */
const tg_function *tg_onnx_function(const tg_onnx_op *op);
/* ONNX's TensorProto.DataType for a dtype (Cast's "to"). */
int tg_onnx_dtype(tg_dtype dtype);

/* ---- what the mapping writes ---- */
/* Adds a node of the default domain; returns it (for attributes) or NULL with an error. */
tg_onnx_node *tg_onnx_add_node(tg_onnx_op *op, const char *op_type, int num_inputs, const char *const *inputs,
                               int num_outputs, const char *const *outputs);
/* The common case: one node from the call's inputs to its outputs. */
tg_onnx_node *tg_onnx_add_node_same(tg_onnx_op *op, const char *op_type);
/* Attributes of a node (`n` may be NULL after a failed tg_onnx_add_node: then they do nothing). */
void tg_onnx_attr_int(tg_onnx_node *n, const char *name, int64_t value);
void tg_onnx_attr_float(tg_onnx_node *n, const char *name, float value);
void tg_onnx_attr_ints(tg_onnx_node *n, const char *name, const int64_t *values, int count);
void tg_onnx_attr_string(tg_onnx_node *n, const char *name, const char *value);
/* A fresh name for an intermediate value. */
const char *tg_onnx_value(tg_onnx_op *op);
/* Constants (graph initializers) and their names: a 1-D int64 tensor, a 0-dim scalar
 * of `dtype`, or a copy of a tensor's values. */
const char *tg_onnx_const_ints(tg_onnx_op *op, const int64_t *values, int count);
const char *tg_onnx_const_scalar(tg_onnx_op *op, tg_dtype dtype, double value);
const char *tg_onnx_const_tensor(tg_onnx_op *op, tg_tensor *t);
/* An int8 constant (ONNX's INT8; tapegrad has no int8 dtype): the quantised weights
 * QDQ models keep (DequantizeLinear's input and zero point). */
const char *tg_onnx_const_int8(tg_onnx_op *op, tg_shape shape, const int8_t *values);
/* The shape `shape` as a Reshape target that keeps the batch dim free: the leading dims
 * equal to input `input`'s are written 0 ("as the input"), the first that differs -1
 * (inferred: it holds the batch, merged or split), the rest as they are. tg_onnx_export
 * records the forward at a second batch size and refuses a graph that then differs. */
const char *tg_onnx_reshape_target(tg_onnx_op *op, int input, tg_shape shape);
/* Refuses the call: "tg_onnx_export: <op> in module <path>: <why>". Returns TG_ERROR. */
tg_status tg_onnx_unsupported(tg_onnx_op *op, const char *why);

#ifdef __cplusplus
}
#endif
#endif
