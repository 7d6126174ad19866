/* The elementwise ops as ONNX nodes (tg_onnx_export): one line per kind of
 * ops/unary_formulas.h and ops/binary_formulas.h, its ONNX operator or a short chain. */
#include <math.h>

#include "core/tensor_impl.h"
#include "onnx/graph.h"
#include "ops/elementwise_impl.h"

/* A node of one or two inputs into `out`, or into a fresh value when out is NULL. */
static const char *node(tg_onnx_op *op, const char *type, const char *a, const char *b, const char *out) {
    const char *result = out ? out : tg_onnx_value(op);
    const char *in[] = {a, b};
    return tg_onnx_add_node(op, type, b ? 2 : 1, in, 1, &result) ? result : NULL;
}

/* x <op> scalar, the scalar in x's dtype. */
static const char *with_scalar(tg_onnx_op *op, const char *type, const char *x, double s, const char *out) {
    return node(op, type, x, tg_onnx_const_scalar(op, tg_onnx_input(op, 0)->dtype, s), out);
}

static tg_status done(const char *last) { return last ? TG_OK : TG_ERROR; }

/* Activations with one attribute: a node of the call's input and output. */
static tg_status with_attr(tg_onnx_op *op, const char *type, const char *attr, double value) {
    tg_onnx_node *n = tg_onnx_add_node_same(op, type);
    tg_onnx_attr_float(n, attr, (float)value);
    return n ? TG_OK : TG_ERROR;
}

static tg_status gelu(tg_onnx_op *op, const char *x, const char *y) { /* 0.5 x (1 + erf(x / sqrt 2)) */
    const char *e = node(op, "Erf", with_scalar(op, "Mul", x, M_SQRT1_2, NULL), NULL, NULL);
    return done(node(op, "Mul", with_scalar(op, "Mul", x, 0.5, NULL), with_scalar(op, "Add", e, 1, NULL), y));
}

static tg_status gelu_tanh(tg_onnx_op *op, const char *x, const char *y) { /* tanh approximation */
    const char *cube = node(op, "Mul", node(op, "Mul", x, x, NULL), x, NULL);
    const char *inner = node(op, "Add", x, with_scalar(op, "Mul", cube, 0.044715, NULL), NULL);
    const char *t = node(op, "Tanh", with_scalar(op, "Mul", inner, sqrt(2 / M_PI), NULL), NULL, NULL);
    return done(node(op, "Mul", with_scalar(op, "Mul", x, 0.5, NULL), with_scalar(op, "Add", t, 1, NULL), y));
}

static tg_status clamp(tg_onnx_op *op, const char *x, const char *y, double lo, double hi) {
    tg_dtype d = tg_onnx_input(op, 0)->dtype;
    const char *in[] = {x, isnan(lo) ? "" : tg_onnx_const_scalar(op, d, lo),
                        isnan(hi) ? "" : tg_onnx_const_scalar(op, d, hi)};
    return tg_onnx_add_node(op, "Clip", 3, in, 1, &y) ? TG_OK : TG_ERROR;
}

