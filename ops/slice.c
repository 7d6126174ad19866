/* select, slice with a step, diagonal (one geometry each, one gradient for all) and
 * the splits built on narrow and select. See ops/slice.h. */
#include "ops/slice.h"

#include <stdio.h>

#include "autograd/function.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "onnx/graph.h"
#include "ops/shape.h"

typedef enum { PICK_SELECT, PICK_SLICE, PICK_DIAGONAL } pick_kind;

/* What a pick takes from its input; indices already wrapped and checked. */
typedef struct {
    pick_kind kind;
    int dim, dim2;         /* dim2: diagonal's second dim */
    int64_t start, length; /* select: start is the index; diagonal: start is the offset */
    int64_t step;
    tg_shape full; /* the input's shape, for the gradient */
} pick_args;

static const char *const pick_names[] = {"select", "slice", "diagonal"};

/* The view a pick makes of t (t's own strides and offset, any device). */
static tg_tensor *pick_view(tg_tensor *t, const pick_args *p) {
    tg_shape shape = {0};
    int64_t strides[TG_MAX_DIMS], offset = t->offset;
    for (int d = 0; d < t->shape.ndim; d++) {
        bool removed = (p->kind != PICK_SLICE && d == p->dim) || (p->kind == PICK_DIAGONAL && d == p->dim2);
        if (removed) continue;
        strides[shape.ndim] = t->strides[d];
        shape.dims[shape.ndim++] = t->shape.dims[d];
    }
    switch (p->kind) {
    case PICK_SELECT: offset += p->start * t->strides[p->dim]; break;
    case PICK_SLICE:
        shape.dims[p->dim] = p->length;
        strides[p->dim] = t->strides[p->dim] * p->step;
        if (p->length > 0) offset += p->start * t->strides[p->dim];
        break;
    case PICK_DIAGONAL:
        shape.dims[shape.ndim] = p->length;
        strides[shape.ndim++] = t->strides[p->dim] + t->strides[p->dim2];
        if (p->length > 0) offset += p->start >= 0 ? p->start * t->strides[p->dim2] : -p->start * t->strides[p->dim];
        break;
    }
    return tg_make_view(pick_names[p->kind], t, shape, strides, offset);
}

static tg_tensor *pick_forward(tg_ctx *ctx, tg_tensor *const *in) { return pick_view(in[0], tg_ctx_attrs(ctx)); }

static tg_tensor *apply_pick(tg_tensor *t, const pick_args *p);
static tg_tensor *apply_scatter(tg_tensor *g, const pick_args *p);

static void pick_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    pick_args p = *(const pick_args *)tg_ctx_attrs(ctx);
    p.full = tg_ctx_input_shape(ctx, 0);
    grad_in[0] = apply_scatter(g, &p);
}

/* The gradient: zeros of the input's shape with g written through the same view. */
static tg_tensor *scatter_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const pick_args *p = tg_ctx_attrs(ctx);
    tg_tensor *out = tg_zeros(p->full, (tg_opts){.dtype = in[0]->dtype, .device = in[0]->storage->device});
    tg_tensor *window = out ? pick_view(out, p) : NULL;
    return window && !tg_copy_values_(window, in[0]) ? out : NULL;
}

static void scatter_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    grad_in[0] = apply_pick(g, tg_ctx_attrs(ctx));
}

static const tg_function pick_fns[] = {
    {.name = "select",
     .num_inputs = 1,
     .forward = pick_forward,
     .backward = pick_backward,
     .low_precision = TG_LOW_PRECISION_NATIVE},
    {.name = "slice",
     .num_inputs = 1,
     .forward = pick_forward,
     .backward = pick_backward,
     .low_precision = TG_LOW_PRECISION_NATIVE},
    {.name = "diagonal",
     .num_inputs = 1,
     .forward = pick_forward,
     .backward = pick_backward,
     .low_precision = TG_LOW_PRECISION_NATIVE},
};
static const tg_function scatter_fns[] = {
    {.name = "select_backward",
     .num_inputs = 1,
     .forward = scatter_forward,
     .backward = scatter_backward,
     .low_precision = TG_LOW_PRECISION_NATIVE},
    {.name = "slice_backward",
     .num_inputs = 1,
     .forward = scatter_forward,
     .backward = scatter_backward,
     .low_precision = TG_LOW_PRECISION_NATIVE},
    {.name = "diagonal_backward",
     .num_inputs = 1,
     .forward = scatter_forward,
     .backward = scatter_backward,
     .low_precision = TG_LOW_PRECISION_NATIVE},
};

