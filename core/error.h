/* Errors: the library never aborts on a user's mistake, and never loses one.
 *
 * A failing call returns NULL (or a non-zero tg_status) and records a message that
 * names the op and the offending shapes, dtypes or devices. The message is
 * thread-local. An op given a NULL input while an error is pending says so and
 * carries the first message on: "sum: input 0 is NULL: the op that made it failed:
 * add: shapes [2, 3] and [4] cannot be broadcast together", so a chain of calls can
 * be checked once at the end (tg_has_error / tg_last_error).
 *
 * What else happens when an error is recorded (process-wide):
 * - a handler set with tg_set_error_handler is called with every message, and
 *   nothing is printed; otherwise
 * - the error mode decides, set by tg_set_error_mode or, until a program sets one,
 *   by the environment variable TG_ERRORS:
 *     warn    (default) the error is printed to stderr ("tapegrad: error: ...") when
 *             it is recorded, once per distinct message (as glib's criticals), so an
 *             error that nothing reads is not lost; the errors of an op given NULL
 *             after a failure are not printed again (the first one was);
 *     silent  record only: the program reads tg_last_error itself;
 *     exit    print the message and exit(1) (scripts, tutorials);
 *     abort   print the message and abort() (a core dump / the debugger stops there).
 * Only a broken internal invariant aborts regardless, through TG_ASSERT. */
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

/* What a recorded error does besides being recorded (see above). */
typedef enum {
    TG_ERRORS_DEFAULT = -1, /* for tg_set_error_mode: back to TG_ERRORS's choice (or warn) */
    TG_ERRORS_WARN = 0,     /* print each distinct message once to stderr (the default) */
    TG_ERRORS_SILENT,       /* record only */
    TG_ERRORS_EXIT,         /* print, then exit(1) */
    TG_ERRORS_ABORT,        /* print, then abort() */
} tg_error_mode;

/* Sets the mode for the whole process (overriding TG_ERRORS); returns the previous
 * one, so that a block can switch and restore. */
tg_error_mode tg_set_error_mode(tg_error_mode mode);
/* The mode in effect: the one set, else TG_ERRORS's (abort, exit, warn or silent,
 * read when needed; another value is reported once and means warn), else
 * TG_ERRORS_WARN. Never TG_ERRORS_DEFAULT. */
tg_error_mode tg_get_error_mode(void);

/* Called with every new error message instead of the mode's action (e.g. a test that
 * collects messages). NULL restores the mode. Process-wide. */
typedef void (*tg_error_handler)(const char *message, void *user);
void tg_set_error_handler(tg_error_handler handler, void *user);

/* Called just before the library prints an error message to stderr (any mode that
 * prints), e.g. for a progress bar redrawn in place to end its line first so that the
 * message does not land on it (tutorials/common/report.c). NULL removes it. Process-wide. */
typedef void (*tg_error_prelude)(void *user);
void tg_set_error_prelude(tg_error_prelude prelude, void *user);

/* A ready-made handler: prints "tapegrad: error: <message>" to stderr and exits with
 * status 1 (what TG_ERRORS_EXIT does; for a program that also has its own handler to
 * chain to). */
void tg_error_exit_handler(const char *message, void *user);

/* Records an error (printf-style) and calls the handler or acts as the mode says.
 * Always returns TG_ERROR so that `return tg_error(...)` works in status-returning
 * functions. For extension authors as well as the library. */
tg_status tg_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Records "<op>: input <index> is NULL", with ": the op that made it failed: <the
 * first message>" when an error is pending. Returns TG_ERROR. */
tg_status tg_error_null_input(const char *op, int index);

/* Internal invariant check: prints file, line and the condition, then aborts. Never
 * used for user mistakes. */
void tg_assert_fail(const char *cond, const char *file, int line) __attribute__((noreturn));
#define TG_ASSERT(cond) ((cond) ? (void)0 : tg_assert_fail(#cond, __FILE__, __LINE__))

#ifdef __cplusplus
}
#endif
#endif
