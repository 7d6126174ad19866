#include "core/rng.h"
#include "core/rng_impl.h"

#include <pthread.h>

void tg_mt19937_seed(tg_mt19937 *g, uint64_t seed) {
    g->words[0] = (uint32_t)seed;
    for (uint32_t j = 1; j < 624; j++) g->words[j] = 1812433253u * (g->words[j - 1] ^ (g->words[j - 1] >> 30)) + j;
    g->index = 624;
}

/* The next 624 words: word k from words k, k + 1 and k + 397 (mod 624), in three runs
 * so that no index wraps inside a loop. */
#define MT_TWIST(w, k, k1, km) \
    ((w)[km] ^ ((((w)[k] & 0x80000000u) | ((w)[k1] & 0x7fffffffu)) >> 1) ^ (((w)[k1] & 1u) ? 0x9908b0dfu : 0u))

void tg_mt19937_regenerate(tg_mt19937 *g) {
    uint32_t *w = g->words;
    int k = 0;
    for (; k < 624 - 397; k++) w[k] = MT_TWIST(w, k, k + 1, k + 397);
    for (; k < 623; k++) w[k] = MT_TWIST(w, k, k + 1, k + 397 - 624);
    w[623] = MT_TWIST(w, 623, 0, 396);
    g->index = 0;
}

/* Fisher-Yates from the bottom, as ATen's randperm_cpu: swap i with i + word % (n - i). */
void tg_mt19937_permutation(tg_mt19937 *g, int64_t *perm, int64_t n) {
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = 0; i + 1 < n; i++) {
        int64_t z = (int64_t)(tg_mt19937_next(g) % (uint64_t)(n - i));
        int64_t tmp = perm[i];
        perm[i] = perm[z + i];
        perm[z + i] = tmp;
    }
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool seeded;
static tg_rng_state state;

/* An unseeded program starts from PyTorch's default_rng_seed_val. (PyTorch itself seeds
 * its default generator from the OS; tapegrad stays deterministic, docs/design.md.) */
#define DEFAULT_SEED 67280421310721ull

static void seed_locked(uint64_t seed) {
    state.seed = seed;
    tg_mt19937_seed(&state.cpu, seed);
    state.has_next_normal = false;
    state.next_normal = 0;
    state.offset = 0;
    seeded = true;
}

void tg_manual_seed(uint64_t seed) {
    pthread_mutex_lock(&lock);
    seed_locked(seed);
    pthread_mutex_unlock(&lock);
}

tg_rng_state *tg_rng_lock_cpu(void) {
    pthread_mutex_lock(&lock);
    if (!seeded) seed_locked(DEFAULT_SEED);
    return &state;
}

void tg_rng_unlock_cpu(void) { pthread_mutex_unlock(&lock); }

tg_rng_state tg_rng_get_state(void) {
    tg_rng_state s = *tg_rng_lock_cpu();
    tg_rng_unlock_cpu();
    return s;
}

void tg_rng_set_state(tg_rng_state s) {
    pthread_mutex_lock(&lock);
    state = s;
    if (state.cpu.index > 624) state.cpu.index = 624;
    seeded = true;
    pthread_mutex_unlock(&lock);
}

tg_philox_range tg_rng_reserve_cuda(uint64_t n) {
    tg_rng_state *s = tg_rng_lock_cpu();
    tg_philox_range r = {s->seed, s->offset};
    s->offset += n;
    tg_rng_unlock_cpu();
    return r;
}
