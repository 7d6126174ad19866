/* Copying shape ops: cat, stack, index_select, gather, one_hot, embedding, and the
 * scatter-style ops that are their gradients (index_add, scatter_add), each a
 * tg_function of its own so that double backward works (the gradient of a gather is
 * a scatter_add, whose gradient is a gather again). CUDA: ops/cuda/gather.cu. */
#include <stdlib.h>
#include <string.h>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "onnx/graph.h"
#include "ops/cuda/gather.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape.h"

/* ======================= helpers ======================= */

static tg_status check_index_dtype(const char *op, tg_tensor *index, bool int32_ok) {
    if (index->dtype == TG_INT64 || (int32_ok && index->dtype == TG_INT32)) return TG_OK;
    return tg_error("%s: index must be %s, got %s", op, int32_ok ? "int64 or int32" : "int64",
                    tg_dtype_name(index->dtype));
}

/* Contiguous int64 (a new reference in the current scope). */
static tg_tensor *index_int64(tg_tensor *index) { return tg_contiguous(tg_cast(index, TG_INT64)); }

/* t viewed as [outer, size, inner] around dim (t contiguous). */
static void split_at(tg_shape s, int dim, int64_t *outer, int64_t *size, int64_t *inner) {
    *outer = *inner = 1;
    *size = s.ndim > 0 ? s.dims[dim] : 1;
    for (int d = 0; d < s.ndim; d++) {
        if (d < dim) *outer *= s.dims[d];
        if (d > dim) *inner *= s.dims[d];
    }
}

/* *dst += *src for one element. */
static void add_element(tg_dtype dtype, void *dst, const void *src) {
    switch (dtype) {
    case TG_FLOAT32: *(float *)dst += *(const float *)src; break;
    case TG_FLOAT64: *(double *)dst += *(const double *)src; break;
    case TG_INT64: *(int64_t *)dst += *(const int64_t *)src; break;
    case TG_INT32: *(int32_t *)dst += *(const int32_t *)src; break;
    case TG_UINT8: *(uint8_t *)dst += *(const uint8_t *)src; break;
    case TG_BOOL: *(bool *)dst = *(bool *)dst || *(const bool *)src; break;
    default: break;
    }
}

static tg_status index_error(const char *op, int64_t value, int dim, tg_shape shape) {
    char s[128];
    return tg_error("%s: index %lld is out of range for dim %d of size %lld (shape %s)", op, (long long)value, dim,
                    (long long)(shape.ndim ? shape.dims[dim] : 1), tg_shape_str(shape, s, sizeof s));
}

/* ======================= cat / stack ======================= */

#define CAT_MAX TG_MAX_OP_INPUTS

/* Among other tensors, PyTorch skips 1-D empty ones (shape [0]: the accumulator that
 * starts as torch.tensor([]) and grows by cat([acc, x])). A skipped tensor stays an input
 * of the node, so a gradient still reaches it (an empty one), but takes no part in the
 * shape, dtype and device checks. */
static bool is_empty_1d(const tg_tensor *t) { return t && t->shape.ndim == 1 && t->shape.dims[0] == 0; }

/* Whether the cat skips tensors[i]: none is skipped when all are 1-D empty (count small). */
static bool is_skipped_input(tg_tensor *const *tensors, int count, int i) {
    if (!is_empty_1d(tensors[i])) return false;
    for (int k = 0; k < count; k++)
        if (!is_empty_1d(tensors[k])) return true;
    return false;
}

static bool is_skipped(unsigned mask, int i) { return mask >> i & 1; }

typedef struct {
    int dim, count;
    unsigned skipped;           /* bit i: input i is skipped */
    int64_t sizes[CAT_MAX];     /* each input's size along dim (0 where skipped) */
    tg_device devices[CAT_MAX]; /* each input's device, for a skipped input's gradient */
} cat_args;

