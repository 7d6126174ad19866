/* Per-thread caches (tensor, storage and node structs kept for reuse) must be freed
 * when their thread ends, or LeakSanitizer rightly reports them. */
#ifndef TG_CORE_THREAD_EXIT_H
#define TG_CORE_THREAD_EXIT_H

/* Recycling structs hides use-after-free from AddressSanitizer (a freed struct is
 * never freed), so sanitizer builds allocate and free each one. */
#if defined(__SANITIZE_ADDRESS__)
#define TG_RECYCLE_STRUCTS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TG_RECYCLE_STRUCTS 0
#endif
#endif
#ifndef TG_RECYCLE_STRUCTS
#define TG_RECYCLE_STRUCTS 1
#endif

/* Calls fn when the calling thread exits (once per registration; at most 8 per thread). */
void tg_at_thread_exit(void (*fn)(void));

#endif
