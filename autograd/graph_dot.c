/* tg_graph_dot: the graph behind a tensor in Graphviz DOT. */
#include <stdlib.h>

#include "autograd/grad.h"
#include "autograd/node.h"
#include "autograd/node_map.h"
#include "core/tensor_impl.h"

tg_status tg_graph_dot(tg_tensor *t, FILE *out) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_graph_dot", t, 0);
    if (!out) return tg_error("tg_graph_dot: output FILE is NULL");
    char buf[128];
    fprintf(out, "digraph tapegrad {\n  node [fontname=\"monospace\"];\n");
    fprintf(out, "  out [shape=doubleoctagon, label=\"output\\n%s\"];\n", tg_shape_str(t->shape, buf, sizeof buf));
    if (!t->grad_fn) {
        fprintf(out, "}\n");
        return TG_OK;
    }
    tg_node_map seen = {0};
    tg_node **stack = malloc(sizeof *stack * 64);
    long count = 0, capacity = 64;
    tg_tensor **leaves = malloc(sizeof *leaves * 16);
    long num_leaves = 0, leaf_capacity = 16;
    stack[count++] = t->grad_fn;
    tg_node_map_add(&seen, t->grad_fn, 0);
    fprintf(out, "  n%llu -> out;\n", (unsigned long long)t->grad_fn->sequence_nr);
    while (count > 0) {
        tg_node *n = stack[--count];
        fprintf(out, "  n%llu [shape=box, label=\"%s #%llu\\n%s\"];\n", (unsigned long long)n->sequence_nr, n->fn->name,
                (unsigned long long)n->sequence_nr, tg_shape_str(n->output_meta[0].shape, buf, sizeof buf));
        for (int i = 0; i < n->num_inputs; i++) {
            tg_edge *e = &n->edges[i];
            if (e->leaf) {
                /* Leaves are numbered in the order the walk meets them, so the output is
                 * the same on every run. */
                long id = 0;
                while (id < num_leaves && leaves[id] != e->leaf) id++;
                if (id == num_leaves) {
                    if (num_leaves == leaf_capacity)
                        leaves = realloc(leaves, sizeof *leaves * (size_t)(leaf_capacity *= 2));
                    leaves[num_leaves++] = e->leaf;
                    fprintf(out, "  leaf%ld [shape=ellipse, label=\"leaf %s\\nrequires_grad\"];\n", id,
                            tg_shape_str(e->leaf->shape, buf, sizeof buf));
                }
                fprintf(out, "  leaf%ld -> n%llu;\n", id, (unsigned long long)n->sequence_nr);
            } else if (e->node) {
                fprintf(out, "  n%llu -> n%llu;\n", (unsigned long long)e->node->sequence_nr,
                        (unsigned long long)n->sequence_nr);
                if (tg_node_map_add(&seen, e->node, 0)) {
                    if (count == capacity) stack = realloc(stack, sizeof *stack * (size_t)(capacity *= 2));
                    stack[count++] = e->node;
                }
            }
        }
    }
    free(stack);
    free(leaves);
    tg_node_map_free(&seen);
    fprintf(out, "}\n");
    return TG_OK;
}
