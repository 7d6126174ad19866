/* The ONNX graph builder behind the op mappings (onnx/graph.h). */
#include "onnx/graph_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/shape.h"

/* Grows *array (of `size`-byte items) to hold one more; aborts on exhaustion, as the
 * graph is small next to the model it describes. */
static void *grow(void *array, int *cap, int count, size_t size) {
    if (count < *cap) return array;
    *cap = *cap ? *cap * 2 : 16;
    void *bigger = realloc(array, (size_t)*cap * size);
    TG_ASSERT(bigger != NULL);
    return bigger;
}

char *tg_onnx_strdup(const char *s) {
    char *copy = strdup(s);
    TG_ASSERT(copy != NULL);
    return copy;
}

char *tg_onnx_graph_fresh_name(tg_onnx_graph *g, const char *prefix) {
    char buf[160];
    snprintf(buf, sizeof buf, "%s_%ld", prefix, g->next_value++);
    return tg_onnx_strdup(buf);
}

const char *tg_onnx_graph_add_initializer(tg_onnx_graph *g, const char *name, tg_dtype dtype, tg_shape shape,
                                          const void *data, size_t bytes) {
    g->inits = grow(g->inits, &g->cap_inits, g->num_inits, sizeof *g->inits);
    tg_onnx_initializer *init = &g->inits[g->num_inits++];
    *init = (tg_onnx_initializer){.name = tg_onnx_strdup(name), .dtype = dtype, .shape = shape, .bytes = bytes};
    init->data = malloc(bytes ? bytes : 1);
    TG_ASSERT(init->data != NULL);
    if (bytes) memcpy(init->data, data, bytes);
    return init->name;
}

static void rename_all(char **names, int count, const char *from, const char *to) {
    for (int i = 0; i < count; i++) {
        if (strcmp(names[i], from) != 0) continue;
        free(names[i]);
        names[i] = tg_onnx_strdup(to);
    }
}

void tg_onnx_graph_rename(tg_onnx_graph *g, const char *from, const char *to) {
    char *old = tg_onnx_strdup(from); /* `from` may be one of the names replaced */
    for (int i = 0; i < g->num_nodes; i++) {
        rename_all(g->nodes[i]->inputs, g->nodes[i]->num_inputs, old, to);
        rename_all(g->nodes[i]->outputs, g->nodes[i]->num_outputs, old, to);
    }
    free(old);
}

static void free_names(char **names, int count) {
    for (int i = 0; i < count; i++) free(names[i]);
    free(names);
}

void tg_onnx_node_free(tg_onnx_node *n) {
    free_names(n->inputs, n->num_inputs);
    free_names(n->outputs, n->num_outputs);
    for (int a = 0; a < n->num_attrs; a++) {
        free(n->attrs[a].name);
        free(n->attrs[a].ints);
        free(n->attrs[a].s);
    }
    free(n->attrs);
    free(n->op_type);
    free(n->name);
    free(n);
}

void tg_onnx_initializer_free(tg_onnx_initializer *init) {
    free(init->name);
    free(init->data);
}

void tg_onnx_graph_free(tg_onnx_graph *g) {
    for (int i = 0; i < g->num_nodes; i++) tg_onnx_node_free(g->nodes[i]);
    free(g->nodes);
    for (int i = 0; i < g->num_inits; i++) tg_onnx_initializer_free(&g->inits[i]);
    free(g->inits);
    free_names(g->strings, g->num_strings);
    *g = (tg_onnx_graph){0};
}

/* ---- the recorded call ---- */