static tg_tensor *cat_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const cat_args *a = tg_ctx_attrs(ctx);
    int first = 0;
    while (is_skipped(a->skipped, first)) first++;
    tg_shape shape = in[first]->shape;
    shape.dims[a->dim] = 0;
    for (int i = 0; i < a->count; i++) shape.dims[a->dim] += a->sizes[i];
    tg_tensor *out = tg_empty(shape, (tg_opts){.dtype = in[first]->dtype, .device = in[first]->storage->device});
    if (!out) return NULL;
    int64_t offset = 0;
    for (int i = 0; i < a->count; i++) { /* copy into a window of out: works on any device */
        if (is_skipped(a->skipped, i)) continue;
        tg_tensor *window = tg_as_strided(out, in[i]->shape, out->strides, offset * out->strides[a->dim]);
        if (!window || tg_copy_values_(window, in[i])) return NULL;
        offset += a->sizes[i];
    }
    return out;
}

static void cat_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const cat_args *a = tg_ctx_attrs(ctx);
    int64_t offset = 0;
    for (int i = 0; i < a->count; i++) {
        if (!tg_ctx_needs_input_grad(ctx, i)) {
        } else if (is_skipped(a->skipped, i)) {
            grad_in[i] = tg_zeros(TG_SHAPE(0), (tg_opts){.dtype = tg_ctx_input_dtype(ctx, i), .device = a->devices[i]});
        } else {
            grad_in[i] = tg_narrow(g, a->dim, offset, a->sizes[i]);
        }
        offset += a->sizes[i];
    }
}

/* tg_function has a fixed input count: one per count (longer lists are cat'ed in groups). */
static tg_status cat_onnx(tg_onnx_op *op) {
    const cat_args *a = tg_onnx_attrs(op);
    const char *inputs[CAT_MAX];
    int n = 0;
    for (int i = 0; i < a->count; i++)
        if (!is_skipped(a->skipped, i)) inputs[n++] = tg_onnx_input_name(op, i);
    const char *output = tg_onnx_output_name(op, 0);
    tg_onnx_node *node = tg_onnx_add_node(op, "Concat", n, inputs, 1, &output);
    tg_onnx_attr_int(node, "axis", a->dim);
    return node ? TG_OK : TG_ERROR;
}

#define CAT_FN(N)                                                                         \
    {                                                                                     \
        .name = "cat", .num_inputs = N, .forward = cat_forward, .backward = cat_backward, \
        .low_precision = TG_LOW_PRECISION_NATIVE, .onnx = cat_onnx                        \
    }
static const tg_function cat_fns[CAT_MAX + 1] = {CAT_FN(0), CAT_FN(1), CAT_FN(2), CAT_FN(3), CAT_FN(4),
                                                 CAT_FN(5), CAT_FN(6), CAT_FN(7), CAT_FN(8)};

/* tensors checked by check_cat; dim wrapped. */
static tg_tensor *cat_checked(const char *op, tg_tensor *const *tensors, int count, int dim) {
    if (count <= CAT_MAX) {
        cat_args a = {.dim = dim, .count = count};
        for (int i = 0; i < count; i++) {
            if (is_skipped_input(tensors, count, i)) a.skipped |= 1u << i;
            a.sizes[i] = is_skipped(a.skipped, i) ? 0 : tensors[i]->shape.dims[dim];
            a.devices[i] = tensors[i]->storage->device;
        }
        return tg_apply_args(&cat_fns[count], tensors, &a, sizeof a);
    }
    tg_tensor *result = NULL; /* groups of at most CAT_MAX; a group of 1-D empties is one, skipped in turn */
    TG_SCOPE {
        tg_tensor *parts[CAT_MAX];
        int n = 0, per = (count + CAT_MAX - 1) / CAT_MAX;
        for (int i = 0; i < count; i += per)
            parts[n++] = cat_checked(op, tensors + i, count - i < per ? count - i : per, dim);
        bool ok = true;
        for (int i = 0; i < n; i++) ok &= parts[i] != NULL;
        if (ok) result = tg_scope_return(cat_checked(op, parts, n, dim));
    }
    return result;
}