tg_status tg_unary_to_onnx(tg_onnx_op *op, tg_unary_kind kind, double a, double b) {
    const char *x = tg_onnx_input_name(op, 0), *y = tg_onnx_output_name(op, 0);
    switch (kind) {
    case TG_UNARY_NEG: return done(node(op, "Neg", x, NULL, y));
    case TG_UNARY_EXP: return done(node(op, "Exp", x, NULL, y));
    case TG_UNARY_LOG: return done(node(op, "Log", x, NULL, y));
    case TG_UNARY_ADD_SCALAR: return done(with_scalar(op, "Add", x, a, y));
    case TG_UNARY_MUL_SCALAR: return done(with_scalar(op, "Mul", x, a, y));
    case TG_UNARY_RSUB_SCALAR:
        return done(node(op, "Sub", tg_onnx_const_scalar(op, tg_onnx_input(op, 0)->dtype, a), x, y));
    case TG_UNARY_DIV_SCALAR: return done(with_scalar(op, "Div", x, a, y));
    case TG_UNARY_POW_SCALAR: return done(with_scalar(op, "Pow", x, a, y));
    case TG_UNARY_SQRT: return done(node(op, "Sqrt", x, NULL, y));
    case TG_UNARY_RSQRT: return done(node(op, "Reciprocal", node(op, "Sqrt", x, NULL, NULL), NULL, y));
    case TG_UNARY_ABS: return done(node(op, "Abs", x, NULL, y));
    case TG_UNARY_SIGN: return done(node(op, "Sign", x, NULL, y));
    case TG_UNARY_RELU: return done(node(op, "Relu", x, NULL, y));
    case TG_UNARY_LEAKY_RELU: return with_attr(op, "LeakyRelu", "alpha", a);
    case TG_UNARY_SIGMOID: return done(node(op, "Sigmoid", x, NULL, y));
    case TG_UNARY_TANH: return done(node(op, "Tanh", x, NULL, y));
    case TG_UNARY_GELU: return gelu(op, x, y);
    case TG_UNARY_GELU_TANH: return gelu_tanh(op, x, y);
    case TG_UNARY_SILU: return done(node(op, "Mul", x, node(op, "Sigmoid", x, NULL, NULL), y));
    case TG_UNARY_SOFTPLUS: /* beta a; past the threshold b the two agree to rounding */
        return done(a == 1 ? node(op, "Softplus", x, NULL, y)
                           : with_scalar(op, "Div",
                                         node(op, "Softplus", with_scalar(op, "Mul", x, a, NULL), NULL, NULL), a, y));
    case TG_UNARY_CLAMP: return clamp(op, x, y, a, b);
    case TG_UNARY_ERF: return done(node(op, "Erf", x, NULL, y));
    case TG_UNARY_RECIPROCAL: return done(node(op, "Reciprocal", x, NULL, y));
    case TG_UNARY_SQUARE: return done(node(op, "Mul", x, x, y));
    case TG_UNARY_SIN: return done(node(op, "Sin", x, NULL, y));
    case TG_UNARY_COS: return done(node(op, "Cos", x, NULL, y));
    case TG_UNARY_EXPM1: return done(with_scalar(op, "Sub", node(op, "Exp", x, NULL, NULL), 1, y));
    case TG_UNARY_LOG1P: return done(node(op, "Log", with_scalar(op, "Add", x, 1, NULL), NULL, y));
    case TG_UNARY_FLOOR: return done(node(op, "Floor", x, NULL, y));
    case TG_UNARY_CEIL: return done(node(op, "Ceil", x, NULL, y));
    case TG_UNARY_ROUND: return done(node(op, "Round", x, NULL, y)); /* half to even, as torch.round */
    case TG_UNARY_LOGSIGMOID: return done(node(op, "Log", node(op, "Sigmoid", x, NULL, NULL), NULL, y));
    case TG_UNARY_ELU: { /* alpha a, scale b: SELU's form */
        tg_onnx_node *n = tg_onnx_add_node_same(op, b == 1 ? "Elu" : "Selu");
        tg_onnx_attr_float(n, "alpha", (float)a);
        if (b != 1) tg_onnx_attr_float(n, "gamma", (float)b);
        return n ? TG_OK : TG_ERROR;
    }
    case TG_UNARY_MISH:
        return done(node(op, "Mul", x, node(op, "Tanh", node(op, "Softplus", x, NULL, NULL), NULL, NULL), y));
    case TG_UNARY_HARDSWISH: return done(node(op, "HardSwish", x, NULL, y));
    case TG_UNARY_HARDSIGMOID: {
        tg_onnx_node *n = tg_onnx_add_node_same(op, "HardSigmoid");
        tg_onnx_attr_float(n, "alpha", 1.0f / 6);
        tg_onnx_attr_float(n, "beta", 0.5f);
        return n ? TG_OK : TG_ERROR;
    }
    case TG_UNARY_SOFTSIGN: return done(node(op, "Softsign", x, NULL, y));
    default: return tg_onnx_unsupported(op, "no ONNX operator computes it");
    }
}

tg_status tg_binary_to_onnx(tg_onnx_op *op, tg_binary_kind kind) {
    const char *a = tg_onnx_input_name(op, 0), *b = tg_onnx_input_name(op, 1), *y = tg_onnx_output_name(op, 0);
    /* ONNX wants one dtype: the promoted one (the output's, or the first input's for comparisons) */
    tg_dtype want =
        tg_onnx_output(op, 0)->dtype == TG_BOOL ? tg_onnx_input(op, 0)->dtype : tg_onnx_output(op, 0)->dtype;
    const char *in[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        if (tg_onnx_input(op, i)->dtype == want) continue;
        const char *cast = tg_onnx_value(op);
        tg_onnx_attr_int(tg_onnx_add_node(op, "Cast", 1, &in[i], 1, &cast), "to", tg_onnx_dtype(want));
        in[i] = cast;
    }
    a = in[0], b = in[1];
    switch (kind) {
    case TG_BINARY_ADD: return done(node(op, "Add", a, b, y));
    case TG_BINARY_SUB: return done(node(op, "Sub", a, b, y));
    case TG_BINARY_MUL: return done(node(op, "Mul", a, b, y));
    case TG_BINARY_DIV: return done(node(op, "Div", a, b, y));
    case TG_BINARY_MAXIMUM: return done(node(op, "Max", a, b, y));
    case TG_BINARY_MINIMUM: return done(node(op, "Min", a, b, y));
    case TG_BINARY_POW: return done(node(op, "Pow", a, b, y));
    case TG_BINARY_EQ: return done(node(op, "Equal", a, b, y));
    case TG_BINARY_NE: return done(node(op, "Not", node(op, "Equal", a, b, NULL), NULL, y));
    case TG_BINARY_LT: return done(node(op, "Less", a, b, y));
    case TG_BINARY_LE: return done(node(op, "LessOrEqual", a, b, y));
    case TG_BINARY_GT: return done(node(op, "Greater", a, b, y));
    case TG_BINARY_GE: return done(node(op, "GreaterOrEqual", a, b, y));
    case TG_BINARY_FMOD: {
        tg_onnx_node *n = tg_onnx_add_node(op, "Mod", 2, in, 1, &y);
        tg_onnx_attr_int(n, "fmod", 1);
        return n ? TG_OK : TG_ERROR;
    }
    default: return tg_onnx_unsupported(op, "no ONNX operator computes it");
    }
}
