/* The tensor struct, for the library's own files (core/, autograd/, ops/, nn/, ...).
 * Users and extension authors go through the accessors of core/tensor.h. */
#ifndef TG_CORE_TENSOR_IMPL_H
#define TG_CORE_TENSOR_IMPL_H

#include "core/storage.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tg_node;      /* autograd/node.h */
struct tg_hook_list; /* autograd/hooks */

struct tg_tensor {
    long refcount;
    tg_storage *storage;          /* owned reference; shared with views */
    int64_t offset;               /* in elements */
    tg_shape shape;
    int64_t strides[TG_MAX_DIMS]; /* in elements */
    tg_dtype dtype;
    bool requires_grad;           /* leaves: set by the user; results: true iff grad_fn */
    tg_tensor *grad;              /* owned; accumulated by backward for leaves */
    struct tg_node *grad_fn;      /* owned reference to the node that made this tensor */
    int output_nr;                /* which output of grad_fn this is */
    struct tg_hook_list *hooks;   /* owned; gradient hooks */
    struct tg_trace_rec *trace;   /* owned; where it was made, while TG_LEAK_TRACE is on (core/trace.c) */
};

/* Set by autograd when it first attaches a node or a hook; called when a tensor with
 * either is freed, so that core needs no knowledge of graph nodes. */
extern void (*tg_autograd_free_slots)(tg_tensor *t);

/* A new tensor struct (refcount 1, tracked by the innermost scope) over `storage`
 * (whose reference is taken over). */
tg_tensor *tg_tensor_wrap(tg_storage *storage, tg_dtype dtype, tg_shape shape,
                          const int64_t *strides, int64_t offset);
/* Checks a requested shape/dtype/device for creation; records an error naming op. */
tg_status tg_check_creation(const char *op, tg_shape shape, tg_opts opts);

static inline void *tg_elem_ptr(const tg_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)tg_dtype_size(t->dtype);
}

#ifdef __cplusplus
}
#endif
#endif