static tg_status check_cat(const char *op, tg_tensor *const *tensors, int count, int dim, int *wrapped) {
    if (!tensors || count <= 0) return tg_error("%s: expected a non-empty list of tensors", op);
    for (int i = 0; i < count; i++)
        if (tg_unusable_(tensors[i])) return tg_error_unusable_input(op, tensors[i], i);
    int f = 0; /* the first tensor not skipped */
    while (f < count && is_empty_1d(tensors[f])) f++;
    if (f == count) f = 0;
    tg_tensor *first = tensors[f];
    int nd = first->shape.ndim;
    if (nd == 0) return tg_error("%s: zero-dimensional tensor (at position %d) cannot be concatenated", op, f);
    int d = tg_wrap_dim(dim, nd);
    if (d < 0) return tg_error("%s: dim %d out of range for tensors with %d dims", op, dim, nd);
    char s0[128], si[128];
    tg_shape_str(first->shape, s0, sizeof s0);
    for (int i = f + 1; i < count; i++) {
        tg_tensor *t = tensors[i];
        if (is_empty_1d(t)) continue; /* skipped: f is not */
        tg_shape_str(t->shape, si, sizeof si);
        if (t->dtype != first->dtype)
            return tg_error("%s: expected tensors of one dtype, got %s (position %d) and %s (position %d)", op,
                            tg_dtype_name(first->dtype), f, tg_dtype_name(t->dtype), i);
        if (tg_check_same_device(op, first, t, "all tensors")) return TG_ERROR;
        bool ok = t->shape.ndim == nd;
        for (int k = 0; ok && k < nd; k++) ok = k == d || t->shape.dims[k] == first->shape.dims[k];
        if (!ok)
            return tg_error("%s: sizes of tensors must match except in dim %d: %s (position %d) and %s (position %d)",
                            op, d, s0, f, si, i);
    }
    *wrapped = d;
    return TG_OK;
}

tg_tensor *tg_cat(tg_tensor *const *tensors, int count, int dim) {
    int d;
    if (check_cat("tg_cat", tensors, count, dim, &d)) return NULL;
    return cat_checked("tg_cat", tensors, count, d);
}

tg_tensor *tg_stack(tg_tensor *const *tensors, int count, int dim) {
    if (!tensors || count <= 0) return tg_error("tg_stack: expected a non-empty list of tensors"), NULL;
    for (int i = 0; i < count; i++)
        if (tg_unusable_(tensors[i])) return tg_error_unusable_input("tg_stack", tensors[i], i), NULL;
    int nd = tensors[0]->shape.ndim, d = tg_wrap_dim(dim, nd + 1);
    if (d < 0 || nd + 1 > TG_MAX_DIMS)
        return tg_error("tg_stack: dim %d out of range for tensors with %d dims", dim, nd), NULL;
    char s0[128], si[128];
    for (int i = 1; i < count; i++)
        if (!tg_shape_equal(tensors[i]->shape, tensors[0]->shape))
            return tg_error("tg_stack: expected tensors of equal shape, got %s (position 0) and %s (position %d)",
                            tg_shape_str(tensors[0]->shape, s0, sizeof s0),
                            tg_shape_str(tensors[i]->shape, si, sizeof si), i),
                   NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor **parts = malloc(sizeof(tg_tensor *) * (size_t)count);
        bool ok = parts != NULL;
        for (int i = 0; ok && i < count; i++) ok = (parts[i] = tg_unsqueeze(tensors[i], d)) != NULL;
        int wrapped;
        if (ok && check_cat("tg_stack", parts, count, d, &wrapped) == TG_OK)
            result = tg_scope_return(cat_checked("tg_stack", parts, count, wrapped));
        free(parts);
    }
    return result;
}

/* ======================= index_select / index_add ======================= */

typedef struct {
    int dim;        /* wrapped */
    const char *op; /* for messages: tg_index_select, tg_embedding, ... (a static string) */
    tg_shape full;  /* index_add: the shape of the result */
} index_args;

static tg_tensor *index_add_zeros(tg_tensor *src, tg_tensor *index, const index_args *a);