static tg_tensor *apply_pick(tg_tensor *t, const pick_args *p) {
    return tg_apply_args(&pick_fns[p->kind], &t, p, sizeof *p);
}
static tg_tensor *apply_scatter(tg_tensor *g, const pick_args *p) {
    return tg_apply_args(&scatter_fns[p->kind], &g, p, sizeof *p);
}

/* ---- the ops ---- */

static int wrap_dim(const char *op, tg_tensor *t, int dim) {
    int d = t->shape.ndim > 0 ? tg_wrap_dim(dim, t->shape.ndim) : -1;
    if (d < 0) tg_error("%s: dim %d out of range for a tensor with %d dims", op, dim, t->shape.ndim);
    return d;
}

tg_tensor *tg_select(tg_tensor *t, int dim, int64_t index) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_select", t, 0), NULL;
    if (t->shape.ndim == 0) return tg_error("tg_select: cannot be applied to a 0-dim tensor"), NULL;
    int d = wrap_dim("tg_select", t, dim);
    if (d < 0) return NULL;
    int64_t size = t->shape.dims[d];
    if (index < -size || index >= size) {
        char buf[128];
        return tg_error("tg_select: index %lld out of range for tensor of size %s at dimension %d", (long long)index,
                        tg_shape_str(t->shape, buf, sizeof buf), d),
               NULL;
    }
    pick_args p = {.kind = PICK_SELECT, .dim = d, .start = index < 0 ? index + size : index};
    return apply_pick(t, &p);
}

tg_tensor *tg_slice(tg_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_slice", t, 0), NULL;
    int d = wrap_dim("tg_slice", t, dim);
    if (d < 0) return NULL;
    if (step <= 0) return tg_error("tg_slice: slice step must be positive, got %lld", (long long)step), NULL;
    int64_t size = t->shape.dims[d];
    /* Python's clamping: negative from the end, then into [0, size]. */
    if (start < 0) start = start < -size ? 0 : start + size;
    if (end < 0) end = end < -size ? 0 : end + size;
    if (start > size) start = size;
    if (end > size) end = size;
    int64_t length = end > start ? (end - start - 1) / step + 1 : 0;
    pick_args p = {.kind = PICK_SLICE, .dim = d, .start = start, .length = length, .step = step};
    return apply_pick(t, &p);
}

tg_tensor *tg_diagonal(tg_tensor *t, int64_t offset, int dim1, int dim2) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_diagonal", t, 0), NULL;
    int a = wrap_dim("tg_diagonal", t, dim1), b = a < 0 ? -1 : wrap_dim("tg_diagonal", t, dim2);
    if (a < 0 || b < 0) return NULL;
    if (a == b) return tg_error("tg_diagonal: diagonal dimensions cannot be identical %d, %d", dim1, dim2), NULL;
    int64_t rows = t->shape.dims[a], cols = t->shape.dims[b];
    int64_t length =
        offset >= 0 ? (cols - offset < rows ? cols - offset : rows) : (rows + offset < cols ? rows + offset : cols);
    pick_args p = {.kind = PICK_DIAGONAL, .dim = a, .dim2 = b, .start = offset, .length = length > 0 ? length : 0};
    return apply_pick(t, &p);
}

/* ---- splits ---- */

/* Hands the parts made in the current scope to the caller's, or drops them all. */
static int finish_parts(int count, tg_tensor **made, tg_tensor **parts) {
    for (int i = 0; i < count; i++)
        if (!made[i]) return -1;
    for (int i = 0; i < count; i++) parts[i] = tg_scope_return(made[i]);
    return count;
}

static bool room(const char *op, int needed, int max_parts) {
    if (needed <= max_parts) return true;
    tg_error("%s: makes %d parts, but parts has room for %d", op, needed, max_parts);
    return false;
}

/* A split into at most TG_MAX_OP_OUTPUTS pieces is one node with one output per piece
 * (PyTorch's SplitBackward): its gradient is the pieces' gradients concatenated, one pass,
 * where a narrow per piece pads each gradient with zeros to the full shape and the engine
 * adds the padded tensors (GPT's q, k, v split: six full-size passes). Longer splits are
 * narrows. The pieces are views of the input either way. */
typedef struct {
    int dim, count;
    int64_t starts[TG_MAX_OP_OUTPUTS], lengths[TG_MAX_OP_OUTPUTS];
} split_args;