int tg_onnx_num_inputs(const tg_onnx_op *op) { return op->num_inputs; }
int tg_onnx_num_outputs(const tg_onnx_op *op) { return op->num_outputs; }
tg_tensor *tg_onnx_input(const tg_onnx_op *op, int i) { return op->inputs[i]; }
tg_tensor *tg_onnx_output(const tg_onnx_op *op, int i) { return op->outputs[i]; }
const char *tg_onnx_input_name(const tg_onnx_op *op, int i) { return op->input_names[i]; }
const char *tg_onnx_output_name(const tg_onnx_op *op, int i) { return op->output_names[i]; }
const void *tg_onnx_attrs(const tg_onnx_op *op) { return op->attrs; }
int tg_onnx_opset(const tg_onnx_op *op) { return op->graph->opset; }
const tg_function *tg_onnx_function(const tg_onnx_op *op) { return op->fn; }

int tg_onnx_dtype(tg_dtype dtype) { /* onnx.proto's TensorProto.DataType */
    switch (dtype) {
    case TG_FLOAT32: return 1;
    case TG_UINT8: return 2;
    case TG_INT32: return 6;
    case TG_INT64: return 7;
    case TG_BOOL: return 9;
    case TG_FLOAT16: return 10;
    case TG_FLOAT64: return 11;
    case TG_BFLOAT16: return 16;
    default: return 0;
    }
}

/* ---- what the mapping writes ---- */

static char **copy_names(int count, const char *const *names) {
    char **copy = calloc(count ? (size_t)count : 1, sizeof *copy);
    TG_ASSERT(copy != NULL);
    for (int i = 0; i < count; i++) copy[i] = tg_onnx_strdup(names[i]);
    return copy;
}

tg_onnx_node *tg_onnx_add_node(tg_onnx_op *op, const char *op_type, int num_inputs, const char *const *inputs,
                               int num_outputs, const char *const *outputs) {
    tg_onnx_graph *g = op->graph;
    for (int i = 0; i < num_inputs; i++)
        if (!inputs[i])
            return tg_error("tg_onnx_export: %s: input %d of its %s node is missing", op->fn->name, i, op_type), NULL;
    tg_onnx_node *n = calloc(1, sizeof *n);
    TG_ASSERT(n != NULL);
    char name[200];
    snprintf(name, sizeof name, "%s/%s_%d", op->scope, op_type, g->num_nodes);
    *n = (tg_onnx_node){.op_type = tg_onnx_strdup(op_type),
                        .name = tg_onnx_strdup(name),
                        .inputs = copy_names(num_inputs, inputs),
                        .num_inputs = num_inputs,
                        .outputs = copy_names(num_outputs, outputs),
                        .num_outputs = num_outputs};
    g->nodes = grow(g->nodes, &g->cap_nodes, g->num_nodes, sizeof *g->nodes);
    g->nodes[g->num_nodes++] = n;
    return n;
}

tg_onnx_node *tg_onnx_add_node_same(tg_onnx_op *op, const char *op_type) {
    return tg_onnx_add_node(op, op_type, op->num_inputs, op->input_names, op->num_outputs, op->output_names);
}

static tg_onnx_attr *add_attr(tg_onnx_node *n, const char *name, tg_onnx_attr_kind kind) {
    int cap = n->num_attrs; /* attributes are few: grown one at a time */
    n->attrs = realloc(n->attrs, (size_t)(cap + 1) * sizeof *n->attrs);
    TG_ASSERT(n->attrs != NULL);
    tg_onnx_attr *a = &n->attrs[n->num_attrs++];
    *a = (tg_onnx_attr){.name = tg_onnx_strdup(name), .kind = kind};
    return a;
}

void tg_onnx_attr_int(tg_onnx_node *n, const char *name, int64_t value) {
    if (n) add_attr(n, name, TG_ONNX_ATTR_INT)->i = value;
}

void tg_onnx_attr_float(tg_onnx_node *n, const char *name, float value) {
    if (n) add_attr(n, name, TG_ONNX_ATTR_FLOAT)->f = value;
}

void tg_onnx_attr_ints(tg_onnx_node *n, const char *name, const int64_t *values, int count) {
    if (!n) return;
    tg_onnx_attr *a = add_attr(n, name, TG_ONNX_ATTR_INTS);
    a->ints = malloc((count ? (size_t)count : 1) * sizeof *a->ints);
    TG_ASSERT(a->ints != NULL);
    if (count) memcpy(a->ints, values, (size_t)count * sizeof *values);
    a->count = count;
}