/* out [outer, n, inner] = x [outer, size, inner] at index [n]. */
static tg_tensor *index_select_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const index_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = tg_contiguous(in[0]), *index = index_int64(in[1]);
    if (!x || !index) return NULL;
    int64_t n = tg_numel(index), outer, size, inner;
    split_at(x->shape, a->dim, &outer, &size, &inner);
    tg_shape shape = x->shape;
    if (shape.ndim > 0) shape.dims[a->dim] = n;
    tg_tensor *out = tg_empty(shape, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
    if (!out) return NULL;
    if (tg_on_cuda(x)) {
        if (TG_CUDA_CALL(a->op, tg_cuda_index_select, out, x, a->dim, index)) return NULL;
    } else {
        const int64_t *idx = tg_data_ptr(index);
        size_t row = (size_t)inner * tg_dtype_size(x->dtype);
        const char *src = tg_elem_ptr(x);
        char *dst = tg_data_ptr(out);
        for (int64_t i = 0; i < n; i++)
            if (idx[i] < 0 || idx[i] >= size) return index_error(a->op, idx[i], a->dim, x->shape), NULL;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < n; i++)
                memcpy(dst + (size_t)(o * n + i) * row, src + (size_t)(o * size + idx[i]) * row, row);
    }
    tg_ctx_save(ctx, index);
    return out;
}

static void index_select_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    index_args a = *(const index_args *)tg_ctx_attrs(ctx);
    tg_tensor *index = tg_ctx_saved(ctx, 0);
    if (!index) return;
    a.full = tg_ctx_input_shape(ctx, 0);
    grad_in[0] = index_add_zeros(g, index, &a);
}

static tg_status index_select_onnx(tg_onnx_op *op) { /* embeddings: Gather of the weight's rows */
    tg_onnx_node *n = tg_onnx_add_node_same(op, "Gather");
    tg_onnx_attr_int(n, "axis", ((const index_args *)tg_onnx_attrs(op))->dim);
    return n ? TG_OK : TG_ERROR;
}

static const tg_function index_select_fn = {.name = "index_select",
                                            .num_inputs = 2,
                                            .forward = index_select_forward,
                                            .backward = index_select_backward,
                                            .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                            .autocast = TG_AUTOCAST_NONE,
                                            .onnx = index_select_onnx};

/* zeros(full) with src [outer, n, inner] added at index [n] along dim. */
static tg_tensor *index_add_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const index_args *a = tg_ctx_attrs(ctx);
    tg_tensor *src = tg_contiguous(in[0]), *index = index_int64(in[1]);
    tg_tensor *out = tg_zeros(a->full, (tg_opts){.dtype = in[0]->dtype, .device = in[0]->storage->device});
    if (!src || !index || !out) return NULL;
    if (tg_on_cuda(out)) {
        if (TG_CUDA_CALL(a->op, tg_cuda_index_add, out, a->dim, index, src)) return NULL;
    } else {
        int64_t n = tg_numel(index), outer, size, inner;
        split_at(a->full, a->dim, &outer, &size, &inner);
        const int64_t *idx = tg_data_ptr(index);
        for (int64_t i = 0; i < n; i++)
            if (idx[i] < 0 || idx[i] >= size) return index_error(a->op, idx[i], a->dim, a->full), NULL;
        size_t es = tg_dtype_size(out->dtype);
        const char *s = tg_elem_ptr(src);
        char *d = tg_data_ptr(out);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < n; i++)
                for (int64_t r = 0; r < inner; r++)
                    add_element(out->dtype, d + (size_t)((o * size + idx[i]) * inner + r) * es,
                                s + (size_t)((o * n + i) * inner + r) * es);
    }
    tg_ctx_save(ctx, index);
    return out;
}

static void index_add_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const index_args *a = tg_ctx_attrs(ctx);
    tg_tensor *index = tg_ctx_saved(ctx, 0);
    if (index) grad_in[0] = tg_apply_args(&index_select_fn, (tg_tensor *[]){g, index}, a, sizeof *a);
}

static const tg_function index_add_fn = {.name = "index_add",
                                         .num_inputs = 2,
                                         .forward = index_add_forward,
                                         .backward = index_add_backward,
                                         .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                         .autocast = TG_AUTOCAST_NONE};

static tg_tensor *index_add_zeros(tg_tensor *src, tg_tensor *index, const index_args *a) {
    return tg_apply_args(&index_add_fn, (tg_tensor *[]){src, index}, a, sizeof *a);
}