static tg_tensor *split_piece(tg_tensor *t, const split_args *a, int i) {
    tg_shape shape = t->shape;
    shape.dims[a->dim] = a->lengths[i];
    return tg_make_view("split", t, shape, t->strides, t->offset + a->starts[i] * t->strides[a->dim]);
}

static tg_tensor *split_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const split_args *a = tg_ctx_attrs(ctx);
    for (int i = 1; i < a->count; i++) {
        tg_tensor *piece = split_piece(in[0], a, i);
        if (!piece) return NULL;
        tg_ctx_set_output(ctx, i, piece);
    }
    return split_piece(in[0], a, 0);
}

/* The pieces' gradients joined without a copy when they already are the consecutive parts
 * of one contiguous tensor along dim (the fused attention writes a GPT's dq, dk and dv so,
 * ops/attention.c): that tensor, a view. NULL otherwise. */
static tg_tensor *joined_in_place(tg_tensor *const *grads, int count, int dim) {
    tg_tensor *first = grads[0];
    tg_shape shape = first->shape;
    for (int i = 1; i < count; i++) {
        const tg_tensor *prev = grads[i - 1], *t = grads[i];
        if (t->storage != first->storage || t->dtype != first->dtype || t->shape.ndim != shape.ndim ||
            t->offset != prev->offset + prev->shape.dims[dim] * prev->strides[dim])
            return NULL;
        for (int d = 0; d < shape.ndim; d++)
            if (t->strides[d] != first->strides[d] || (d != dim && t->shape.dims[d] != shape.dims[d])) return NULL;
        shape.dims[dim] += t->shape.dims[dim];
    }
    tg_tensor *joined = tg_make_view("split", first, shape, first->strides, first->offset);
    return joined && tg_is_contiguous(joined) ? joined : NULL;
}

static void split_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const split_args *a = tg_ctx_attrs(ctx);
    tg_tensor *grads[TG_MAX_OP_OUTPUTS];
    for (int i = 0; i < a->count; i++)
        if (!(grads[i] = tg_ctx_grad_output(ctx, i))) return; /* zeros where none flowed */
    tg_tensor *joined = joined_in_place(grads, a->count, a->dim);
    grad_in[0] = joined ? joined : tg_cat(grads, a->count, a->dim);
}

static tg_status split_onnx(tg_onnx_op *op) { /* one Slice per piece, as narrow's */
    const split_args *a = tg_onnx_attrs(op);
    for (int i = 0; i < a->count; i++) {
        int64_t start = a->starts[i], end = a->starts[i] + a->lengths[i], dim = a->dim;
        const char *in[] = {tg_onnx_input_name(op, 0), tg_onnx_const_ints(op, &start, 1),
                            tg_onnx_const_ints(op, &end, 1), tg_onnx_const_ints(op, &dim, 1)};
        if (!tg_onnx_add_node(op, "Slice", 4, in, 1, (const char *[]){tg_onnx_output_name(op, i)})) return TG_ERROR;
    }
    return TG_OK;
}

#define SPLIT_FN(N)                                                                                               \
    {                                                                                                             \
        .name = "split", .num_inputs = 1, .num_outputs = N, .forward = split_forward, .backward = split_backward, \
        .low_precision = TG_LOW_PRECISION_NATIVE, .onnx = split_onnx                                              \
    }
static const tg_function split_fns[TG_MAX_OP_OUTPUTS + 1] = {[2] = SPLIT_FN(2), [3] = SPLIT_FN(3), [4] = SPLIT_FN(4)};
#undef SPLIT_FN

/* Pieces of the given sizes along dim d (sizes checked by the caller). */
static int narrow_parts(const char *op, tg_tensor *t, int d, const int64_t *sizes, int count, int64_t every,
                        tg_tensor **parts, int max_parts) {
    if (!room(op, count, max_parts)) return -1;
    for (int i = 0; i < count; i++) parts[i] = NULL;
    int made = -1;
    TG_SCOPE {
        tg_tensor *pieces[count > 0 ? count : 1];
        split_args a = {.dim = d, .count = count};
        bool one_node = count >= 2 && count <= TG_MAX_OP_OUTPUTS; /* else a narrow per piece */
        int64_t start = 0;
        for (int i = 0; i < count; i++) {
            int64_t len = sizes ? sizes[i] : (t->shape.dims[d] - start < every ? t->shape.dims[d] - start : every);
            if (one_node) a.starts[i] = start, a.lengths[i] = len;
            else pieces[i] = tg_narrow(t, d, start, len);
            start += len;
        }
        if (one_node) {
            tg_tensor *out[TG_MAX_OP_OUTPUTS];
            bool ok = tg_apply_multi_args(&split_fns[count], &t, &a, sizeof a, out) == TG_OK;
            for (int i = 0; i < count; i++) pieces[i] = ok ? out[i] : NULL;
        }
        made = finish_parts(count, pieces, parts);
    }
    return made;
}

