#include "autograd/node_map.h"

#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"

static long slot_of(const tg_node_map *m, const tg_node *n) {
    /* Fibonacci hashing of the address (nodes are at least 16-byte aligned). */
    uint64_t h = ((uint64_t)(uintptr_t)n >> 4) * 0x9E3779B97F4A7C15ull;
    long i = (long)(h >> 20) & (m->capacity - 1);
    while (m->keys[i] && m->keys[i] != n) i = (i + 1) & (m->capacity - 1);
    return i;
}

long tg_node_map_get(const tg_node_map *m, const tg_node *n) {
    if (m->capacity == 0) return -1;
    long i = slot_of(m, n);
    return m->keys[i] ? m->values[i] : -1;
}

static void grow(tg_node_map *m) {
    tg_node_map bigger = {0};
    bigger.capacity = m->capacity ? 2 * m->capacity : 64;
    bigger.keys = calloc((size_t)bigger.capacity, sizeof *bigger.keys);
    bigger.values = malloc((size_t)bigger.capacity * sizeof *bigger.values);
    TG_ASSERT(bigger.keys != NULL && bigger.values != NULL);
    for (long i = 0; i < m->capacity; i++)
        if (m->keys[i]) tg_node_map_add(&bigger, m->keys[i], m->values[i]);
    tg_node_map_free(m);
    *m = bigger;
}

bool tg_node_map_add(tg_node_map *m, tg_node *n, long value) {
    if (2 * (m->count + 1) > m->capacity) grow(m); /* at most half full */
    long i = slot_of(m, n);
    if (m->keys[i]) return false;
    m->keys[i] = n;
    m->values[i] = value;
    m->count++;
    return true;
}

void tg_node_map_free(tg_node_map *m) {
    free(m->keys);
    free(m->values);
    *m = (tg_node_map){0};
}
