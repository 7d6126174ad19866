#include "core/scope.h"

#include <stdio.h>

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
    const char *file;   /* the TG_SCOPE's line, for the history of what it frees */
    int line;
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

/* Freed tensor structs are reused per thread (a training step makes thousands, and
 * malloc/free were a quarter of the per-op cost), but not at once: they wait in a FIFO
 * queue, linked through their storage field, until QUARANTINE_TENSORS newer ones wait
 * behind them. Until then a stale handle still reads TG_TENSOR_FREED and is refused by
 * name (tg_unusable_) instead of reaching another tensor. Past FREE_TENSORS_MAX the
 * oldest is freed. Sanitizer builds free each struct at once instead, so that
 * AddressSanitizer sees any use after free (core/thread_exit.h). */
#define QUARANTINE_TENSORS 4096
#define FREE_TENSORS_MAX 65536
static _Thread_local tg_tensor *freed_oldest, *freed_newest;
static _Thread_local int freed_count;

static _Thread_local bool cache_registered;

static void free_tensor_cache(void) {
    while (freed_oldest) {
        tg_tensor *t = freed_oldest;
        freed_oldest = (tg_tensor *)t->storage;
        free(t);
    }
    freed_newest = NULL;
    freed_count = 0;
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
    if (freed_count > QUARANTINE_TENSORS) {
        tg_tensor *t = freed_oldest;
        freed_oldest = (tg_tensor *)t->storage;
        freed_count--;
        return t; /* filled by tg_tensor_wrap, its one caller */
    }
    return malloc(sizeof(tg_tensor));
}

static void tensor_free(tg_tensor *t) {
    t->life = TG_TENSOR_FREED;
    if (!TG_RECYCLE_STRUCTS) {
        free(t);
        return;
    }
    t->storage = NULL;
    if (freed_newest) freed_newest->storage = (tg_storage *)t;
    else freed_oldest = t;
    freed_newest = t;
    if (++freed_count > FREE_TENSORS_MAX) {
        tg_tensor *oldest = freed_oldest;
        freed_oldest = (tg_tensor *)oldest->storage;
        freed_count--;
        free(oldest);
    }
    if (!freed_oldest) freed_newest = NULL;
}

tg_tensor *tg_tensor_wrap(tg_storage *storage, tg_dtype dtype, tg_shape shape, const int64_t *strides, int64_t offset) {
    tg_tensor *t = tensor_alloc();
    if (!t) {
        tg_storage_release(storage);
        tg_error("out of memory allocating a tensor");
        return NULL;
    }
    /* Every field at once (a memset and then the same bytes again showed in the
     * per-op profile); strides past ndim stay zero. */
    *t = (tg_tensor){
        .life = TG_TENSOR_ALIVE, .refcount = 1, .storage = storage, .offset = offset, .shape = shape, .dtype = dtype};
    if (strides)
        for (int i = 0; i < shape.ndim; i++) t->strides[i] = strides[i];
    else tg_contiguous_strides_inline(&shape, t->strides);
    atomic_fetch_add(&live_tensors, 1);
    if (tg_leak_trace_on_()) tg_trace_created_(t);
    return tg_scope_track(t);
}

tg_tensor *tg_scope_track(tg_tensor *t) {
    if (t && depth > 0) {
        list_push(&owned, t);
        t->scope_refs++;
    }
    return t;
}

/* ---- stale handles ---- */

/* How the tensors freed now are being freed, for their history: the end of a scope
 * (at its TG_SCOPE's line) or a release. */
static _Thread_local const char *freeing_by, *freeing_file;
static _Thread_local int freeing_line;

static int describe(const tg_tensor *t, char *out, size_t size) {
    char shape[96];
    const tg_tensor_history *h = &t->history;
    int n = snprintf(out, size, "%s %s", tg_dtype_name(t->dtype), tg_shape_str(t->shape, shape, sizeof shape));
    const char *by = h->made_by, *file = h->made_file;
    int line = h->made_line;
    if (t->life == TG_TENSOR_ALIVE && !tg_trace_site_(t, &by, &file, &line)) file = NULL;
    if (file) n += snprintf(out + n, size > (size_t)n ? size - (size_t)n : 0, ", made by %s at %s:%d", by, file, line);
    return n;
}

