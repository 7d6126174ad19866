/* The elementwise kernels' op codes, shared by ops/elementwise.c and
 * ops/cuda/elementwise.cu so both backends compute the same list. */
#ifndef TG_OPS_ELEMENTWISE_KINDS_H
#define TG_OPS_ELEMENTWISE_KINDS_H

/* out = f(x; a, b) with two scalar parameters. */
typedef enum {
    TG_UNARY_NEG,
    TG_UNARY_EXP,
    TG_UNARY_LOG,
    TG_UNARY_ADD_SCALAR,  /* x + a */
    TG_UNARY_MUL_SCALAR,  /* x * a */
    TG_UNARY_RSUB_SCALAR, /* a - x */
    TG_UNARY_POW_SCALAR,  /* x ^ a */
    TG_UNARY_SQRT,
    TG_UNARY_RSQRT,
    TG_UNARY_ABS,
    TG_UNARY_SIGN,
    TG_UNARY_RELU,
    TG_UNARY_LEAKY_RELU,  /* x > 0 ? x : a * x */
    TG_UNARY_SIGMOID,
    TG_UNARY_TANH,
    TG_UNARY_GELU,        /* exact (erf) form */
    TG_UNARY_GELU_TANH,   /* tanh approximation */
    TG_UNARY_SILU,
    TG_UNARY_SOFTPLUS,    /* beta a, threshold b */
    TG_UNARY_CLAMP,       /* min a, max b (NaN bound = none) */
    TG_UNARY_ERF,
    TG_UNARY_RECIPROCAL,
    TG_UNARY_SQUARE,
    TG_UNARY_SIN,
    TG_UNARY_COS,
    TG_UNARY_GT_SCALAR,   /* (x > a) as 0/1 in x's dtype: masks for backward formulas */
    TG_UNARY_ISFINITE,    /* 1 where x is neither NaN nor +-Inf, as 0/1 in x's dtype */
    TG_UNARY_DIV_SCALAR,  /* x / a (floating only) */
    TG_UNARY_NOT_LE_SCALAR, /* !(x <= a) as 0/1 in x's dtype: relu's mask, 1 at NaN as PyTorch's */
    TG_UNARY_EXPM1,
    TG_UNARY_LOG1P,
    TG_UNARY_FLOOR,
    TG_UNARY_CEIL,
    TG_UNARY_ROUND,       /* half to even, as torch.round */
    TG_UNARY_TRUNC,
    TG_UNARY_LOGSIGMOID,
    TG_UNARY_ELU,         /* alpha a, scale b (elu: b = 1; selu: PyTorch's constants) */
    TG_UNARY_MISH,
    TG_UNARY_HARDSWISH,
    TG_UNARY_HARDSIGMOID,
    TG_UNARY_COUNT
} tg_unary_kind;

/* out = f(a, b), broadcast. Comparisons give bool. Formulas: ops/binary_formulas.h. */
typedef enum {
    TG_BINARY_ADD,
    TG_BINARY_SUB,
    TG_BINARY_MUL,
    TG_BINARY_DIV,
    TG_BINARY_MAXIMUM,
    TG_BINARY_MINIMUM,
    TG_BINARY_POW,
    TG_BINARY_ATAN2,     /* floating only */
    TG_BINARY_FMOD,      /* C's fmod / %: the dividend's sign */
    TG_BINARY_REMAINDER, /* Python's %: the divisor's sign */
    TG_BINARY_EQ,        /* comparisons from here on (TG_BINARY_IS_COMPARISON) */
    TG_BINARY_NE,
    TG_BINARY_LT,
    TG_BINARY_LE,
    TG_BINARY_GT,
    TG_BINARY_GE,
    TG_BINARY_COUNT
} tg_binary_kind;

#define TG_BINARY_IS_COMPARISON(k) ((k) >= TG_BINARY_EQ)

#endif