static tg_status check_index_vector(const char *op, tg_tensor *t, int dim, tg_tensor *index, int *wrapped) {
    if (check_index_dtype(op, index, true) || tg_check_same_device(op, t, index, "the input and the index"))
        return TG_ERROR;
    if (index->shape.ndim > 1) {
        char s[128];
        return tg_error("%s: index must be 1-D, got shape %s", op, tg_shape_str(index->shape, s, sizeof s));
    }
    int d = tg_wrap_dim(dim, t->shape.ndim);
    if (d < 0) {
        char s[128];
        return tg_error("%s: dim %d out of range for a tensor of shape %s", op, dim,
                        tg_shape_str(t->shape, s, sizeof s));
    }
    *wrapped = t->shape.ndim > 0 ? d : 0;
    return TG_OK;
}

tg_tensor *tg_index_select(tg_tensor *t, int dim, tg_tensor *index) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_index_select", t, 0), NULL;
    if (tg_unusable_(index)) return tg_error_unusable_input("tg_index_select", index, 1), NULL;
    index_args a = {0, "tg_index_select", {0}};
    if (check_index_vector("tg_index_select", t, dim, index, &a.dim)) return NULL;
    if (t->shape.ndim == 0 && tg_numel(index) != 1)
        return tg_error("tg_index_select: a 0-dim input takes exactly one index, got %lld", (long long)tg_numel(index)),
               NULL;
    return tg_apply_args(&index_select_fn, (tg_tensor *[]){t, index}, &a, sizeof a);
}

tg_tensor *tg_index_add(tg_tensor *t, int dim, tg_tensor *index, tg_tensor *src) {
    const char *op = "tg_index_add";
    if (tg_unusable_(t)) return tg_error_unusable_input(op, t, 0), NULL;
    if (tg_unusable_(index)) return tg_error_unusable_input(op, index, 2), NULL;
    if (tg_unusable_(src)) return tg_error_unusable_input(op, src, 3), NULL;
    index_args a = {0, "tg_index_add", t->shape};
    if (check_index_vector(op, t, dim, index, &a.dim) || tg_check_same_device(op, t, src, "the input and src"))
        return NULL;
    if (t->dtype != src->dtype)
        return tg_error("%s: src dtype %s differs from the input's %s", op, tg_dtype_name(src->dtype),
                        tg_dtype_name(t->dtype)),
               NULL;
    tg_shape want = t->shape;
    if (want.ndim > 0) want.dims[a.dim] = tg_numel(index);
    if (!tg_shape_equal(want, src->shape)) {
        char s1[128], s2[128];
        return tg_error("%s: src must have shape %s (the input's with dim %d of the index's length), got %s", op,
                        tg_shape_str(want, s1, sizeof s1), a.dim, tg_shape_str(src->shape, s2, sizeof s2)),
               NULL;
    }
    tg_tensor *result = NULL;
    TG_SCOPE { result = tg_scope_return(tg_add(t, index_add_zeros(src, index, &a))); }
    return result;
}

/* ======================= gather / scatter_add ======================= */

/* For each element of index (shape ishape, contiguous): the offsets (elements) of the
 * matching element of x (contiguous, shape xshape: the index value replaces the
 * coordinate along dim) and of index itself. Returns the first bad index value via
 * *bad (and false) when one is out of range. */
typedef void (*gather_visit)(int64_t x_offset, int64_t i_offset, void *user);

static bool walk_index(tg_shape xshape, tg_shape ishape, int dim, const int64_t *idx, gather_visit visit, void *user,
                       int64_t *bad) {
    int nd = ishape.ndim;
    int64_t xstrides[TG_MAX_DIMS], coord[TG_MAX_DIMS] = {0}, n = tg_shape_numel(ishape);
    tg_contiguous_strides(xshape, xstrides);
    int64_t size = nd > 0 ? xshape.dims[dim] : 1;
    for (int64_t p = 0; p < n; p++) {
        int64_t v = idx[p];
        if (v < 0 || v >= size) {
            *bad = v;
            return false;
        }
        int64_t off = 0;
        for (int d = 0; d < nd; d++) off += (d == dim ? v : coord[d]) * xstrides[d];
        visit(off, p, user);
        for (int d = nd - 1; d >= 0; d--) { /* next coordinate, row-major */
            if (++coord[d] < ishape.dims[d]) break;
            coord[d] = 0;
        }
    }
    return true;
}