tg_status tg_error_unusable_input(const char *op, const tg_tensor *t, int index) {
    if (!t) return tg_error_null_input(op, index);
    char what[320];
    describe(t, what, sizeof what);
    const tg_tensor_history *h = &t->history;
    char freed[200] = "";
    if (h->freed_file) snprintf(freed, sizeof freed, "%s at %s:%d", h->freed_by, h->freed_file, h->freed_line);
    else snprintf(freed, sizeof freed, "%s", h->freed_by ? h->freed_by : "the release of its last reference");
    return tg_error("%s: input %d is a tensor that was freed (%s%s), freed by %s: a tensor lives until the end "
                    "of the scope that made it (keep it with tg_retain or tg_scope_return)",
                    op, index, what, h->made_file ? "" : "; TG_LEAK_TRACE=1 records where it was made", freed);
}

tg_tensor *tg_retain(tg_tensor *t) {
    if (t && tg_unusable_(t)) {
        tg_error_unusable_input("tg_retain", t, 0);
        return NULL;
    }
    if (t) t->refcount++;
    return t;
}

/* Drops one reference, freeing what reaches zero. Freeing a tensor may free its grad,
 * whose release may free more: a loop instead of recursion. (Long graph chains are
 * unwound by autograd's node release, which is iterative too.) */
static inline __attribute__((always_inline)) void release_reference(tg_tensor *t) {
    while (t) {
        if (--t->refcount > 0) return;
        if (t->grad_fn || t->hooks) tg_autograd_free_slots(t);
        if (t->trace) tg_trace_freed_(t);
        t->history.freed_by = freeing_by;
        t->history.freed_file = freeing_file;
        t->history.freed_line = freeing_line;
        tg_storage_release(t->storage);
        tg_tensor *grad = t->grad;
        tensor_free(t);
        atomic_fetch_sub(&live_tensors, 1);
        t = grad;
    }
}

void tg_release(tg_tensor *t) {
    if (!t) return;
    if (tg_unusable_(t)) {
        tg_error_unusable_input("tg_release", t, 0);
        return;
    }
    if (t->refcount <= t->scope_refs) { /* every reference is a scope's: it would be freed twice */
        char what[320];
        describe(t, what, sizeof what);
        tg_error("tg_release: the tensor (%s) belongs to the scope that made it, which releases it at its end; "
                 "tg_release only references you own (from tg_retain, or made outside any scope)",
                 what);
        return;
    }
    release_reference(t);
}

void tg_scope_begin_at_(const char *file, int line) {
    if (depth == frame_capacity) {
        ensure_thread_cleanup();
        int cap = frame_capacity ? 2 * frame_capacity : 16;
        scope_frame *f = realloc(frames, (size_t)cap * sizeof *f);
        TG_ASSERT(f != NULL);
        frames = f;
        frame_capacity = cap;
    }
    frames[depth] = (scope_frame){.start = owned.count, .returns_start = returned.count, .file = file, .line = line};
    depth++;
}

void tg_scope_begin(void) { tg_scope_begin_at_(NULL, 0); }

void tg_scope_end(void) {
    TG_ASSERT(depth > 0);
    scope_frame *f = &frames[--depth];
    const char *outer_by = freeing_by, *outer_file = freeing_file;
    int outer_line = freeing_line;
    freeing_by = f->file ? "the end of the TG_SCOPE" : "the end of its scope";
    freeing_file = f->file;
    freeing_line = f->line;
    while (owned.count > f->start) {
        tg_tensor *t = owned.items[--owned.count];
        t->scope_refs--;
        release_reference(t);
    }
    freeing_by = outer_by, freeing_file = outer_file, freeing_line = outer_line;
    /* The returned references now belong to the parent (or to the caller at depth 0). */
    for (long i = f->returns_start; i < returned.count; i++)
        if (depth > 0) list_push(&owned, returned.items[i]);
        else returned.items[i]->scope_refs--;
    returned.count = f->returns_start;
}

tg_tensor *tg_scope_return(tg_tensor *t) {
    if (!t || depth == 0) return t;
    /* The usual case, an op's result made last in this scope: its reference moves to
     * the returned list instead of a retain now and a release at the scope's end. */
    if (owned.count > frames[depth - 1].start && owned.items[owned.count - 1] == t) {
        owned.count--;
    } else {
        t->refcount++;
        t->scope_refs++;
    }
    list_push(&returned, t);
    return t;
}
