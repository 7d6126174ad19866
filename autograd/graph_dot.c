/* tg_graph_dot: the graph behind a tensor in Graphviz DOT. */
#include <stdlib.h>

#include "autograd/grad.h"
#include "autograd/node.h"

extern uint64_t tg_engine_next_mark(void);

tg_status tg_graph_dot(tg_tensor *t, FILE *out) {
    if (!t) return tg_error_null_input("tg_graph_dot", 0);
    if (!out) return tg_error("tg_graph_dot: output FILE is NULL");
    char buf[128];
    fprintf(out, "digraph tapegrad {\n  node [fontname=\"monospace\"];\n");
    fprintf(out, "  out [shape=doubleoctagon, label=\"output\\n%s\"];\n", tg_shape_str(t->shape, buf, sizeof buf));
    if (!t->grad_fn) {
        fprintf(out, "}\n");
        return TG_OK;
    }
    uint64_t mark = tg_engine_next_mark();
    tg_node **stack = malloc(sizeof *stack * 64);
    long count = 0, capacity = 64;
    stack[count++] = t->grad_fn;
    t->grad_fn->visit_mark = mark;
    fprintf(out, "  n%p -> out;\n", (void *)t->grad_fn);
    while (count > 0) {
        tg_node *n = stack[--count];
        fprintf(out, "  n%p [shape=box, label=\"%s #%llu\\n%s\"];\n", (void *)n, n->fn->name,
                (unsigned long long)n->sequence_nr, tg_shape_str(n->output_meta[0].shape, buf, sizeof buf));
        for (int i = 0; i < n->num_inputs; i++) {
            tg_edge *e = &n->edges[i];
            if (e->leaf) {
                fprintf(out, "  t%p [shape=ellipse, label=\"leaf %s\\nrequires_grad\"];\n", (void *)e->leaf,
                        tg_shape_str(e->leaf->shape, buf, sizeof buf));
                fprintf(out, "  t%p -> n%p;\n", (void *)e->leaf, (void *)n);
            } else if (e->node) {
                fprintf(out, "  n%p -> n%p;\n", (void *)e->node, (void *)n);
                if (e->node->visit_mark != mark) {
                    e->node->visit_mark = mark;
                    if (count == capacity) stack = realloc(stack, sizeof *stack * (size_t)(capacity *= 2));
                    stack[count++] = e->node;
                }
            }
        }
    }
    free(stack);
    fprintf(out, "}\n");
    return TG_OK;
}
