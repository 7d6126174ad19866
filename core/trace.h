/* Leak reports: which tensors are still alive, and the source line that made them.
 *
 * At exit, a program that still holds tensors is told so on stderr:
 *
 *     tapegrad: 2 tensors still alive at exit (never released; run with TG_LEAK_TRACE=1
 *     to see the lines that made them)
 *
 * With TG_LEAK_TRACE=1 in the environment (or tg_set_leak_trace(true)), each tensor
 * records the public call that made it and that call's file and line, and the report
 * lists them, grouped by line, most tensors first:
 *
 *     tapegrad: 2 tensors still alive at exit, made by:
 *       main.c:17: tg_randn: 1 tensor (float32 [64, 784])
 *       main.c:18: tg_zeros: 1 tensor (int64 [64])
 *
 * TG_LEAK_TRACE=0 turns the exit report off. The report is skipped when the program
 * exits with a scope still open (exit() called inside TG_SCOPE: its tensors are not
 * leaked, just not freed yet) or through TG_ERRORS=exit.
 *
 * The line comes from core/trace_macros.h (included last by tapegrad.h): every public
 * function that returns a tensor, module, optimizer, scheduler, loader, tensor map or
 * status is wrapped by a macro of its own name that notes its name, __FILE__ and
 * __LINE__ on a thread-local stack for the duration of the call (three stores and a
 * counter). A tensor is credited to the innermost call in progress: in
 * tg_sum(tg_mul(a, b)) the product to tg_mul, the sum to tg_sum; inside a module's
 * forward that tg_forward runs, to the line of the forward. Tensors made with nothing
 * noted (inside a void function, or on a thread the library started) are listed as
 * made inside tapegrad. Define TG_NO_TRACE_MACROS
 * before including tapegrad.h to call the functions directly. */
#ifndef TG_CORE_TRACE_H
#define TG_CORE_TRACE_H

#include <stdbool.h>
#include <stdio.h>

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Turns recording on or off for tensors made from now on (process-wide); returns
 * the previous setting. The initial setting is TG_LEAK_TRACE=1's. */
bool tg_set_leak_trace(bool on);
bool tg_leak_trace_enabled(void);

/* Writes the live-tensor report to out ("tapegrad: N tensors alive, made by: ..."
 * with recording on, the count otherwise); nothing when none is alive. Returns the
 * number of live tensors. */
long tg_report_live_tensors(FILE *out);

/* Internal to core/trace_macros.h: note a public call and its line; forget it when
 * that call returns (passing its result through). */
void tg_trace_enter_(const char *what, const char *file, int line);
void *tg_trace_leave_(void *result);
tg_status tg_trace_leave_status_(tg_status result);

#ifdef __cplusplus
}
#endif
#endif
