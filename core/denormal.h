/* Subnormal ("denormal") floating-point numbers on the CPU, as torch.set_flush_denormal.
 *
 * By default tapegrad computes with IEEE subnormals, as PyTorch does, so results match
 * PyTorch's to the bit down to the smallest magnitudes. x86 CPUs take a microcode assist
 * of about a hundred cycles for an instruction that reads or produces one: late in an
 * Adam run the moments of parameters whose gradient stays zero decay into that range, and
 * the MLP tutorial's optimizer step became twice as slow over its first epoch (0.5 ms a
 * step over the first 400 steps, 1.0 ms on average over 938; docs/perf.md). Flushing
 * trades those values for speed: subnormal inputs read as zero (DAZ) and results that
 * would be subnormal become zero (FTZ). JAX on the CPU always runs this way (XLA's CPU
 * client sets both flags around every computation); PyTorch offers it as an option. */
#ifndef TG_CORE_DENORMAL_H
#define TG_CORE_DENORMAL_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Turns flushing on or off for the calling thread and for the work tapegrad's thread
 * pool does on its behalf (each parallel loop runs with its caller's setting). Returns
 * false, changing nothing, where the CPU cannot flush (every x86-64 CPU can; other
 * architectures are not supported yet), as torch.set_flush_denormal returns False. */
bool tg_set_flush_denormal(bool on);

/* Whether the calling thread flushes subnormals. */
bool tg_get_flush_denormal(void);

#ifdef __cplusplus
}
#endif
#endif
