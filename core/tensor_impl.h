/* The tensor struct, for the library's own files (core/, autograd/, ops/, nn/, ...).
 * Users and extension authors go through the accessors of core/tensor.h. */
#ifndef TG_CORE_TENSOR_IMPL_H
#define TG_CORE_TENSOR_IMPL_H

#include "core/dtype_impl.h"
#include "core/storage.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tg_node;      /* autograd/node.h */
struct tg_hook_list; /* autograd/hooks */

/* A tensor struct's life (its first field, so that a freed struct's check reads
 * only it): TG_TENSOR_ALIVE from creation until its last reference goes, then
 * TG_TENSOR_FREED. core/scope.c keeps freed structs aside for a while before reusing
 * them, so a stale handle is refused by name (tg_unusable_) instead of being used. */
#define TG_TENSOR_ALIVE 0x7e45a11eu
#define TG_TENSOR_FREED 0xf7eed7e5u

/* Where a tensor was made (with TG_LEAK_TRACE) and how it was freed, kept for the
 * message about a stale handle. */
typedef struct {
    const char *made_by, *made_file; /* the public call; NULL when not traced */
    int made_line;
    int freed_line;
    const char *freed_by, *freed_file; /* "tg_release", or "the end of the TG_SCOPE" at file:line */
} tg_tensor_history;

struct tg_tensor {
    uint32_t life;      /* TG_TENSOR_ALIVE / TG_TENSOR_FREED */
    int32_t scope_refs; /* how many of the references scopes hold (core/scope.c) */
    long refcount;
    tg_storage *storage; /* owned reference; shared with views */
    int64_t offset;      /* in elements */
    tg_shape shape;
    int64_t strides[TG_MAX_DIMS]; /* in elements */
    tg_dtype dtype;
    bool requires_grad;         /* leaves: set by the user; results: true iff grad_fn */
    tg_tensor *grad;            /* owned; accumulated by backward for leaves */
    struct tg_node *grad_fn;    /* owned reference to the node that made this tensor */
    int output_nr;              /* which output of grad_fn this is */
    struct tg_hook_list *hooks; /* owned; gradient hooks */
    struct tg_trace_rec *trace; /* owned; where it was made, while TG_LEAK_TRACE is on (core/trace.c) */
    tg_tensor_history history;  /* written when it is freed */
};

/* A handle an op must refuse: NULL (the op that made it failed) or a freed tensor. */
static inline bool tg_unusable_(const tg_tensor *t) { return !t || t->life != TG_TENSOR_ALIVE; }
/* The error for such a handle as input `index` of op: tg_error_null_input's message
 * for NULL; for a freed tensor, what it was, where it was made and how it was freed. */
tg_status tg_error_unusable_input(const char *op, const tg_tensor *t, int index);

/* Set by autograd when it first attaches a node or a hook; called when a tensor with
 * either is freed, so that core needs no knowledge of graph nodes. */
extern void (*tg_autograd_free_slots)(tg_tensor *t);

/* A new tensor struct (refcount 1, tracked by the innermost scope) over `storage`
 * (whose reference is taken over). */
tg_tensor *tg_tensor_wrap(tg_storage *storage, tg_dtype dtype, tg_shape shape, const int64_t *strides, int64_t offset);
/* Checks a requested shape/dtype/device for creation; records an error naming op. */
tg_status tg_check_creation(const char *op, tg_shape shape, tg_opts opts);

/* The one constructor of views (as_strided, view, narrow, expand, permute, ...): a new
 * tensor over t's storage, after checking that the shape is valid, that no size or
 * offset product overflows and that every element lies inside the storage. Errors
 * start with `op`. */
tg_tensor *tg_make_view(const char *op, tg_tensor *t, tg_shape shape, const int64_t *strides, int64_t offset);

/* Value writes for the library's own use (a forward filling its fresh output, the
 * engine copying a gradient): no autograd rules, no overlap check, no graph. They
 * bump the version. Users call tg_copy_ / tg_fill_ / tg_clone (ops/inplace.h,
 * ops/shape.h), which follow the in-place rules and record gradients. Error
 * messages name tg_copy_ / tg_fill_ / tg_clone. */
tg_status tg_copy_values_(tg_tensor *dst, tg_tensor *src);
tg_status tg_fill_values_(tg_tensor *t, double value);
/* Fails, naming op, the value and the dtype, when an integer dtype cannot hold value
 * (NaN, Inf, out of range: PyTorch's "cannot be converted ... without overflow"),
 * before any undefined double -> integer conversion; other dtypes take any value. */
tg_status tg_check_fill_value(const char *op, tg_dtype dtype, double value);
tg_tensor *tg_clone_values(tg_tensor *t);
/* Uninitialised, with like's strides when those are dense (else contiguous):
 * PyTorch's empty_like with preserve_format, the layout a gradient gets. */
tg_tensor *tg_empty_strided_like(tg_tensor *like);

/* How two tensors' elements meet in memory (PyTorch's MemOverlapStatus). */
typedef enum {
    TG_OVERLAP_NONE,    /* different storages, or disjoint ranges */
    TG_OVERLAP_FULL,    /* the very same elements in the same order */
    TG_OVERLAP_PARTIAL, /* some elements shared, differently */
    TG_OVERLAP_MAYBE,   /* ranges meet but a strided layout may interleave: unknown */
} tg_overlap;
tg_overlap tg_overlap_of(const tg_tensor *a, const tg_tensor *b);
/* Sizes and strides cover a block of memory exactly once, in some dim order. */
bool tg_is_non_overlapping_and_dense(const tg_tensor *t);
/* Some element is reached by two indices (a stride 0 over a size above 1). */
bool tg_has_internal_overlap(const tg_tensor *t);

/* Inline forms of tg_shape_numel and tg_contiguous_strides, for the per-op paths: the
 * calls, each copying the 72-byte shape, showed in the per-op profile (bench/overhead.c).
 * core/shape.c and core/tensor.c define the exported functions with these. */
static inline int64_t tg_shape_numel_inline(const tg_shape *s) {
    for (int i = 0; i < s->ndim; i++)
        if (s->dims[i] == 0) return 0; /* before multiplying: [0, 2^40, 2^40] must not overflow */
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->dims[i];
    return n;
}

static inline void tg_contiguous_strides_inline(const tg_shape *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = shape->ndim - 1; i >= 0; i--) {
        strides[i] = s;
        /* Only an empty tensor can have sizes whose product overflows (creation refuses
         * the rest); its strides are never used to address memory. */
        if (__builtin_mul_overflow(s, shape->dims[i] > 1 ? shape->dims[i] : 1, &s)) s = INT64_MAX;
    }
}

static inline void *tg_elem_ptr(const tg_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)tg_dtype_size_inline(t->dtype);
}

#ifdef __cplusplus
}
#endif
#endif