typedef struct {
    char *x, *other; /* x: the gathered-from / scattered-into tensor; other: out / src */
    size_t es;
    tg_dtype dtype;
} walk_data;

static void visit_gather(int64_t xo, int64_t io, void *u) {
    walk_data *w = u;
    memcpy(w->other + (size_t)io * w->es, w->x + (size_t)xo * w->es, w->es);
}

static void visit_scatter_add(int64_t xo, int64_t io, void *u) {
    walk_data *w = u;
    add_element(w->dtype, w->x + (size_t)xo * w->es, w->other + (size_t)io * w->es);
}

typedef struct {
    int dim;
    const char *op;
    tg_shape full; /* scatter_add: the result's shape */
} gather_args;

static tg_tensor *scatter_add_zeros(tg_tensor *src, tg_tensor *index, const gather_args *a);

static tg_tensor *gather_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const gather_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = tg_contiguous(in[0]), *index = tg_contiguous(in[1]);
    if (!x || !index) return NULL;
    tg_tensor *out = tg_empty(index->shape, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
    if (!out) return NULL;
    if (tg_on_cuda(x)) {
        if (TG_CUDA_CALL(a->op, tg_cuda_gather, out, x, a->dim, index)) return NULL;
    } else {
        walk_data w = {tg_elem_ptr(x), tg_data_ptr(out), tg_dtype_size(x->dtype), x->dtype};
        int64_t bad;
        if (!walk_index(x->shape, index->shape, a->dim, tg_elem_ptr(index), visit_gather, &w, &bad))
            return index_error(a->op, bad, a->dim, x->shape), NULL;
    }
    tg_ctx_save(ctx, index);
    return out;
}

static void gather_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    gather_args a = *(const gather_args *)tg_ctx_attrs(ctx);
    tg_tensor *index = tg_ctx_saved(ctx, 0);
    if (!index) return;
    a.full = tg_ctx_input_shape(ctx, 0);
    grad_in[0] = scatter_add_zeros(g, index, &a);
}

static const tg_function gather_fn = {.name = "gather",
                                      .num_inputs = 2,
                                      .forward = gather_forward,
                                      .backward = gather_backward,
                                      .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                      .autocast = TG_AUTOCAST_NONE};

static tg_tensor *scatter_add_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const gather_args *a = tg_ctx_attrs(ctx);
    tg_tensor *src = tg_contiguous(in[0]), *index = tg_contiguous(in[1]);
    tg_tensor *out = tg_zeros(a->full, (tg_opts){.dtype = in[0]->dtype, .device = in[0]->storage->device});
    if (!src || !index || !out) return NULL;
    if (tg_on_cuda(out)) {
        if (TG_CUDA_CALL(a->op, tg_cuda_scatter_add, out, a->dim, index, src)) return NULL;
    } else {
        walk_data w = {tg_data_ptr(out), tg_elem_ptr(src), tg_dtype_size(out->dtype), out->dtype};
        int64_t bad;
        if (!walk_index(a->full, index->shape, a->dim, tg_elem_ptr(index), visit_scatter_add, &w, &bad))
            return index_error(a->op, bad, a->dim, a->full), NULL;
    }
    tg_ctx_save(ctx, index);
    return out;
}

static void scatter_add_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const gather_args *a = tg_ctx_attrs(ctx);
    tg_tensor *index = tg_ctx_saved(ctx, 0);
    if (index) grad_in[0] = tg_apply_args(&gather_fn, (tg_tensor *[]){g, index}, a, sizeof *a);
}

static const tg_function scatter_add_fn = {.name = "scatter_add",
                                           .num_inputs = 2,
                                           .forward = scatter_add_forward,
                                           .backward = scatter_add_backward,
                                           .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                           .autocast = TG_AUTOCAST_NONE};

static tg_tensor *scatter_add_zeros(tg_tensor *src, tg_tensor *index, const gather_args *a) {
    return tg_apply_args(&scatter_add_fn, (tg_tensor *[]){src, index}, a, sizeof *a);
}