void tg_onnx_attr_string(tg_onnx_node *n, const char *name, const char *value) {
    if (n) add_attr(n, name, TG_ONNX_ATTR_STRING)->s = tg_onnx_strdup(value);
}

const char *tg_onnx_graph_intern(tg_onnx_graph *g, char *owned) {
    g->strings = grow(g->strings, &g->cap_strings, g->num_strings, sizeof *g->strings);
    return g->strings[g->num_strings++] = owned;
}

const char *tg_onnx_value(tg_onnx_op *op) {
    return tg_onnx_graph_intern(op->graph, tg_onnx_graph_fresh_name(op->graph, op->fn->name));
}

const char *tg_onnx_const_ints(tg_onnx_op *op, const int64_t *values, int count) {
    char *name = tg_onnx_graph_fresh_name(op->graph, "const");
    const char *kept = tg_onnx_graph_add_initializer(op->graph, name, TG_INT64, TG_SHAPE(count), values,
                                                     (size_t)count * sizeof *values);
    free(name);
    return kept;
}

const char *tg_onnx_const_scalar(tg_onnx_op *op, tg_dtype dtype, double value) {
    const char *name = NULL;
    TG_SCOPE {
        tg_tensor *t = tg_full(TG_SCALAR_SHAPE, value, (tg_opts){.dtype = dtype});
        name = t ? tg_onnx_const_tensor(op, t) : NULL;
    }
    return name;
}

/* The copy runs in a scope of its own (tg_contiguous of a contiguous tensor is a new
 * reference to t itself: releasing it by hand dropped a reference of t's owner, a
 * module's buffer) and unobserved (a copy is no op of the model). */
const char *tg_onnx_const_tensor(tg_onnx_op *op, tg_tensor *t) {
    const char *kept = NULL;
    tg_op_observer observer = tg_set_op_observer((tg_op_observer){0});
    TG_SCOPE {
        tg_tensor *c = tg_contiguous(tg_tensor_to(t, TG_CPU));
        if (!c) break;
        char *name = tg_onnx_graph_fresh_name(op->graph, "const");
        kept = tg_onnx_graph_add_initializer(op->graph, name, c->dtype, c->shape, tg_data_ptr(c),
                                             (size_t)tg_numel(c) * tg_dtype_size(c->dtype));
        free(name);
    }
    tg_set_op_observer(observer);
    return kept;
}

const char *tg_onnx_const_int8(tg_onnx_op *op, tg_shape shape, const int8_t *values) {
    char *name = tg_onnx_graph_fresh_name(op->graph, "const");
    size_t count = (size_t)tg_shape_numel(shape);
    const char *kept = tg_onnx_graph_add_initializer(op->graph, name, TG_UINT8, shape, values, count);
    op->graph->inits[op->graph->num_inits - 1].onnx_type = 3; /* TensorProto.INT8 */
    free(name);
    return kept;
}

const char *tg_onnx_reshape_target(tg_onnx_op *op, int input, tg_shape shape) {
    tg_shape from = op->inputs[input]->shape;
    int64_t dims[TG_MAX_DIMS];
    int d = 0;
    for (; d < shape.ndim && d < from.ndim && shape.dims[d] == from.dims[d] && shape.dims[d] != 0; d++) dims[d] = 0;
    if (d < shape.ndim) dims[d] = -1; /* the first dim that changes holds the batch, whatever it became */
    for (int k = d + 1; k < shape.ndim; k++) dims[k] = shape.dims[k];
    return tg_onnx_const_ints(op, dims, shape.ndim);
}

tg_status tg_onnx_unsupported(tg_onnx_op *op, const char *why) {
    return tg_error("tg_onnx_export: %s in %s: %s", op->fn->name, op->module, why);
}