int tg_split(tg_tensor *t, int64_t split_size, int dim, tg_tensor **parts, int max_parts) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_split", t, 0), -1;
    int d = wrap_dim("tg_split", t, dim);
    if (d < 0) return -1;
    int64_t size = t->shape.dims[d];
    if (split_size < 0)
        return tg_error("tg_split: split_size must be non-negative, got %lld", (long long)split_size), -1;
    if (split_size == 0 && size != 0)
        return tg_error("tg_split: split_size can only be 0 if dimension size is 0, but got dimension size of %lld",
                        (long long)size),
               -1;
    int64_t count = size == 0 ? 1 : (size + split_size - 1) / split_size;
    if (count > max_parts) return room("tg_split", count > INT32_MAX ? INT32_MAX : (int)count, max_parts), -1;
    return narrow_parts("tg_split", t, d, NULL, (int)count, split_size, parts, max_parts);
}

int tg_chunk(tg_tensor *t, int chunks, int dim, tg_tensor **parts, int max_parts) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_chunk", t, 0), -1;
    if (chunks <= 0) return tg_error("tg_chunk: chunks must be greater than 0, got %d", chunks), -1;
    int d = wrap_dim("tg_chunk", t, dim);
    if (d < 0) return -1;
    int64_t size = t->shape.dims[d];
    if (size == 0) { /* as PyTorch: `chunks` empty pieces */
        int64_t zeros[chunks];
        for (int i = 0; i < chunks; i++) zeros[i] = 0;
        return narrow_parts("tg_chunk", t, d, zeros, chunks, 0, parts, max_parts);
    }
    return tg_split(t, (size + chunks - 1) / chunks, d, parts, max_parts);
}

int tg_split_sizes(tg_tensor *t, const int64_t *sizes, int count, int dim, tg_tensor **parts, int max_parts) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_split_sizes", t, 0), -1;
    if (count < 0 || (count > 0 && !sizes))
        return tg_error("tg_split_sizes: %d sizes given at %p", count, (void *)sizes), -1;
    int d = wrap_dim("tg_split_sizes", t, dim);
    if (d < 0) return -1;
    int64_t total = 0;
    bool bad = false;
    for (int i = 0; i < count; i++) bad |= sizes[i] < 0 || __builtin_add_overflow(total, sizes[i], &total);
    if (bad || total != t->shape.dims[d]) {
        char list[256] = "";
        int used = 0;
        for (int i = 0; i < count && used < (int)sizeof list - 24; i++)
            used += snprintf(list + used, sizeof list - (size_t)used, "%s%lld", i ? ", " : "", (long long)sizes[i]);
        return tg_error("tg_split_sizes: split_sizes must be non-negative and sum exactly to %lld (the input's size "
                        "at dimension %d), but got split_sizes=[%s]",
                        (long long)t->shape.dims[d], d, list),
               -1;
    }
    return narrow_parts("tg_split_sizes", t, d, sizes, count, 0, parts, max_parts);
}

int tg_unbind(tg_tensor *t, int dim, tg_tensor **parts, int max_parts) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_unbind", t, 0), -1;
    if (t->shape.ndim == 0) return tg_error("tg_unbind: cannot be applied to a 0-dim tensor"), -1;
    int d = wrap_dim("tg_unbind", t, dim);
    if (d < 0) return -1;
    int64_t n = t->shape.dims[d];
    if (n > max_parts) return room("tg_unbind", n > INT32_MAX ? INT32_MAX : (int)n, max_parts), -1;
    for (int i = 0; i < n; i++) parts[i] = NULL;
    int made = -1;
    TG_SCOPE {
        tg_tensor *pieces[n > 0 ? n : 1];
        for (int64_t i = 0; i < n; i++) pieces[i] = tg_select(t, d, i);
        made = finish_parts((int)n, pieces, parts);
    }
    return made;
}
