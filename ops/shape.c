/* Shape ops: views (strides arithmetic on a shared storage) and their gradients.
 * Copying shape ops (cat, stack, index_select, gather, one_hot) are in ops/gather.c. */
#include "ops/shape.h"

#include <string.h>

#include "autograd/function.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "onnx/graph.h"
#include "ops/reduce.h"

/* Resolves one -1 and checks the element count (products checked for overflow: a
 * shape whose product wraps around to the right count is still refused). */
static tg_status infer_shape(const char *op, tg_shape from, tg_shape *to) {
    char a[128], b[128];
    if (to->ndim < 0 || to->ndim > TG_MAX_DIMS)
        return tg_error("%s: %d dims requested, at most %d are supported", op, to->ndim, TG_MAX_DIMS);
    int infer = -1;
    int64_t known = 1;
    bool overflow = false;
    for (int i = 0; i < to->ndim; i++) {
        if (to->dims[i] == -1 && infer < 0) {
            infer = i;
        } else if (to->dims[i] < 0) {
            return tg_error("%s: invalid size %lld in shape %s", op, (long long)to->dims[i],
                            tg_shape_str(*to, a, sizeof a));
        } else {
            overflow |= __builtin_mul_overflow(known, to->dims[i], &known);
        }
    }
    int64_t numel = tg_shape_numel(from);
    if (infer >= 0 && !overflow && known != 0 && numel % known == 0) to->dims[infer] = numel / known;
    if (overflow || (infer >= 0 ? known == 0 || numel % known != 0 : known != numel))
        return tg_error("%s: shape %s is invalid for a tensor of shape %s (%lld elements)", op,
                        tg_shape_str(*to, a, sizeof a), tg_shape_str(from, b, sizeof b), (long long)numel);
    return TG_OK;
}

/* Strides for viewing (shape, strides) as new_shape without copying, or false.
 * The algorithm of ATen's computeStride: each run of dims that is contiguous in
 * memory can be re-split freely. */
static bool view_strides(tg_shape shape, const int64_t *strides, tg_shape new_shape, int64_t *out) {
    if (tg_shape_numel(shape) == 0 || shape.ndim == 0) {
        tg_contiguous_strides(new_shape, out);
        return true;
    }
    int view_d = new_shape.ndim - 1;
    int64_t chunk_base_stride = strides[shape.ndim - 1], tensor_numel = 1, view_numel = 1;
    for (int d = shape.ndim - 1; d >= 0; d--) {
        tensor_numel *= shape.dims[d];
        if (d == 0 || (shape.dims[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || new_shape.dims[view_d] == 1)) {
                out[view_d] = view_numel * chunk_base_stride;
                view_numel *= new_shape.dims[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (d > 0) {
                chunk_base_stride = strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

/* ---- view / reshape ---- */

static tg_tensor *view_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const tg_shape *shape = tg_ctx_attrs(ctx);
    int64_t strides[TG_MAX_DIMS];
    if (!view_strides(in[0]->shape, in[0]->strides, *shape, strides)) {
        char a[128], b[128];
        return tg_error("tg_view: a tensor of shape %s with these strides cannot be viewed as %s "
                        "(not contiguous); use tg_reshape",
                        tg_shape_str(in[0]->shape, a, sizeof a), tg_shape_str(*shape, b, sizeof b)),
               NULL;
    }
    return tg_make_view("view", in[0], *shape, strides, in[0]->offset);
}

static void reshape_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    grad_in[0] = tg_reshape(g, tg_ctx_input_shape(ctx, 0));
}

/* Reshape to the output's shape, its batch dim left free (tg_onnx_reshape_target). */
static tg_status view_onnx(tg_onnx_op *op) {
    const char *in[] = {tg_onnx_input_name(op, 0), tg_onnx_reshape_target(op, 0, tg_onnx_output(op, 0)->shape)};
    return tg_onnx_add_node(op, "Reshape", 2, in, 1, (const char *[]){tg_onnx_output_name(op, 0)}) ? TG_OK : TG_ERROR;
}

static const tg_function view_fn = {.name = "view",
                                    .num_inputs = 1,
                                    .forward = view_forward,
                                    .backward = reshape_backward,
                                    .low_precision = TG_LOW_PRECISION_NATIVE,
                                    .autocast = TG_AUTOCAST_NONE,
                                    .onnx = view_onnx};

tg_tensor *tg_view(tg_tensor *t, tg_shape shape) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_view", t, 0), NULL;
    if (infer_shape("tg_view", t->shape, &shape)) return NULL;
    return tg_apply_args(&view_fn, &t, &shape, sizeof shape);
}

tg_tensor *tg_reshape(tg_tensor *t, tg_shape shape) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_reshape", t, 0), NULL;
    if (infer_shape("tg_reshape", t->shape, &shape)) return NULL;
    int64_t strides[TG_MAX_DIMS];
    if (view_strides(t->shape, t->strides, shape, strides)) return tg_apply_args(&view_fn, &t, &shape, sizeof shape);
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *c = tg_contiguous(t);
        if (c) result = tg_scope_return(tg_apply_args(&view_fn, &c, &shape, sizeof shape));
    }
    return result;
}

tg_tensor *tg_flatten(tg_tensor *t, int start_dim, int end_dim) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_flatten", t, 0), NULL;
    int nd = t->shape.ndim, s = tg_wrap_dim(start_dim, nd), e = tg_wrap_dim(end_dim, nd);
    if (s < 0 || e < 0 || (nd > 0 && s > e))
        return tg_error("tg_flatten: start_dim %d / end_dim %d invalid for a tensor with %d dims", start_dim, end_dim,
                        nd),
               NULL;
    if (nd == 0) return tg_reshape(t, TG_SHAPE(1));
    tg_shape shape = {0};
    for (int i = 0; i < s; i++) shape.dims[shape.ndim++] = t->shape.dims[i];
    int64_t merged = 1;
    for (int i = s; i <= e; i++) merged *= t->shape.dims[i];
    shape.dims[shape.ndim++] = merged;
    for (int i = e + 1; i < nd; i++) shape.dims[shape.ndim++] = t->shape.dims[i];
    return tg_reshape(t, shape);
}

