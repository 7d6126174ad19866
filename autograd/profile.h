/* TG_PROFILE=1 in the environment: every op run through tg_apply is timed, forward
 * and backward separately, with the bytes its kernels allocated; the table is printed
 * to stderr at exit, ops by total time. Times are inclusive (an op whose forward calls
 * other ops includes them); the ops a backward formula runs (the mul in mul's
 * backward) count in the backward columns. Off, it costs one branch per op. */
#ifndef TG_AUTOGRAD_PROFILE_H
#define TG_AUTOGRAD_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* True when profiling is on (TG_PROFILE set and not "0", or tg_profile_enable). */
bool tg_profile_enabled(void);
void tg_profile_enable(bool on);
/* Writes the table collected so far; tg_profile_reset clears it. */
void tg_profile_print(FILE *out);
void tg_profile_reset(void);

/* For the library: one forward or backward of the op `name` took `seconds` and
 * allocated `bytes`. */
void tg_profile_record(const char *name, bool backward, double seconds, size_t bytes);
double tg_profile_clock(void);
/* The engine marks the time its thread spends in backward formulas, so that the ops
 * those formulas run are counted as backward work (tg_apply asks with
 * tg_profile_in_backward). Returns the previous mark. */
bool tg_profile_set_in_backward(bool on);
bool tg_profile_in_backward(void);

#ifdef __cplusplus
}
#endif
#endif
