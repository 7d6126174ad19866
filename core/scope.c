#include "core/scope.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor_impl.h"
#include "core/thread_exit.h"
#include "core/trace_impl.h"

/* The scope stack is one growing array of owned references (like an autorelease
 * pool); each open scope remembers where its part starts and which tensors it hands
 * to its parent. */
typedef struct {
    tg_tensor **items;
    long count, capacity;
} tensor_list;

typedef struct {
    long start;         /* index into owned.items where this scope's part starts */
    long returns_start; /* index into returned.items where this scope's returns start */
} scope_frame;

/* Scopes nest, so each one's returned references are the top of one shared stack
 * (no list of their own to allocate per op). */
static _Thread_local tensor_list owned, returned;
static _Thread_local scope_frame *frames;
static _Thread_local int depth, frame_capacity;
static atomic_long live_tensors;

void (*tg_autograd_free_slots)(tg_tensor *t);

long tg_live_tensors(void) { return atomic_load(&live_tensors); }
int tg_scope_depth(void) { return depth; }

static void list_push(tensor_list *l, tg_tensor *t) {
    if (l->count == l->capacity) {
        long cap = l->capacity ? 2 * l->capacity : 64;
        tg_tensor **items = realloc(l->items, (size_t)cap * sizeof *items);
        TG_ASSERT(items != NULL);
        l->items = items;
        l->capacity = cap;
    }
    l->items[l->count++] = t;
}

/* Freed tensor structs are kept per thread and reused: a training step makes
 * thousands, and malloc/free were a quarter of the per-op cost. The list runs
 * through the freed structs themselves (their storage field), so keeping more costs
 * no array; the cap bounds what one thread holds. */
#define FREE_TENSORS_MAX 65536
#define FREE_TENSORS_KEPT (TG_RECYCLE_STRUCTS ? FREE_TENSORS_MAX : 0)
static _Thread_local tg_tensor *free_tensors;
static _Thread_local int free_tensor_count;

static _Thread_local bool cache_registered;

static void free_tensor_cache(void) {
    while (free_tensors) {
        tg_tensor *t = free_tensors;
        free_tensors = (tg_tensor *)t->storage;
        free(t);
    }
    free_tensor_count = 0;
    free(owned.items);
    owned = (tensor_list){0};
    free(returned.items);
    returned = (tensor_list){0};
    free(frames);
    frames = NULL;
    frame_capacity = 0;
}

/* This thread's cached structs and scope arrays are freed when it exits. */
static void ensure_thread_cleanup(void) {
    if (!cache_registered) {
        cache_registered = true;
        tg_at_thread_exit(free_tensor_cache);
    }
}

static tg_tensor *tensor_alloc(void) {
    ensure_thread_cleanup();
    if (free_tensors) {
        tg_tensor *t = free_tensors;
        free_tensors = (tg_tensor *)t->storage;
        free_tensor_count--;
        return t; /* filled by tg_tensor_wrap, its one caller */
    }
    return malloc(sizeof(tg_tensor));
}

static void tensor_free(tg_tensor *t) {
    if (free_tensor_count < FREE_TENSORS_KEPT) {
        t->storage = (tg_storage *)free_tensors;
        free_tensors = t;
        free_tensor_count++;
    } else
        free(t);
}

tg_tensor *tg_tensor_wrap(tg_storage *storage, tg_dtype dtype, tg_shape shape,
                          const int64_t *strides, int64_t offset) {
    tg_tensor *t = tensor_alloc();
    if (!t) {
        tg_storage_release(storage);
        tg_error("out of memory allocating a tensor");
        return NULL;
    }
    /* Every field at once (a memset and then the same bytes again showed in the
     * per-op profile); strides past ndim stay zero. */
    *t = (tg_tensor){.refcount = 1, .storage = storage, .offset = offset, .shape = shape, .dtype = dtype};
    if (strides)
        for (int i = 0; i < shape.ndim; i++) t->strides[i] = strides[i];
    else
        tg_contiguous_strides_inline(&shape, t->strides);
    atomic_fetch_add(&live_tensors, 1);
    if (tg_leak_trace_on_()) tg_trace_created_(t);
    return tg_scope_track(t);
}

tg_tensor *tg_scope_track(tg_tensor *t) {
    if (t && depth > 0) list_push(&owned, t);
    return t;
}

tg_tensor *tg_retain(tg_tensor *t) {
    if (t) t->refcount++;
    return t;
}

void tg_release(tg_tensor *t) {
    /* Freeing a tensor may free its grad, whose release may free more: a loop over a
     * small local stack instead of recursion. (Long graph chains are unwound by
     * autograd's node release, which is iterative too.) */
    while (t) {
        if (--t->refcount > 0) return;
        if (t->grad_fn || t->hooks) tg_autograd_free_slots(t);
        if (t->trace) tg_trace_freed_(t);
        tg_storage_release(t->storage);
        tg_tensor *grad = t->grad;
        tensor_free(t);
        atomic_fetch_sub(&live_tensors, 1);
        t = grad;
    }
}

void tg_scope_begin(void) {
    if (depth == frame_capacity) {
        ensure_thread_cleanup();
        int cap = frame_capacity ? 2 * frame_capacity : 16;
        scope_frame *f = realloc(frames, (size_t)cap * sizeof *f);
        TG_ASSERT(f != NULL);
        frames = f;
        frame_capacity = cap;
    }
    frames[depth] = (scope_frame){.start = owned.count, .returns_start = returned.count};
    depth++;
}

void tg_scope_end(void) {
    TG_ASSERT(depth > 0);
    scope_frame *f = &frames[--depth];
    while (owned.count > f->start) tg_release(owned.items[--owned.count]);
    /* The returned references now belong to the parent (or to the caller at depth 0). */
    for (long i = f->returns_start; i < returned.count; i++)
        if (depth > 0) list_push(&owned, returned.items[i]);
    returned.count = f->returns_start;
}

tg_tensor *tg_scope_return(tg_tensor *t) {
    if (!t || depth == 0) return t;
    /* The usual case, an op's result made last in this scope: its reference moves to
     * the returned list instead of a retain now and a release at the scope's end. */
    if (owned.count > frames[depth - 1].start && owned.items[owned.count - 1] == t)
        owned.count--;
    else
        tg_retain(t);
    list_push(&returned, t);
    return t;
}