tg_tensor *tg_squeeze(tg_tensor *t, int dim) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_squeeze", t, 0), NULL;
    int d = tg_wrap_dim(dim, t->shape.ndim);
    if (d < 0) return tg_error("tg_squeeze: dim %d out of range for a tensor with %d dims", dim, t->shape.ndim), NULL;
    tg_shape shape = t->shape;
    if (shape.ndim > 0 && shape.dims[d] == 1) {
        memmove(&shape.dims[d], &shape.dims[d + 1], (size_t)(shape.ndim - d - 1) * sizeof(int64_t));
        shape.ndim--;
    }
    return tg_reshape(t, shape);
}

tg_tensor *tg_unsqueeze(tg_tensor *t, int dim) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_unsqueeze", t, 0), NULL;
    int d = tg_wrap_dim(dim, t->shape.ndim + 1);
    if (d < 0 || t->shape.ndim >= TG_MAX_DIMS)
        return tg_error("tg_unsqueeze: dim %d out of range for a tensor with %d dims", dim, t->shape.ndim), NULL;
    tg_shape shape = t->shape;
    memmove(&shape.dims[d + 1], &shape.dims[d], (size_t)(shape.ndim - d) * sizeof(int64_t));
    shape.dims[d] = 1;
    shape.ndim++;
    return tg_reshape(t, shape);
}

/* ---- permute / transpose ---- */

typedef struct {
    int dims[TG_MAX_DIMS];
} perm_args;

static tg_tensor *permute_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const perm_args *p = tg_ctx_attrs(ctx);
    tg_tensor *t = in[0];
    tg_shape shape = {.ndim = t->shape.ndim};
    int64_t strides[TG_MAX_DIMS];
    for (int i = 0; i < shape.ndim; i++) {
        shape.dims[i] = t->shape.dims[p->dims[i]];
        strides[i] = t->strides[p->dims[i]];
    }
    return tg_make_view("permute", t, shape, strides, t->offset);
}

static void permute_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const perm_args *p = tg_ctx_attrs(ctx);
    int inverse[TG_MAX_DIMS];
    for (int i = 0; i < tg_ndim(g); i++) inverse[p->dims[i]] = i;
    grad_in[0] = tg_permute(g, inverse);
}

static tg_status permute_onnx(tg_onnx_op *op) {
    const perm_args *p = tg_onnx_attrs(op);
    int64_t perm[TG_MAX_DIMS];
    int nd = tg_onnx_input(op, 0)->shape.ndim;
    for (int i = 0; i < nd; i++) perm[i] = p->dims[i];
    tg_onnx_node *n = tg_onnx_add_node_same(op, "Transpose");
    tg_onnx_attr_ints(n, "perm", perm, nd);
    return n ? TG_OK : TG_ERROR;
}

static const tg_function permute_fn = {.name = "permute",
                                       .num_inputs = 1,
                                       .forward = permute_forward,
                                       .backward = permute_backward,
                                       .low_precision = TG_LOW_PRECISION_NATIVE,
                                       .autocast = TG_AUTOCAST_NONE,
                                       .onnx = permute_onnx};

