/* References and scopes: who frees what (DESIGN.md, "Memory").
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
 * Do not `return`, `break` or `goto` out of a TG_SCOPE block: the scope would stay
 * open. Scopes are per thread. */
#ifndef TG_CORE_SCOPE_H
#define TG_CORE_SCOPE_H

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Adds a reference; returns t. The caller owns the added reference. NULL-safe. */
tg_tensor *tg_retain(tg_tensor *t);
/* Drops a reference the caller owns; frees t (and its storage, grad and graph, when
 * nothing else holds them) at zero. NULL-safe. */
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
#define TG_SCOPE                                                                  \
    for (int TG_CONCAT(tg_scope_once_, __LINE__) = (tg_scope_begin(), 1);         \
         TG_CONCAT(tg_scope_once_, __LINE__);                                     \
         TG_CONCAT(tg_scope_once_, __LINE__) = (tg_scope_end(), 0))

/* Live objects, cheap enough to stay on in every build; tests assert zero leaks. */
long tg_live_tensors(void);

/* Internal: registers a freshly made reference with the innermost scope (the library
 * calls this for every new tensor). Returns t. */
tg_tensor *tg_scope_track(tg_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
