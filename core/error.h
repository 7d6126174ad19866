/* Errors: the library never aborts on a user's mistake.
 *
 * A failing call returns NULL (or a non-zero tg_status) and records a message that
 * names the op and the offending shapes, dtypes or devices. The message is
 * thread-local. Ops given a NULL input return NULL without overwriting the first
 * message, so a chain of calls can be checked once at the end.
 * Only a broken internal invariant aborts, through TG_ASSERT. */
#ifndef TG_CORE_ERROR_H
#define TG_CORE_ERROR_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TG_OK = 0, TG_ERROR = 1 } tg_status;

/* The last error message of this thread, or "" when none. Borrowed; valid until the
 * next failing call on this thread. */
const char *tg_last_error(void);

/* True when this thread has an error recorded since the last tg_clear_error(). */
bool tg_has_error(void);

/* Number of errors recorded on this thread so far (never reset): lets a caller tell
 * whether a call it made failed even when NULL is also a valid answer. */
unsigned long tg_error_count(void);

/* Forgets this thread's last error. */
void tg_clear_error(void);

/* Called with every new error message (e.g. a tutorial's "print and exit").
 * NULL restores the default (record only). Process-wide. */
typedef void (*tg_error_handler)(const char *message, void *user);
void tg_set_error_handler(tg_error_handler handler, void *user);

/* Records an error (printf-style) and calls the handler. Always returns TG_ERROR so
 * that `return tg_error(...)` works in status-returning functions. For extension
 * authors as well as the library. */
tg_status tg_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Records "<op>: input <index> is NULL" unless an error is already pending (the first
 * message wins). Returns TG_ERROR. */
tg_status tg_error_null_input(const char *op, int index);

/* Internal invariant check: prints file, line and the condition, then aborts. Never
 * used for user mistakes. */
void tg_assert_fail(const char *cond, const char *file, int line) __attribute__((noreturn));
#define TG_ASSERT(cond) \
    ((cond) ? (void)0 : tg_assert_fail(#cond, __FILE__, __LINE__))

#ifdef __cplusplus
}
#endif
#endif