tg_tensor *tg_permute(tg_tensor *t, const int *dims) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_permute", t, 0), NULL;
    perm_args p = {{0}};
    bool seen[TG_MAX_DIMS] = {0};
    for (int i = 0; i < t->shape.ndim; i++) {
        int d = tg_wrap_dim(dims[i], t->shape.ndim);
        if (d < 0 || seen[d])
            return tg_error("tg_permute: dims are not a permutation of the %d dims (entry %d is %d)", t->shape.ndim, i,
                            dims[i]),
                   NULL;
        seen[d] = true;
        p.dims[i] = d;
    }
    return tg_apply_args(&permute_fn, &t, &p, sizeof p);
}

tg_tensor *tg_transpose(tg_tensor *t, int dim0, int dim1) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_transpose", t, 0), NULL;
    int nd = t->shape.ndim, a = tg_wrap_dim(dim0, nd), b = tg_wrap_dim(dim1, nd);
    if (a < 0 || b < 0)
        return tg_error("tg_transpose: dims %d, %d out of range for a tensor with %d dims", dim0, dim1, nd), NULL;
    int dims[TG_MAX_DIMS];
    for (int i = 0; i < nd; i++) dims[i] = i;
    if (nd > 0) {
        dims[a] = b;
        dims[b] = a;
    }
    return tg_permute(t, dims);
}

/* ---- narrow (and the op that undoes it, for its gradient) ---- */

typedef struct {
    int dim;
    int64_t start, length;
    tg_shape full; /* for narrow_backward: the shape to pad back to */
} narrow_args;

static tg_tensor *narrow_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const narrow_args *a = tg_ctx_attrs(ctx);
    tg_tensor *t = in[0];
    tg_shape shape = t->shape;
    shape.dims[a->dim] = a->length;
    return tg_make_view("narrow", t, shape, t->strides, t->offset + a->start * t->strides[a->dim]);
}

static tg_tensor *narrow_pad(tg_tensor *g, const narrow_args *a);

static void narrow_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    narrow_args a = *(const narrow_args *)tg_ctx_attrs(ctx);
    a.full = tg_ctx_input_shape(ctx, 0);
    grad_in[0] = narrow_pad(g, &a);
}

static tg_status narrow_onnx(tg_onnx_op *op) { /* Slice(x, [start], [start + length], [dim]) */
    const narrow_args *a = tg_onnx_attrs(op);
    int64_t start = a->start, end = a->start + a->length, dim = a->dim;
    const char *in[] = {tg_onnx_input_name(op, 0), tg_onnx_const_ints(op, &start, 1), tg_onnx_const_ints(op, &end, 1),
                        tg_onnx_const_ints(op, &dim, 1)};
    return tg_onnx_add_node(op, "Slice", 4, in, 1, (const char *[]){tg_onnx_output_name(op, 0)}) ? TG_OK : TG_ERROR;
}

static const tg_function narrow_fn = {.name = "narrow",
                                      .num_inputs = 1,
                                      .forward = narrow_forward,
                                      .backward = narrow_backward,
                                      .low_precision = TG_LOW_PRECISION_NATIVE,
                                      .autocast = TG_AUTOCAST_NONE,
                                      .onnx = narrow_onnx};

/* Zeros of the full shape with g written into the narrowed window. */
static tg_tensor *pad_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const narrow_args *a = tg_ctx_attrs(ctx);
    tg_tensor *out = tg_zeros(a->full, (tg_opts){.dtype = in[0]->dtype, .device = in[0]->storage->device});
    if (!out) return NULL;
    tg_shape window = a->full;
    window.dims[a->dim] = a->length;
    tg_tensor *w = tg_make_view("narrow_backward", out, window, out->strides, a->start * out->strides[a->dim]);
    if (!w || tg_copy_values_(w, in[0])) return NULL;
    return out;
}

static void pad_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const narrow_args *a = tg_ctx_attrs(ctx);
    grad_in[0] = tg_narrow(g, a->dim, a->start, a->length);
}

static const tg_function narrow_pad_fn = {.name = "narrow_backward",
                                          .num_inputs = 1,
                                          .forward = pad_forward,
                                          .backward = pad_backward,
                                          .low_precision = TG_LOW_PRECISION_NATIVE,
                                          .autocast = TG_AUTOCAST_NONE};

static tg_tensor *narrow_pad(tg_tensor *g, const narrow_args *a) {
    return tg_apply_args(&narrow_pad_fn, &g, a, sizeof *a);
}

tg_tensor *tg_narrow(tg_tensor *t, int dim, int64_t start, int64_t length) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_narrow", t, 0), NULL;
    int d = tg_wrap_dim(dim, t->shape.ndim);
    if (d < 0 || t->shape.ndim == 0)
        return tg_error("tg_narrow: dim %d out of range for a tensor with %d dims", dim, t->shape.ndim), NULL;
    int64_t size = t->shape.dims[d];
    if (start < 0) start += size;
    if (start < 0 || length < 0 || length > size - start) { /* start + length may overflow */
        char s[128];
        return tg_error("tg_narrow: start %lld + length %lld exceeds size %lld of dim %d (shape %s)", (long long)start,
                        (long long)length, (long long)size, d, tg_shape_str(t->shape, s, sizeof s)),
               NULL;
    }
    narrow_args a = {d, start, length, {0}};
    return tg_apply_args(&narrow_fn, &t, &a, sizeof a);
}