/* index int64, t's ndim, index.size(d) <= t.size(d) for d != dim (PyTorch's rule). */
static tg_status check_gather_index(const char *op, tg_tensor *t, int dim, tg_tensor *index, int *wrapped) {
    if (check_index_dtype(op, index, false) || tg_check_same_device(op, t, index, "the input and the index"))
        return TG_ERROR;
    char st[128], si[128];
    tg_shape_str(t->shape, st, sizeof st);
    tg_shape_str(index->shape, si, sizeof si);
    int d = tg_wrap_dim(dim, t->shape.ndim);
    if (d < 0) return tg_error("%s: dim %d out of range for a tensor of shape %s", op, dim, st);
    if (index->shape.ndim != t->shape.ndim)
        return tg_error("%s: index %s must have as many dims as the input %s", op, si, st);
    for (int k = 0; k < t->shape.ndim; k++)
        if (k != d && index->shape.dims[k] > t->shape.dims[k])
            return tg_error("%s: index %s is larger than the input %s in dim %d", op, si, st, k);
    *wrapped = t->shape.ndim > 0 ? d : 0;
    return TG_OK;
}

tg_tensor *tg_gather(tg_tensor *t, int dim, tg_tensor *index) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_gather", t, 0), NULL;
    if (tg_unusable_(index)) return tg_error_unusable_input("tg_gather", index, 1), NULL;
    gather_args a = {0, "tg_gather", {0}};
    if (check_gather_index("tg_gather", t, dim, index, &a.dim)) return NULL;
    return tg_apply_args(&gather_fn, (tg_tensor *[]){t, index}, &a, sizeof a);
}

tg_tensor *tg_scatter_add(tg_tensor *t, int dim, tg_tensor *index, tg_tensor *src) {
    const char *op = "tg_scatter_add";
    if (tg_unusable_(t)) return tg_error_unusable_input(op, t, 0), NULL;
    if (tg_unusable_(index)) return tg_error_unusable_input(op, index, 2), NULL;
    if (tg_unusable_(src)) return tg_error_unusable_input(op, src, 3), NULL;
    gather_args a = {0, op, t->shape};
    if (check_gather_index(op, t, dim, index, &a.dim) || tg_check_same_device(op, t, src, "the input and src"))
        return NULL;
    if (t->dtype != src->dtype)
        return tg_error("%s: src dtype %s differs from the input's %s", op, tg_dtype_name(src->dtype),
                        tg_dtype_name(t->dtype)),
               NULL;
    if (!tg_shape_equal(index->shape, src->shape)) {
        char s1[128], s2[128];
        return tg_error("%s: src %s must have the index's shape %s", op, tg_shape_str(src->shape, s1, sizeof s1),
                        tg_shape_str(index->shape, s2, sizeof s2)),
               NULL;
    }
    tg_tensor *result = NULL;
    TG_SCOPE { result = tg_scope_return(tg_add(t, scatter_add_zeros(src, index, &a))); }
    return result;
}

/* ======================= one_hot / embedding ======================= */

/* On the device: -1 classes reads max(index) + 1 back (a wait, as PyTorch's one_hot);
 * the kernel checks the range and reports a bad value. */
static tg_tensor *cuda_one_hot(tg_tensor *index, int64_t classes) {
    const char *op = "tg_one_hot";
    tg_tensor *result = NULL;
    TG_SCOPE {
        int64_t n = tg_numel(index);
        bool ok = true;
        if (classes == -1) {
            if (n == 0) ok = !tg_error("%s: cannot infer num_classes (-1) from an empty tensor", op);
            tg_tensor *max = ok ? tg_max(index) : NULL;
            ok = max != NULL;
            if (ok) classes = (int64_t)tg_item(max) + 1; /* < 1 when all are negative: the kernel reports one */
            if (classes < 0) classes = 0;
        }
        tg_shape shape = index->shape;
        shape.dims[shape.ndim++] = classes;
        tg_tensor *idx = ok ? tg_contiguous(index) : NULL;
        tg_tensor *out = idx ? tg_zeros(shape, (tg_opts){.dtype = TG_INT64, .device = index->storage->device}) : NULL;
        if (out && !TG_CUDA_CALL(op, tg_cuda_one_hot, out, idx)) result = tg_scope_return(out);
    }
    return result;
}

