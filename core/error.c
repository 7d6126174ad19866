#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static _Thread_local char last_message[1024];
static _Thread_local bool pending;
static _Thread_local unsigned long count;
static tg_error_handler handler;
static void *handler_user;

const char *tg_last_error(void) { return last_message; }
bool tg_has_error(void) { return pending; }
unsigned long tg_error_count(void) { return count; }

void tg_clear_error(void) {
    last_message[0] = '\0';
    pending = false;
}

void tg_set_error_handler(tg_error_handler h, void *user) {
    handler = h;
    handler_user = user;
}

tg_status tg_error(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, args);
    va_end(args);
    pending = true;
    count++;
    if (handler) handler(last_message, handler_user);
    return TG_ERROR;
}

tg_status tg_error_null_input(const char *op, int index) {
    if (pending) return TG_ERROR;
    return tg_error("%s: input %d is NULL", op, index);
}

void tg_assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "tapegrad internal error: %s:%d: assertion '%s' failed\n", file, line, cond);
    abort();
}
