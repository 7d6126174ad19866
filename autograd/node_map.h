/* A map from graph nodes to indices (open addressing on the node's address), for the
 * walks over a graph that must not mark the shared nodes themselves: the engine's
 * per-call state and tg_graph_dot's visited set. */
#ifndef TG_AUTOGRAD_NODE_MAP_H
#define TG_AUTOGRAD_NODE_MAP_H

#include <stdbool.h>

#include "autograd/node.h"

typedef struct {
    tg_node **keys; /* NULL: empty slot */
    long *values;
    long capacity, count; /* capacity: 0 or a power of two */
} tg_node_map;

/* The value stored for n, or -1. */
long tg_node_map_get(const tg_node_map *m, const tg_node *n);
/* Stores n -> value unless n is present; true when it was added. */
bool tg_node_map_add(tg_node_map *m, tg_node *n, long value);
void tg_node_map_free(tg_node_map *m);

#endif
