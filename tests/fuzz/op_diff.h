/* Differential fuzzing of the op API (tests/fuzz/op_diff_main.c; docs/fuzzing.md).
 *
 * A case is one op row, drawn input shapes and options, and a dtype. The driver runs
 * the op on float64 inputs and on the same values in the case's dtype (float32 or
 * bfloat16), compares the two, checks gradients by finite differences in float64 and,
 * with a GPU, compares CUDA with the CPU.
 *
 * Adding an op is adding one row to a table in op_diff_rows_*.c: a draw function that
 * fills the case's inputs and options, a run function that builds the outputs. */
#ifndef TG_TESTS_FUZZ_OP_DIFF_H
#define TG_TESTS_FUZZ_OP_DIFF_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad.h"

#define OD_MAX_IN 6
#define OD_MAX_OUT 2

/* The values an input holds. */
typedef enum {
    DOM_ANY = 0,  /* uniform in [-2, 2] */
    DOM_POS,      /* [0.5, 2.5]: log, sqrt, pow's base */
    DOM_NONZERO,  /* +-[0.5, 2]: divisors */
    DOM_UNIT,     /* [0.05, 0.95]: probabilities */
    DOM_SMALLINT, /* integers in [-2, 2]: comparisons meet ties */
    DOM_SPECIAL,  /* numbers mixed with inf, -inf and NaN */
    DOM_INDEX,    /* int64 in [0, bound) */
    DOM_BOOL,     /* bool */
} od_domain;

/* How an input reaches the op: every layout is a view of a float64 leaf made with
 * differentiable ops, so the same recipe serves the forward runs and gradcheck. */
typedef enum {
    LAYOUT_CONTIGUOUS = 0,
    LAYOUT_TRANSPOSED, /* transpose(base, d0, d1) */
    LAYOUT_STEPPED,    /* slice(base, d0, 1, .., 2): stride 2 and an offset */
    LAYOUT_NARROWED,   /* narrow(base, d0, 2, size): a storage offset */
    LAYOUT_EXPANDED,   /* expand of a base with size-1 dims and fewer leading dims */
    NUM_LAYOUTS
} od_layout;

typedef struct {
    tg_shape shape; /* what the op sees */
    od_domain dom;
    int64_t bound;   /* DOM_INDEX: values in [0, bound) */
    bool keep_f32;   /* stays float32 in a bfloat16 run (weights next to a bf16 input) */
    bool contiguous; /* never given another layout (inputs written in place) */
    bool no_grad;    /* not checked by gradcheck */
    /* drawn by the driver */
    od_layout layout;
    int d0, d1;
    tg_shape base; /* the leaf's shape */
} od_input;

typedef struct {
    int n_in;
    od_input in[OD_MAX_IN];
    int64_t i[8]; /* integer options, meaning per row */
    double d[4];  /* real options */
    bool no_grad; /* this case's options are not differentiable (e.g. cast to int) */
    /* Size budget: shrinking draws again under a smaller one. */
    int max_ndim;
    int64_t max_size;
    uint64_t rng; /* the case's own generator (splitmix64 state) */
} od_case;

struct od_row;
typedef void (*od_draw_fn)(const struct od_row *row, od_case *c);
/* Builds the outputs from the inputs (already in the run's dtype and layout); returns
 * how many (0 when the op failed, with its message recorded). */
typedef int (*od_run_fn)(const struct od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out);

enum {
    OD_NO_GRAD = 1 << 0,     /* not differentiable: no gradcheck */
    OD_NO_LOWP = 1 << 1,     /* bfloat16 refused by design (random fills) */
    OD_SEEDED = 1 << 2,      /* random: each run is seeded; two runs must give the same bits */
    OD_NO_GRADGRAD = 1 << 3, /* first order only */
    OD_SAME_OUTS = 1 << 4,   /* the two outputs must be equal (rng state round trip) */
    OD_EXACT = 1 << 5,       /* the dtype's result must equal float64's exactly (copies, indices) */
};

typedef struct od_row {
    const char *name;    /* what the case runs, e.g. "tg_sub" */
    const char *doc_row; /* the first function of its docs/ops.md row, e.g. "tg_add" */
    od_draw_fn draw;
    od_run_fn run;
    unsigned flags;
    od_domain dom, dom2; /* the first input's and the others' values (generic draws) */
    double tol;          /* multiplies the dtype's tolerance; 0 means 1 */
    /* generic rows call one of these */
    tg_tensor *(*f1)(tg_tensor *);
    tg_tensor *(*f2)(tg_tensor *, tg_tensor *);
    tg_tensor *(*fs)(tg_tensor *, double);
} od_row;

/* The tables, one per file; each ends with a row whose name is NULL. */
extern const od_row od_rows_elementwise[];
extern const od_row od_rows_reduce[];
extern const od_row od_rows_shape[];
extern const od_row od_rows_nn[];
extern const od_row od_rows_random[];

/* ---- drawing (op_diff_draw.c) ---- */
uint64_t od_next(od_case *c);
/* Uniform integer in [lo, hi] (hi < lo gives lo). */
int64_t od_int(od_case *c, int64_t lo, int64_t hi);
double od_unif(od_case *c, double lo, double hi);
bool od_coin(od_case *c, double p);
/* A size within the budget: 0 now and then, 1 often. */
int64_t od_dim(od_case *c);
/* ndim in [min_nd, max_nd] (capped by the budget), sizes from od_dim. */
tg_shape od_shape(od_case *c, int min_nd, int max_nd);
/* A shape that broadcasts to s: leading dims dropped, some sizes set to 1. */
tg_shape od_broadcastable(od_case *c, tg_shape s);
/* Appends an input; returns it for further settings. */
od_input *od_add(od_case *c, tg_shape shape, od_domain dom);
/* A dim of an ndim-dim tensor, negative half of the time (0 for ndim 0). */
int od_pick_dim(od_case *c, int ndim);
/* Draws each input's layout and base shape. */
void od_draw_layouts(od_case *c);
/* Fills `values` (base numel doubles) for input k, rounded to `dtype`'s precision. */
void od_draw_values(od_case *c, int k, double *values, int64_t n, tg_dtype dtype);
/* The view the op sees: the layout recipe applied to the base tensor. */
tg_tensor *od_apply_layout(const od_input *in, tg_tensor *base);

/* Generic draws and runs shared by the tables. */
void od_draw_unary(const od_row *row, od_case *c);
void od_draw_binary(const od_row *row, od_case *c);
void od_draw_scalar(const od_row *row, od_case *c); /* x and d[0] in [-2, 2] (rounded) */
int od_run_f1(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out);
int od_run_f2(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out);
int od_run_fs(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out);
/* out[0] = t; 1, or 0 when t is NULL. */
int od_one(tg_tensor *t, tg_tensor **out);
int od_two(tg_tensor *a, tg_tensor *b, tg_tensor **out);

#endif
