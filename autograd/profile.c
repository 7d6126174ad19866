#include "autograd/profile.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_OPS 256

typedef struct {
    const char *name;
    long calls[2];
    double seconds[2];
    size_t bytes[2];
} op_stats;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static op_stats table[MAX_OPS];
static int num_ops;
static int state = -1; /* -1: environment not read yet */

static _Thread_local bool in_backward;

static void print_at_exit(void) { tg_profile_print(stderr); }

bool tg_profile_set_in_backward(bool on) {
    bool was = in_backward;
    in_backward = on;
    return was;
}

bool tg_profile_in_backward(void) { return in_backward; }

bool tg_profile_enabled(void) {
    if (state < 0) {
        const char *env = getenv("TG_PROFILE");
        tg_profile_enable(env && env[0] && strcmp(env, "0") != 0);
    }
    return state == 1;
}

void tg_profile_enable(bool on) {
    static bool registered;
    pthread_mutex_lock(&lock);
    state = on;
    if (on && !registered) {
        registered = true;
        atexit(print_at_exit);
    }
    pthread_mutex_unlock(&lock);
}

double tg_profile_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tg_profile_record(const char *name, bool backward, double seconds, size_t bytes) {
    pthread_mutex_lock(&lock);
    int i = 0;
    while (i < num_ops && strcmp(table[i].name, name) != 0) i++;
    if (i == num_ops && num_ops < MAX_OPS) table[num_ops++] = (op_stats){.name = name}; /* no counts left by a reset */
    if (i < num_ops) {
        table[i].calls[backward]++;
        table[i].seconds[backward] += seconds;
        table[i].bytes[backward] += bytes;
    }
    pthread_mutex_unlock(&lock);
}

static int by_total_time(const void *a, const void *b) {
    const op_stats *x = a, *y = b;
    double tx = x->seconds[0] + x->seconds[1], ty = y->seconds[0] + y->seconds[1];
    return (tx < ty) - (tx > ty);
}

void tg_profile_print(FILE *out) {
    pthread_mutex_lock(&lock);
    op_stats sorted[MAX_OPS];
    memcpy(sorted, table, sizeof(op_stats) * (size_t)num_ops);
    int n = num_ops;
    pthread_mutex_unlock(&lock);
    qsort(sorted, (size_t)n, sizeof *sorted, by_total_time);
    fprintf(out, "\ntapegrad profile (TG_PROFILE=1): inclusive times, ops by total time\n");
    fprintf(out, "%-22s %10s %12s %12s %10s %12s %12s\n", "op", "fwd calls", "fwd ms", "fwd MB", "bwd calls", "bwd ms",
            "bwd MB");
    for (int i = 0; i < n; i++)
        fprintf(out, "%-22s %10ld %12.3f %12.1f %10ld %12.3f %12.1f\n", sorted[i].name, sorted[i].calls[0],
                sorted[i].seconds[0] * 1e3, (double)sorted[i].bytes[0] / 1e6, sorted[i].calls[1],
                sorted[i].seconds[1] * 1e3, (double)sorted[i].bytes[1] / 1e6);
}

void tg_profile_reset(void) {
    pthread_mutex_lock(&lock);
    num_ops = 0;
    pthread_mutex_unlock(&lock);
}
