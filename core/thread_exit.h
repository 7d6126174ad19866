/* Per-thread caches (tensor, storage and node structs kept for reuse) must be freed
 * when their thread ends, or LeakSanitizer rightly reports them. */
#ifndef TG_CORE_THREAD_EXIT_H
#define TG_CORE_THREAD_EXIT_H

/* Calls fn when the calling thread exits (once per registration; at most 8 per thread). */
void tg_at_thread_exit(void (*fn)(void));

#endif
