/* Leak reports (core/trace.h): per-tensor records of where a tensor was made, kept in
 * a process-wide list while TG_LEAK_TRACE is on, and the report at exit. */
#include "core/trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/scope.h"
#include "core/tensor_impl.h"
#include "core/trace_impl.h"

struct tg_trace_rec {
    const char *what, *file; /* NULL file: made with no public call noted */
    int line;
    tg_tensor *tensor;
    struct tg_trace_rec *prev, *next;
};

/* -1: not read from the environment yet. */
atomic_int tg_leak_trace_state_ = -1;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tg_trace_rec *live; /* every recorded live tensor */

/* The public calls in progress on this thread, innermost last: a tensor is credited
 * to the innermost (tg_mul inside tg_sum(tg_mul(a, b)); the line inside a module's
 * forward when tg_forward calls it). Deeper than NOTED_MAX, the deepest kept stands in. */
#define NOTED_MAX 16
typedef struct {
    const char *what, *file;
    int line;
} call_site;
static _Thread_local call_site noted[NOTED_MAX];
static _Thread_local int noted_depth;

void tg_trace_enter_(const char *what, const char *file, int line) {
    if (noted_depth < NOTED_MAX) noted[noted_depth] = (call_site){what, file, line};
    noted_depth++;
}

static void leave(void) {
    if (noted_depth > 0) noted_depth--;
}

void *tg_trace_leave_(void *result) {
    leave();
    return result;
}

tg_status tg_trace_leave_status_(tg_status result) {
    leave();
    return result;
}

static const char *env_value(void) {
    const char *v = getenv("TG_LEAK_TRACE");
    return v ? v : "";
}

int tg_leak_trace_read_env_(void) {
    int on = !strcmp(env_value(), "1");
    int expected = -1;
    atomic_compare_exchange_strong(&tg_leak_trace_state_, &expected, on);
    return atomic_load(&tg_leak_trace_state_);
}

bool tg_leak_trace_enabled(void) {
    int s = atomic_load(&tg_leak_trace_state_);
    return (s < 0 ? tg_leak_trace_read_env_() : s) == 1;
}

bool tg_set_leak_trace(bool on) {
    bool prev = tg_leak_trace_enabled();
    atomic_store(&tg_leak_trace_state_, on ? 1 : 0);
    return prev;
}

void tg_trace_created_(tg_tensor *t) {
    struct tg_trace_rec *r = malloc(sizeof *r);
    if (!r) return; /* the report then counts it without a line */
    call_site c = {NULL, NULL, 0};
    if (noted_depth > 0) c = noted[(noted_depth < NOTED_MAX ? noted_depth : NOTED_MAX) - 1];
    *r = (struct tg_trace_rec){c.what, c.file, c.line, t, NULL, NULL};
    pthread_mutex_lock(&lock);
    r->next = live;
    if (live) live->prev = r;
    live = r;
    pthread_mutex_unlock(&lock);
    t->trace = r;
}

void tg_trace_freed_(tg_tensor *t) {
    struct tg_trace_rec *r = t->trace;
    pthread_mutex_lock(&lock);
    if (r->prev) r->prev->next = r->next;
    else live = r->next;
    if (r->next) r->next->prev = r->prev;
    pthread_mutex_unlock(&lock);
    t->history.made_by = r->what; /* for the message about a stale handle (core/scope.c) */
    t->history.made_file = r->file;
    t->history.made_line = r->line;
    free(r);
    t->trace = NULL;
}

bool tg_trace_site_(const tg_tensor *t, const char **what, const char **file, int *line) {
    if (!t->trace || !t->trace->file) return false;
    *what = t->trace->what, *file = t->trace->file, *line = t->trace->line;
    return true;
}

/* ---- the report ---- */

typedef struct {
    const char *what, *file;
    int line;
    long count;
    tg_tensor *example;
} site;

/* Most tensors first; then by file and line, so that the report is stable. */
static int by_count(const void *a, const void *b) {
    const site *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    int f = strcmp(x->file ? x->file : "", y->file ? y->file : "");
    if (f) return f;
    if (x->line != y->line) return x->line < y->line ? -1 : 1;
    return strcmp(x->what ? x->what : "", y->what ? y->what : "");
}

#define SITES_MAX 256 /* distinct lines listed; the rest are counted together */
#define SITES_SHOWN 20

static void report(FILE *out, long total, const char *when) {
    site *sites = calloc(SITES_MAX, sizeof *sites);
    int nsites = 0;
    long recorded = 0, other_sites = 0;
    pthread_mutex_lock(&lock);
    for (struct tg_trace_rec *r = live; r && sites; r = r->next) {
        recorded++;
        int i = 0;
        while (i < nsites && !(sites[i].line == r->line && sites[i].file == r->file && sites[i].what == r->what)) i++;
        if (i == nsites) {
            if (nsites == SITES_MAX) {
                other_sites++;
                continue;
            }
            sites[nsites++] = (site){r->what, r->file, r->line, 0, r->tensor};
        }
        sites[i].count++;
    }
    if (recorded == 0 || !sites) {
        pthread_mutex_unlock(&lock);
        free(sites);
        fprintf(out,
                "tapegrad: %ld tensor%s %s (never released; run with TG_LEAK_TRACE=1 to see the lines that made %s)\n",
                total, total == 1 ? "" : "s", when, total == 1 ? "it" : "them");
        return;
    }
    qsort(sites, (size_t)nsites, sizeof *sites, by_count);
    fprintf(out, "tapegrad: %ld tensor%s %s, made by:\n", total, total == 1 ? "" : "s", when);
    for (int i = 0; i < nsites && i < SITES_SHOWN; i++) {
        char shape[128];
        tg_tensor *e = sites[i].example;
        tg_shape_str(e->shape, shape, sizeof shape);
        if (sites[i].file) fprintf(out, "  %s:%d: %s: ", sites[i].file, sites[i].line, sites[i].what);
        else fprintf(out, "  inside tapegrad, with no public call noted (e.g. gradients, optimizer state): ");
        fprintf(out, "%ld tensor%s (%s %s%s)\n", sites[i].count, sites[i].count == 1 ? "" : "s",
                tg_dtype_name(e->dtype), shape, sites[i].count > 1 ? ", ..." : "");
    }
    pthread_mutex_unlock(&lock);
    long listed = 0;
    for (int i = 0; i < nsites && i < SITES_SHOWN; i++) listed += sites[i].count;
    if (total > listed)
        fprintf(out, "  and %ld more tensor%s (from %d more lines, or made before recording was on)\n", total - listed,
                total - listed == 1 ? "" : "s",
                (nsites > SITES_SHOWN ? nsites - SITES_SHOWN : 0) + (int)(other_sites > 0));
    free(sites);
}

long tg_report_live_tensors(FILE *out) {
    long total = tg_live_tensors();
    if (total > 0 && out) report(out, total, "alive");
    return total;
}

/* Set by the error module when TG_ERRORS=exit ends the program. */
atomic_bool tg_exiting_on_error_;

__attribute__((destructor)) static void report_at_exit(void) {
    if (!strcmp(env_value(), "0") || atomic_load(&tg_exiting_on_error_) || tg_scope_depth() > 0) return;
    long total = tg_live_tensors();
    if (total > 0) report(stderr, total, "still alive at exit");
}
