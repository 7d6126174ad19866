/* The ONNX graph being built, for onnx/graph.c and onnx/export.c only: plain C
 * records of nodes and constants that export.c turns into protobuf messages. Every
 * string and array here is owned by the graph (tg_onnx_graph_free). */
#ifndef TG_ONNX_GRAPH_IMPL_H
#define TG_ONNX_GRAPH_IMPL_H

#include <stddef.h>

#include "onnx/graph.h"

typedef enum { TG_ONNX_ATTR_INT, TG_ONNX_ATTR_FLOAT, TG_ONNX_ATTR_INTS, TG_ONNX_ATTR_STRING } tg_onnx_attr_kind;

typedef struct {
    char *name;
    tg_onnx_attr_kind kind;
    int64_t i;
    float f;
    int64_t *ints;
    int count;
    char *s;
} tg_onnx_attr;

struct tg_onnx_node {
    char *op_type, *name;
    char **inputs, **outputs;
    int num_inputs, num_outputs;
    tg_onnx_attr *attrs;
    int num_attrs;
};

/* A graph initializer: a parameter, a buffer or a constant. */
typedef struct {
    char *name;
    tg_dtype dtype;
    tg_shape shape;
    void *data; /* little-endian elements, contiguous */
    size_t bytes;
    int onnx_type; /* TensorProto.DataType when dtype has no ONNX twin (int8); 0: dtype's */
} tg_onnx_initializer;

typedef struct {
    tg_onnx_node **nodes;
    int num_nodes, cap_nodes;
    tg_onnx_initializer *inits;
    int num_inits, cap_inits;
    char **strings; /* value names handed to mappings */
    int num_strings, cap_strings;
    long next_value; /* for fresh value names */
    int opset;
} tg_onnx_graph;

struct tg_onnx_op {
    tg_onnx_graph *graph;
    const tg_function *fn;
    tg_tensor *const *inputs, *const *outputs;
    const char *input_names[TG_MAX_OP_INPUTS], *output_names[TG_MAX_OP_OUTPUTS];
    int num_inputs, num_outputs;
    const void *attrs;
    const char *module; /* "features.3 (Conv2d)", or "the model" at the top */
    const char *scope;  /* node-name prefix: "/features.3" */
};

/* Adds an initializer holding `bytes` of `data` (copied); returns its name (owned). */
const char *tg_onnx_graph_add_initializer(tg_onnx_graph *g, const char *name, tg_dtype dtype, tg_shape shape,
                                          const void *data, size_t bytes);
/* A name no other value has: prefix + a counter. */
char *tg_onnx_graph_fresh_name(tg_onnx_graph *g, const char *prefix);
/* Keeps `owned` (a malloc'ed name) until the graph is freed; returns it. */
const char *tg_onnx_graph_intern(tg_onnx_graph *g, char *owned);
/* Renames every use of value `from` to `to` (the graph output's name). */
void tg_onnx_graph_rename(tg_onnx_graph *g, const char *from, const char *to);
void tg_onnx_graph_free(tg_onnx_graph *g);
/* One node or initializer's own memory (prune drops them one by one). */
void tg_onnx_node_free(tg_onnx_node *n);
void tg_onnx_initializer_free(tg_onnx_initializer *init);
/* strdup that aborts on exhaustion, as the graph's other small allocations. */
char *tg_onnx_strdup(const char *s);

#endif
