#include "core/error.h"
#include "core/trace_impl.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MESSAGE_MAX 1024

static _Thread_local char last_message[MESSAGE_MAX];
/* The first message of the pending chain: what an op given NULL reports as the cause. */
static _Thread_local char root_message[MESSAGE_MAX];
static _Thread_local bool pending;
static _Thread_local unsigned long count;
static tg_error_handler handler;
static void *handler_user;

const char *tg_last_error(void) { return last_message; }
bool tg_has_error(void) { return pending; }
unsigned long tg_error_count(void) { return count; }

void tg_clear_error(void) {
    last_message[0] = '\0';
    root_message[0] = '\0';
    pending = false;
}

void tg_set_error_handler(tg_error_handler h, void *user) {
    handler = h;
    handler_user = user;
}

/* ---- the mode ---- */

static atomic_int mode_set = TG_ERRORS_DEFAULT; /* none set by the program: use TG_ERRORS */

static tg_error_mode env_mode(void) {
    static atomic_bool reported;
    const char *v = getenv("TG_ERRORS");
    if (!v || !*v || !strcmp(v, "warn")) return TG_ERRORS_WARN;
    if (!strcmp(v, "silent")) return TG_ERRORS_SILENT;
    if (!strcmp(v, "exit")) return TG_ERRORS_EXIT;
    if (!strcmp(v, "abort")) return TG_ERRORS_ABORT;
    if (!atomic_exchange(&reported, true))
        fprintf(stderr, "tapegrad: TG_ERRORS=%s is not one of abort, exit, warn, silent; using warn\n", v);
    return TG_ERRORS_WARN;
}

tg_error_mode tg_get_error_mode(void) {
    int m = atomic_load(&mode_set);
    return m == TG_ERRORS_DEFAULT ? env_mode() : (tg_error_mode)m;
}

tg_error_mode tg_set_error_mode(tg_error_mode mode) {
    tg_error_mode prev = tg_get_error_mode();
    atomic_store(&mode_set, (int)mode);
    return prev;
}

/* ---- printing each distinct message once ---- */

#define SEEN_MAX 1024 /* distinct messages remembered; past that, no more are printed */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seen[2 * SEEN_MAX]; /* open addressing on the messages' hashes; 0 = empty */
static int seen_count;

static uint64_t hash_message(const char *s) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h ? h : 1;
}

/* True the first time a message is seen (and while fewer than SEEN_MAX were). */
static bool first_sighting(const char *message, bool *full_now) {
    uint64_t h = hash_message(message);
    bool first = false;
    *full_now = false;
    pthread_mutex_lock(&seen_lock);
    if (seen_count <= SEEN_MAX) {
        size_t i = (size_t)(h % (2 * SEEN_MAX));
        while (seen[i] && seen[i] != h) i = (i + 1) % (2 * SEEN_MAX);
        if (!seen[i]) {
            if (seen_count == SEEN_MAX) {
                *full_now = true;
                seen_count++;
            } else {
                seen[i] = h;
                seen_count++;
                first = true;
            }
        }
    }
    pthread_mutex_unlock(&seen_lock);
    return first;
}

static tg_error_prelude prelude;
static void *prelude_user;

void tg_set_error_prelude(tg_error_prelude fn, void *user) {
    prelude = fn;
    prelude_user = user;
}

static void before_printing(void) {
    if (prelude) prelude(prelude_user);
}

static void warn_once(const char *message) {
    static atomic_bool hinted;
    bool full_now;
    if (!first_sighting(message, &full_now)) {
        if (full_now)
            fprintf(stderr, "tapegrad: %d distinct errors printed; no more will be (TG_ERRORS=silent)\n", SEEN_MAX);
        return;
    }
    before_printing();
    fprintf(stderr, "tapegrad: error: %s\n", message);
    if (!atomic_exchange(&hinted, true))
        fprintf(stderr, "tapegrad: (each distinct error is printed once; read it with tg_last_error(), or choose "
                        "with TG_ERRORS=abort|exit|warn|silent, tg_set_error_mode or tg_set_error_handler)\n");
}

void tg_error_exit_handler(const char *message, void *user) {
    (void)user;
    before_printing();
    fprintf(stderr, "tapegrad: error: %s\n", message);
    atomic_store(&tg_exiting_on_error_, true); /* the tensors of the interrupted work are no leak */
    fflush(NULL);
    exit(1);
}

/* ---- recording ---- */

/* `consequence`: the error of an op given NULL after an earlier failure, which warn
 * mode does not print again. */
static void act(bool consequence) {
    if (handler) {
        handler(last_message, handler_user);
        return;
    }
    switch (tg_get_error_mode()) {
    case TG_ERRORS_WARN:
        if (!consequence) warn_once(last_message);
        break;
    case TG_ERRORS_SILENT: break;
    case TG_ERRORS_EXIT: tg_error_exit_handler(last_message, NULL); break;
    case TG_ERRORS_ABORT:
        before_printing();
        fprintf(stderr, "tapegrad: error: %s\n", last_message);
        abort();
    case TG_ERRORS_DEFAULT: /* tg_get_error_mode never returns it */ break;
    }
}

tg_status tg_error(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, args);
    va_end(args);
    memcpy(root_message, last_message, sizeof root_message);
    pending = true;
    count++;
    act(false);
    return TG_ERROR;
}

tg_status tg_error_null_input(const char *op, int index) {
    if (!pending) return tg_error("%s: input %d is NULL", op, index);
    int n = snprintf(last_message, sizeof last_message, "%s: input %d is NULL: the op that made it failed: %s", op,
                     index, root_message);
    if (n >= (int)sizeof last_message) /* a long first message loses its end, marked */
        memcpy(last_message + sizeof last_message - 4, "...", 4);
    count++;
    act(true);
    return TG_ERROR;
}

void tg_assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "tapegrad internal error: %s:%d: assertion '%s' failed\n", file, line, cond);
    abort();
}
