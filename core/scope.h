/* References and scopes: who frees what (docs/design.md).
 *
 * Every tensor is reference-counted. A function returning `tg_tensor *` returns a new
 * reference; while a scope is open, that reference belongs to the innermost scope and
 * is released when the scope ends. Outside any scope the caller owns it and calls
 * tg_release. tg_retain keeps a tensor past its scope (the caller then owns that
 * extra reference); tg_scope_return hands a tensor to the enclosing scope.
 *
 *     TG_SCOPE {
 *         tg_tensor *loss = ...;     // freed at the closing brace
 *     }
 *
 * However the block is left, the scope ends: at the closing brace, or on the way out
 * with `return`, `goto` or a failing ASSERT_* of a test (GCC's and Clang's
 * __attribute__((cleanup)), in C and C++). A tensor to keep goes through
 * tg_scope_return first, as always. TG_SCOPE is a one-pass loop, so a `break` or
 * `continue` in it leaves the TG_SCOPE block itself, not an enclosing loop. Scopes
 * are per thread. */
#ifndef TG_CORE_SCOPE_H
#define TG_CORE_SCOPE_H

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Adds a reference; returns t. The caller owns the added reference. NULL-safe; a freed
 * tensor is an error (NULL). */
tg_tensor *tg_retain(tg_tensor *t);
/* Drops a reference the caller owns; frees t (and its storage, grad and graph, when
 * nothing else holds them) at zero. NULL-safe. Releasing a reference a scope holds (a
 * tensor made inside a scope and not retained) or a freed tensor is an error naming
 * the tensor (docs/design.md, "handles that know when they are dead"), nothing freed. */
void tg_release(tg_tensor *t);

void tg_scope_begin(void);
/* Releases every reference the innermost scope owns. */
void tg_scope_end(void);
/* Hands t to the enclosing scope (or to the caller when this is the outermost scope)
 * so that it survives the end of the current one. Returns t. NULL-safe. */
tg_tensor *tg_scope_return(tg_tensor *t);
/* Depth of open scopes on this thread. */
int tg_scope_depth(void);

#define TG_CONCAT2(a, b) a##b
#define TG_CONCAT(a, b) TG_CONCAT2(a, b)
/* Runs fn(&variable) when the variable goes out of scope, however the block is left. */
#define TG_CLEANUP_(fn) __attribute__((cleanup(fn)))

/* Internal to the block macros (TG_SCOPE, TG_FOR_EACH_BATCH): the depth to return to. */
typedef struct {
    int depth;
    int once;
} tg_scope_guard_;
/* tg_scope_begin, noting the TG_SCOPE's file and line for the message about a tensor
 * used after the scope freed it. */
void tg_scope_begin_at_(const char *file, int line);
static inline tg_scope_guard_ tg_scope_guard_begin_(const char *file, int line) {
    tg_scope_guard_ g = {tg_scope_depth(), 1};
    tg_scope_begin_at_(file, line);
    return g;
}
/* Ends every scope opened since g began (the block's own, and any the block left open). */
static inline void tg_scope_guard_end_(tg_scope_guard_ *g) {
    while (tg_scope_depth() > g->depth) tg_scope_end();
}

#define TG_SCOPE                                                                           \
    for (tg_scope_guard_ TG_CONCAT(tg_scope_, __LINE__)                                    \
             TG_CLEANUP_(tg_scope_guard_end_) = tg_scope_guard_begin_(__FILE__, __LINE__); \
         TG_CONCAT(tg_scope_, __LINE__).once; TG_CONCAT(tg_scope_, __LINE__).once = 0)

/* Live objects, cheap enough to stay on in every build; tests assert zero leaks. */
long tg_live_tensors(void);

/* Internal: registers a freshly made reference with the innermost scope (the library
 * calls this for every new tensor). Returns t. */
tg_tensor *tg_scope_track(tg_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