/* ---- expand ---- */

static tg_tensor *expand_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const tg_shape *shape = tg_ctx_attrs(ctx);
    tg_tensor *t = in[0];
    int64_t strides[TG_MAX_DIMS];
    int lead = shape->ndim - t->shape.ndim;
    for (int i = 0; i < shape->ndim; i++) {
        int td = i - lead;
        strides[i] = (td < 0 || t->shape.dims[td] == 1) && shape->dims[i] != 1 ? 0 : td >= 0 ? t->strides[td] : 0;
    }
    return tg_make_view("expand", t, *shape, strides, t->offset);
}

static void expand_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    grad_in[0] = tg_sum_to(g, tg_ctx_input_shape(ctx, 0));
}

/* Expand to the output's shape; a dim the input already has at full size is written 1
 * (kept as the input's by Expand's broadcasting), so the batch dim stays free. */
static tg_status expand_onnx(tg_onnx_op *op) {
    tg_shape from = tg_onnx_input(op, 0)->shape, to = tg_onnx_output(op, 0)->shape;
    int64_t dims[TG_MAX_DIMS];
    for (int d = 0, lead = to.ndim - from.ndim; d < to.ndim; d++)
        dims[d] = d >= lead && from.dims[d - lead] == to.dims[d] ? 1 : to.dims[d];
    const char *in[] = {tg_onnx_input_name(op, 0), tg_onnx_const_ints(op, dims, to.ndim)};
    return tg_onnx_add_node(op, "Expand", 2, in, 1, (const char *[]){tg_onnx_output_name(op, 0)}) ? TG_OK : TG_ERROR;
}

static const tg_function expand_fn = {.name = "expand",
                                      .num_inputs = 1,
                                      .forward = expand_forward,
                                      .backward = expand_backward,
                                      .low_precision = TG_LOW_PRECISION_NATIVE,
                                      .autocast = TG_AUTOCAST_NONE,
                                      .onnx = expand_onnx};

tg_tensor *tg_expand(tg_tensor *t, tg_shape shape) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_expand", t, 0), NULL;
    char a[128], b[128];
    int lead = shape.ndim - t->shape.ndim;
    bool ok = lead >= 0 && shape.ndim <= TG_MAX_DIMS;
    for (int i = 0; ok && i < shape.ndim; i++) {
        int td = i - lead;
        if (shape.dims[i] == -1) {
            ok = td >= 0;
            if (ok) shape.dims[i] = t->shape.dims[td];
        } else if (td >= 0) {
            ok = t->shape.dims[td] == shape.dims[i] || t->shape.dims[td] == 1;
        }
        ok = ok && shape.dims[i] >= 0;
    }
    if (!ok)
        return tg_error("tg_expand: a tensor of shape %s cannot be expanded to %s", tg_shape_str(t->shape, a, sizeof a),
                        tg_shape_str(shape, b, sizeof b)),
               NULL;
    return tg_apply_args(&expand_fn, &t, &shape, sizeof shape);
}

/* ---- contiguous, clone ---- */

static tg_tensor *copy_values_forward(tg_ctx *ctx, tg_tensor *const *in) { return tg_clone_values(in[0]); }
static void identity_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) { grad_in[0] = g; }
static tg_status identity_onnx(tg_onnx_op *op) { return tg_onnx_add_node_same(op, "Identity") ? TG_OK : TG_ERROR; }
static const tg_function contiguous_fn = {.name = "contiguous",
                                          .num_inputs = 1,
                                          .forward = copy_values_forward,
                                          .backward = identity_backward,
                                          .low_precision = TG_LOW_PRECISION_NATIVE,
                                          .autocast = TG_AUTOCAST_NONE,
                                          .onnx = identity_onnx};
static const tg_function clone_fn = {.name = "clone",
                                     .num_inputs = 1,
                                     .forward = copy_values_forward,
                                     .backward = identity_backward,
                                     .low_precision = TG_LOW_PRECISION_NATIVE,
                                     .autocast = TG_AUTOCAST_NONE,
                                     .onnx = identity_onnx};

tg_tensor *tg_clone(tg_tensor *t) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_clone", t, 0), NULL;
    return tg_apply(&clone_fn, &t);
}

tg_tensor *tg_contiguous(tg_tensor *t) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_contiguous", t, 0), NULL;
    if (tg_is_contiguous(t)) return tg_scope_track(tg_retain(t));
    return tg_apply(&contiguous_fn, &t);
}
