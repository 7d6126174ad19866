#include "core/thread_exit.h"

#include <pthread.h>

#include "core/error.h"

#define MAX_HANDLERS 8

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static _Thread_local void (*handlers[MAX_HANDLERS])(void);
static _Thread_local int handler_count;

static void run_handlers(void *unused) {
    (void)unused;
    for (int i = handler_count - 1; i >= 0; i--) handlers[i]();
    handler_count = 0;
}

static void make_key(void) { TG_ASSERT(pthread_key_create(&key, run_handlers) == 0); }

void tg_at_thread_exit(void (*fn)(void)) {
    pthread_once(&key_once, make_key);
    TG_ASSERT(handler_count < MAX_HANDLERS);
    handlers[handler_count++] = fn;
    pthread_setspecific(key, (void *)1); /* non-NULL, so the destructor runs */
}
