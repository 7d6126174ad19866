#include "core/rng.h"

#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tg_rng_state state = {.seed = 67280421310721ull, .offset = 0};

void tg_manual_seed(uint64_t seed) {
    pthread_mutex_lock(&lock);
    state = (tg_rng_state){.seed = seed, .offset = 0};
    pthread_mutex_unlock(&lock);
}

tg_rng_state tg_rng_get_state(void) {
    pthread_mutex_lock(&lock);
    tg_rng_state s = state;
    pthread_mutex_unlock(&lock);
    return s;
}

void tg_rng_set_state(tg_rng_state s) {
    pthread_mutex_lock(&lock);
    state = s;
    pthread_mutex_unlock(&lock);
}

tg_rng_state tg_rng_reserve(uint64_t n) {
    pthread_mutex_lock(&lock);
    tg_rng_state s = state;
    state.offset += n;
    pthread_mutex_unlock(&lock);
    return s;
}
