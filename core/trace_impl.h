/* Leak tracing's hooks for core/scope.c (core/trace.h is the public side). */
#ifndef TG_CORE_TRACE_IMPL_H
#define TG_CORE_TRACE_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "core/tensor.h"

/* 1: record where each new tensor is made; 0: do not; -1: TG_LEAK_TRACE not read yet. */
extern atomic_int tg_leak_trace_state_;
int tg_leak_trace_read_env_(void);
static inline bool tg_leak_trace_on_(void) {
    int s = atomic_load_explicit(&tg_leak_trace_state_, memory_order_relaxed);
    return s == 1 || (s < 0 && tg_leak_trace_read_env_() == 1);
}
/* Records t's maker (called once per new tensor while tracing is on) / forgets it. */
void tg_trace_created_(tg_tensor *t);
void tg_trace_freed_(tg_tensor *t);
/* The public call, file and line that made t (traced and still alive); false if unknown. */
bool tg_trace_site_(const tg_tensor *t, const char **what, const char **file, int *line);

/* Set when TG_ERRORS=exit is ending the program: no leak report then. */
extern atomic_bool tg_exiting_on_error_;

#endif