tg_tensor *tg_one_hot(tg_tensor *index, int64_t num_classes) {
    const char *op = "tg_one_hot";
    if (tg_unusable_(index)) return tg_error_unusable_input(op, index, 0), NULL;
    if (check_index_dtype(op, index, false)) return NULL;
    if (num_classes < -1 || (num_classes == 0 && tg_numel(index) > 0))
        return tg_error("%s: num_classes must be positive or -1, got %lld", op, (long long)num_classes), NULL;
    if (index->shape.ndim + 1 > TG_MAX_DIMS) return tg_error("%s: too many dims", op), NULL;
    if (tg_on_cuda(index)) return cuda_one_hot(index, num_classes);
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *contig = tg_contiguous(index);
        const int64_t *idx = contig ? tg_data_ptr(contig) : NULL;
        int64_t n = tg_numel(index), classes = num_classes, bad = 0;
        bool ok = contig != NULL;
        if (ok && classes == -1) {
            if (n == 0) ok = !tg_error("%s: cannot infer num_classes (-1) from an empty tensor", op);
            for (int64_t i = 0; i < n; i++) classes = idx[i] + 1 > classes ? idx[i] + 1 : classes;
        }
        for (int64_t i = 0; ok && i < n; i++)
            if (idx[i] < 0 || idx[i] >= classes) ok = false, bad = idx[i];
        if (contig && !ok && !tg_has_error())
            tg_error("%s: class value %lld is out of range [0, %lld)", op, (long long)bad, (long long)classes);
        tg_shape shape = index->shape;
        shape.dims[shape.ndim++] = classes;
        tg_tensor *out = ok ? tg_zeros(shape, (tg_opts){.dtype = TG_INT64}) : NULL;
        if (out) {
            int64_t *o = tg_data_ptr(out);
            for (int64_t i = 0; i < n; i++) o[i * classes + idx[i]] = 1;
            result = tg_scope_return(out);
        }
    }
    return result;
}

tg_tensor *tg_embedding(tg_tensor *weight, tg_tensor *indices, tg_embedding_opts opts) {
    const char *op = "tg_embedding";
    if (tg_unusable_(weight)) return tg_error_unusable_input(op, weight, 0), NULL;
    if (tg_unusable_(indices)) return tg_error_unusable_input(op, indices, 1), NULL;
    if (weight->shape.ndim != 2) {
        char s[128];
        return tg_error("%s: weight must be 2-D [num_embeddings, embedding_dim], got %s", op,
                        tg_shape_str(weight->shape, s, sizeof s)),
               NULL;
    }
    if (check_index_dtype(op, indices, true) || tg_check_same_device(op, weight, indices, "the weight and the indices"))
        return NULL;
    if (indices->shape.ndim + 1 > TG_MAX_DIMS) return tg_error("%s: too many dims", op), NULL;
    int64_t num = weight->shape.dims[0], pad = opts.padding_idx;
    if (opts.use_padding_idx && (pad < -num || pad >= num))
        return tg_error("%s: padding_idx %lld is out of range for %lld embeddings "
                        "(expected %lld <= padding_idx < %lld)",
                        op, (long long)pad, (long long)num, (long long)-num, (long long)num),
               NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        index_args a = {0, op, {0}};
        tg_tensor *flat = tg_reshape(indices, TG_SHAPE(-1));
        tg_tensor *rows = flat ? tg_apply_args(&index_select_fn, (tg_tensor *[]){weight, flat}, &a, sizeof a) : NULL;
        if (rows && opts.use_padding_idx && weight->requires_grad && tg_is_grad_enabled()) {
            /* padding_idx positions still read their row but pass no gradient back, also
             * in double backward (PyTorch's embedding_dense_double_backward masks them):
             * a detached copy there does both. */
            tg_tensor *pad_value = tg_full(TG_SCALAR_SHAPE, (double)(pad < 0 ? pad + num : pad),
                                           (tg_opts){.dtype = flat->dtype, .device = flat->storage->device});
            rows = tg_where(tg_unsqueeze(tg_eq(flat, pad_value), 1), tg_detach(rows), rows);
        }
        tg_shape shape = indices->shape;
        shape.dims[shape.ndim++] = weight->shape.dims[1];
        if (rows) result = tg_scope_return(tg_reshape(rows, shape));
    }
    return result;
}
