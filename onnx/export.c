/* tg_onnx_export: records a model's forward through the op observer
 * (autograd/function.h), writes each op with its mapping (onnx/graph.h) and
 * serialises the graph with protobuf-c's messages for onnx.proto. */
#include "onnx/export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/grad_mode.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "io/atomic_file.h"
#include "onnx/graph_impl.h"
#include "ops/random.h"
#include "ops/shape.h"
#include "third_party/onnx/onnx.pb-c.h"

#define OP "tg_onnx_export"
#define DEFAULT_OPSET 17
#define MIN_OPSET 13
#define IR_VERSION 8 /* ONNX 1.12's; opsets 13-17 are valid under it */

/* A tensor the recorder has seen, and its ONNX value name (owned by the graph). */
typedef struct {
    tg_tensor *tensor; /* retained until the export ends, so no address is reused */
    const char *name;
} known_value;

/* A module of the model, for naming where an op sits. */
typedef struct {
    tg_module *module;
    char *path;  /* "features.3", "" for the model itself */
    char *where; /* "features.3 (Conv2d)" */
    bool was_training;
    tg_hook_handle pre, post;
} module_entry;

typedef struct {
    tg_onnx_graph graph;
    known_value *values;
    int num_values, cap_values;
    const tg_named_tensor *state; /* parameters and buffers, for initializer names */
    int num_state;
    module_entry *modules;
    int num_modules, cap_modules;
    int stack[64]; /* modules whose forward is running, innermost last */
    int depth;
    tg_status failed; /* the first error; later ops are not recorded */
} recorder;

/* ---------------- values ---------------- */

static const char *value_name(recorder *r, const tg_tensor *t) {
    for (int i = r->num_values - 1; i >= 0; i--)
        if (r->values[i].tensor == t) return r->values[i].name;
    return NULL;
}

static void remember(recorder *r, tg_tensor *t, const char *name) {
    if (r->num_values == r->cap_values) {
        r->cap_values = r->cap_values ? 2 * r->cap_values : 64;
        r->values = realloc(r->values, (size_t)r->cap_values * sizeof *r->values);
        TG_ASSERT(r->values != NULL);
    }
    r->values[r->num_values++] = (known_value){tg_retain(t), name};
}

static bool same_view(const tg_tensor *a, const tg_tensor *b) {
    if (a->storage != b->storage || a->offset != b->offset || a->dtype != b->dtype ||
        !tg_shape_equal(a->shape, b->shape))
        return false;
    for (int d = 0; d < a->shape.ndim; d++)
        if (a->shape.dims[d] > 1 && a->strides[d] != b->strides[d]) return false;
    return true;
}

static const char *add_initializer(recorder *r, const char *name, tg_tensor *t) {
    const char *kept = NULL;
    TG_SCOPE {
        tg_tensor *c = tg_contiguous(tg_tensor_to(t, TG_CPU));
        if (c)
            kept = tg_onnx_graph_add_initializer(&r->graph, name, c->dtype, c->shape, tg_data_ptr(c),
                                                 (size_t)tg_numel(c) * tg_dtype_size(c->dtype));
    }
    return kept;
}

/* The value name of an op's input: a value seen before (or the same view of one, as
 * tg_detach makes), a parameter or buffer (an initializer with its state-dict name),
 * else a constant made inside the forward (an initializer holding its values). A view
 * of a seen value made without a recorded op cannot be written: refused. */
static const char *input_value(recorder *r, tg_onnx_op *op, int i) {
    tg_tensor *t = op->inputs[i];
    const char *name = value_name(r, t);
    if (name) return name;
    for (int v = 0; v < r->num_values; v++) {
        if (same_view(r->values[v].tensor, t)) return r->values[v].name;
    }
    for (int s = 0; s < r->num_state; s++) {
        if (r->state[s].tensor != t && !same_view(r->state[s].tensor, t)) continue;
        name = add_initializer(r, r->state[s].name, t);
        if (name) remember(r, t, name);
        return name;
    }
    for (int v = 0; v < r->num_values; v++) {
        if (r->values[v].tensor->storage == t->storage) {
            char msg[256];
            snprintf(msg, sizeof msg, "input %d is a view of value %s made by no recorded op", i, r->values[v].name);
            return tg_onnx_unsupported(op, msg), NULL;
        }
    }
    char *fresh = tg_onnx_graph_fresh_name(&r->graph, "const");
    name = add_initializer(r, fresh, t);
    free(fresh);
    if (name) remember(r, t, name);
    return name;
}

/* ---------------- the recorder ---------------- */

static void record_op_observed(recorder *r, const tg_function *fn, tg_tensor *const *inputs, const void *args,
                               tg_tensor *const *outputs, int num_outputs);

/* The observer: what a mapping or an initializer's copy applies is no op of the model. */
static void record_op(void *user, const tg_function *fn, tg_tensor *const *inputs, const void *args, size_t size,
                      tg_tensor *const *outputs, int num_outputs) {
    tg_op_observer self = tg_set_op_observer((tg_op_observer){0});
    record_op_observed(user, fn, inputs, args, outputs, num_outputs);
    tg_set_op_observer(self);
}

static void record_op_observed(recorder *r, const tg_function *fn, tg_tensor *const *inputs, const void *args,
                               tg_tensor *const *outputs, int num_outputs) {
    if (r->failed) return;
    const module_entry *m = &r->modules[r->depth ? r->stack[r->depth - 1] : 0];
    char scope[160];
    snprintf(scope, sizeof scope, "/%s", m->path);
    tg_onnx_op op = {.graph = &r->graph,
                     .fn = fn,
                     .inputs = inputs,
                     .outputs = outputs,
                     .num_inputs = fn->num_inputs,
                     .num_outputs = num_outputs,
                     .attrs = args,
                     .module = m->where,
                     .scope = scope};
    if (!fn->onnx) {
        r->failed = tg_onnx_unsupported(&op, "no ONNX mapping (the .onnx of its tg_function)");
        return;
    }
    for (int i = 0; i < op.num_inputs; i++) {
        if (!(op.input_names[i] = input_value(r, &op, i))) {
            r->failed = TG_ERROR;
            return;
        }
    }
    for (int i = 0; i < num_outputs; i++) {
        op.output_names[i] = tg_onnx_graph_intern(&r->graph, tg_onnx_graph_fresh_name(&r->graph, fn->name));
        remember(r, outputs[i], op.output_names[i]);
    }
    if (fn->onnx(&op)) r->failed = TG_ERROR;
}

static tg_status enter_module(tg_module *m, tg_tensor **input, void *user) {
    recorder *r = user;
    for (int i = 0; i < r->num_modules; i++) {
        if (r->modules[i].module != m) continue;
        if (r->depth < (int)(sizeof r->stack / sizeof r->stack[0])) r->stack[r->depth] = i;
        r->depth++;
        break;
    }
    return TG_OK;
}

static tg_status leave_module(tg_module *m, tg_tensor *input, tg_tensor **output, void *user) {
    recorder *r = user;
    if (r->depth > 0) r->depth--;
    return TG_OK;
}

/* Lists the model's modules with their dotted paths, parents first. */
static void add_modules(recorder *r, tg_module *m, const char *path) {
    if (r->num_modules == r->cap_modules) {
        r->cap_modules = r->cap_modules ? 2 * r->cap_modules : 16;
        r->modules = realloc(r->modules, (size_t)r->cap_modules * sizeof *r->modules);
        TG_ASSERT(r->modules != NULL);
    }
    char where[200];
    if (*path) snprintf(where, sizeof where, "%s (%s)", path, tg_module_type_of(m)->name);
    else snprintf(where, sizeof where, "the model (%s)", tg_module_type_of(m)->name);
    r->modules[r->num_modules++] = (module_entry){
        .module = m, .path = tg_onnx_strdup(path), .where = tg_onnx_strdup(where), .was_training = tg_is_training(m)};
    for (int i = 0, n = tg_module_num_children(m); i < n; i++) {
        const char *name;
        tg_module *child = tg_module_child_at(m, i, &name);
        char child_path[160];
        snprintf(child_path, sizeof child_path, "%s%s%s", path, *path ? "." : "", name);
        add_modules(r, child, child_path);
    }
}

static void recorder_free(recorder *r) {
    for (int i = 0; i < r->num_values; i++) tg_release(r->values[i].tensor);
    free(r->values);
    for (int i = 0; i < r->num_modules; i++) {
        free(r->modules[i].path);
        free(r->modules[i].where);
    }
    free(r->modules);
    tg_onnx_graph_free(&r->graph);
}

/* Runs the model's forward in evaluation mode with every op recorded; the output's
 * value is named `output_name`. Restores each module's training mode. */
static tg_status trace(recorder *r, tg_module *model, tg_tensor *x, const char *input_name, const char *output_name) {
    add_modules(r, model, "");
    for (int i = 0; i < r->num_modules; i++) {
        r->modules[i].pre = tg_register_forward_pre_hook(r->modules[i].module, enter_module, r);
        r->modules[i].post = tg_register_forward_hook(r->modules[i].module, leave_module, r);
    }
    r->state = tg_state_dict(model, &r->num_state);
    remember(r, x, input_name);

    tg_train(model, false);
    bool grad_was = tg_set_grad_enabled(false);
    tg_op_observer previous = tg_set_op_observer((tg_op_observer){record_op, r});
    tg_tensor *y = tg_forward(model, x);
    tg_set_op_observer(previous);
    tg_set_grad_enabled(grad_was);
    for (int i = 0; i < r->num_modules; i++) { /* parents first: a child's own mode wins */
        tg_hook_remove(r->modules[i].pre);
        tg_hook_remove(r->modules[i].post);
        tg_train(r->modules[i].module, r->modules[i].was_training);
    }
    if (!y) return TG_ERROR;
    tg_status status = r->failed;
    const char *name = status ? NULL : value_name(r, y);
    if (!status && !name) status = tg_error(OP ": the model's output was made by no recorded op");
    if (!status) {
        bool made_by_node = false;
        for (int i = 0; i < r->graph.num_nodes && !made_by_node; i++)
            for (int o = 0; o < r->graph.nodes[i]->num_outputs; o++)
                made_by_node |= strcmp(r->graph.nodes[i]->outputs[o], name) == 0;
        if (made_by_node) {
            tg_onnx_graph_rename(&r->graph, name, output_name);
        } else { /* the input or a constant itself */
            tg_onnx_op op = {.graph = &r->graph, .fn = &(tg_function){.name = "output"}, .scope = ""};
            tg_onnx_add_node(&op, "Identity", 1, &name, 1, &output_name);
        }
    }
    if (!status) remember(r, y, output_name);
    return status;
}

/* ---------------- checks and pruning ---------------- */

static bool in_names(char *const *names, int count, const char *name) {
    for (int i = 0; i < count; i++)
        if (strcmp(names[i], name) == 0) return true;
    return false;
}

static bool same_attr(const tg_onnx_attr *a, const tg_onnx_attr *b) {
    return !strcmp(a->name, b->name) && a->kind == b->kind && a->i == b->i && a->f == b->f && a->count == b->count &&
           (!a->count || !memcmp(a->ints, b->ints, (size_t)a->count * sizeof *a->ints)) && (!a->s) == (!b->s) &&
           (!a->s || !strcmp(a->s, b->s));
}

static bool same_node(const tg_onnx_node *a, const tg_onnx_node *b) {
    bool same = !strcmp(a->op_type, b->op_type) && a->num_inputs == b->num_inputs && a->num_outputs == b->num_outputs &&
                a->num_attrs == b->num_attrs;
    for (int i = 0; same && i < a->num_inputs; i++) same = !strcmp(a->inputs[i], b->inputs[i]);
    for (int i = 0; same && i < a->num_outputs; i++) same = !strcmp(a->outputs[i], b->outputs[i]);
    for (int i = 0; same && i < a->num_attrs; i++) same = same_attr(&a->attrs[i], &b->attrs[i]);
    return same;
}

static const tg_onnx_node *first_reader(const tg_onnx_graph *g, const char *value) {
    for (int i = 0; i < g->num_nodes; i++)
        if (in_names(g->nodes[i]->inputs, g->nodes[i]->num_inputs, value)) return g->nodes[i];
    return NULL;
}

/* The graphs recorded at batch n and n + 1 must be the same, constants included: one
 * that differs is a size or a random draw the forward took from outside its recorded
 * ops (tg_randn_like's noise, a tensor made with the input's batch size), which the
 * file would hold fixed at the example's. */
static tg_status check_batch_free(const tg_onnx_graph *a, const tg_onnx_graph *b, int64_t n) {
    const char *hint = "the forward makes it from outside its recorded ops (a random draw, a size taken from the "
                       "input); export with .static_batch = true to fix the batch at the example's";
    for (int i = 0; i < a->num_nodes && i < b->num_nodes; i++)
        if (!same_node(a->nodes[i], b->nodes[i]))
            return tg_error(OP ": node %s (%s) differs between batch %lld and %lld: %s", a->nodes[i]->name,
                            a->nodes[i]->op_type, (long long)n, (long long)n + 1, hint);
    if (a->num_nodes != b->num_nodes)
        return tg_error(OP ": %d nodes at batch %lld, %d at batch %lld: %s", a->num_nodes, (long long)n, b->num_nodes,
                        (long long)n + 1, hint);
    for (int i = 0; i < a->num_inits && i < b->num_inits; i++) {
        const tg_onnx_initializer *x = &a->inits[i], *y = &b->inits[i];
        if (!strcmp(x->name, y->name) && x->dtype == y->dtype && tg_shape_equal(x->shape, y->shape) &&
            x->bytes == y->bytes && !memcmp(x->data, y->data, x->bytes))
            continue;
        const tg_onnx_node *reader = first_reader(a, x->name);
        return tg_error(OP ": constant %s%s%s%s differs between batch %lld and %lld: %s", x->name,
                        reader ? " (read by " : "", reader ? reader->name : "", reader ? ")" : "", (long long)n,
                        (long long)n + 1, hint);
    }
    return TG_OK;
}

static bool is_initializer(const tg_onnx_graph *g, const char *name) {
    for (int i = 0; i < g->num_inits; i++)
        if (strcmp(g->inits[i].name, name) == 0) return true;
    return false;
}

/* Every node's inputs are made before it (or are the input or initializers): a
 * mapping that left out an output another op reads is caught here. */
static tg_status check_order(const tg_onnx_graph *g, const char *input_name) {
    for (int i = 0; i < g->num_nodes; i++) {
        const tg_onnx_node *n = g->nodes[i];
        for (int k = 0; k < n->num_inputs; k++) {
            const char *v = n->inputs[k];
            if (!*v || strcmp(v, input_name) == 0 || is_initializer(g, v)) continue;
            bool made = false;
            for (int j = 0; j < i && !made; j++) made = in_names(g->nodes[j]->outputs, g->nodes[j]->num_outputs, v);
            if (!made)
                return tg_error(OP ": node %s (%s) reads value %s, which no mapping wrote", n->name, n->op_type, v);
        }
    }
    return TG_OK;
}

/* Drops the nodes and initializers the output does not depend on (what an eval-mode
 * forward computed and discarded), as torch.onnx.export's dead-code elimination. */
static void prune(tg_onnx_graph *g, const char *output_name) {
    bool *keep = calloc((size_t)g->num_nodes + 1, sizeof *keep);
    TG_ASSERT(keep != NULL);
    for (int i = g->num_nodes - 1; i >= 0; i--) {
        const tg_onnx_node *n = g->nodes[i];
        for (int o = 0; o < n->num_outputs && !keep[i]; o++) {
            keep[i] = strcmp(n->outputs[o], output_name) == 0;
            for (int j = i + 1; j < g->num_nodes && !keep[i]; j++)
                keep[i] = keep[j] && in_names(g->nodes[j]->inputs, g->nodes[j]->num_inputs, n->outputs[o]);
        }
    }
    int kept = 0;
    for (int i = 0; i < g->num_nodes; i++) {
        if (keep[i]) g->nodes[kept++] = g->nodes[i];
        else tg_onnx_node_free(g->nodes[i]);
    }
    g->num_nodes = kept;
    kept = 0;
    for (int i = 0; i < g->num_inits; i++) {
        bool used = false;
        for (int j = 0; j < g->num_nodes && !used; j++)
            used = in_names(g->nodes[j]->inputs, g->nodes[j]->num_inputs, g->inits[i].name);
        if (used) g->inits[kept++] = g->inits[i];
        else tg_onnx_initializer_free(&g->inits[i]);
    }
    g->num_inits = kept;
    free(keep);
}

/* ---------------- protobuf ---------------- */

/* The messages are allocated here and freed together; strings and data are the graph's. */
typedef struct {
    void **blocks;
    int count, cap;
} arena;

static void *arena_alloc(arena *a, size_t size) {
    if (a->count == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 256;
        a->blocks = realloc(a->blocks, (size_t)a->cap * sizeof *a->blocks);
        TG_ASSERT(a->blocks != NULL);
    }
    void *p = calloc(1, size ? size : 1);
    TG_ASSERT(p != NULL);
    return a->blocks[a->count++] = p;
}

static void arena_free(arena *a) {
    for (int i = 0; i < a->count; i++) free(a->blocks[i]);
    free(a->blocks);
}

static Onnx__TensorProto *tensor_proto(arena *a, const tg_onnx_initializer *init) {
    Onnx__TensorProto *t = arena_alloc(a, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = init->name;
    t->has_data_type = true;
    t->data_type = init->onnx_type ? init->onnx_type : tg_onnx_dtype(init->dtype);
    t->n_dims = (size_t)init->shape.ndim;
    t->dims = arena_alloc(a, t->n_dims * sizeof *t->dims);
    for (int d = 0; d < init->shape.ndim; d++) t->dims[d] = init->shape.dims[d];
    t->has_raw_data = true; /* x86-64 and CUDA hosts are little-endian, as raw_data is */
    t->raw_data = (ProtobufCBinaryData){.len = init->bytes, .data = init->data};
    return t;
}

static Onnx__AttributeProto *attribute_proto(arena *a, const tg_onnx_attr *attr) {
    Onnx__AttributeProto *p = arena_alloc(a, sizeof *p);
    onnx__attribute_proto__init(p);
    p->name = attr->name;
    p->has_type = true;
    switch (attr->kind) {
    case TG_ONNX_ATTR_INT:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        p->has_i = true, p->i = attr->i;
        break;
    case TG_ONNX_ATTR_FLOAT:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        p->has_f = true, p->f = attr->f;
        break;
    case TG_ONNX_ATTR_INTS:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        p->n_ints = (size_t)attr->count, p->ints = attr->ints;
        break;
    case TG_ONNX_ATTR_STRING:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
        p->has_s = true, p->s = (ProtobufCBinaryData){.len = strlen(attr->s), .data = (uint8_t *)attr->s};
        break;
    }
    return p;
}

static Onnx__NodeProto *node_proto(arena *a, const tg_onnx_node *n) {
    Onnx__NodeProto *p = arena_alloc(a, sizeof *p);
    onnx__node_proto__init(p);
    p->name = n->name;
    p->op_type = n->op_type;
    p->n_input = (size_t)n->num_inputs, p->input = n->inputs;
    p->n_output = (size_t)n->num_outputs, p->output = n->outputs;
    p->n_attribute = (size_t)n->num_attrs;
    p->attribute = arena_alloc(a, p->n_attribute * sizeof *p->attribute);
    for (int i = 0; i < n->num_attrs; i++) p->attribute[i] = attribute_proto(a, &n->attrs[i]);
    return p;
}

/* A graph input or output: dtype and shape, dim 0 named "batch" unless static. */
static Onnx__ValueInfoProto *value_info(arena *a, char *name, const tg_tensor *t, bool static_batch) {
    Onnx__ValueInfoProto *v = arena_alloc(a, sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = name;
    Onnx__TypeProto *type = arena_alloc(a, sizeof *type);
    onnx__type_proto__init(type);
    Onnx__TypeProto__Tensor *tensor = arena_alloc(a, sizeof *tensor);
    onnx__type_proto__tensor__init(tensor);
    Onnx__TensorShapeProto *shape = arena_alloc(a, sizeof *shape);
    onnx__tensor_shape_proto__init(shape);
    shape->n_dim = (size_t)t->shape.ndim;
    shape->dim = arena_alloc(a, shape->n_dim * sizeof *shape->dim);
    for (int d = 0; d < t->shape.ndim; d++) {
        Onnx__TensorShapeProto__Dimension *dim = arena_alloc(a, sizeof *dim);
        onnx__tensor_shape_proto__dimension__init(dim);
        if (d == 0 && !static_batch) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim->dim_param = "batch";
        } else {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = t->shape.dims[d];
        }
        shape->dim[d] = dim;
    }
    tensor->has_elem_type = true;
    tensor->elem_type = tg_onnx_dtype(t->dtype);
    tensor->shape = shape;
    type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type->tensor_type = tensor;
    v->type = type;
    return v;
}

/* The model as bytes (malloc'ed, *size set), or NULL. */
static uint8_t *serialise(const recorder *r, tg_tensor *x, tg_tensor *y, char *input_name, char *output_name,
                          const tg_onnx_opts *o, size_t *size) {
    arena a = {0};
    const tg_onnx_graph *g = &r->graph;
    Onnx__GraphProto *graph = arena_alloc(&a, sizeof *graph);
    onnx__graph_proto__init(graph);
    graph->name = "tapegrad";
    graph->n_node = (size_t)g->num_nodes;
    graph->node = arena_alloc(&a, graph->n_node * sizeof *graph->node);
    for (int i = 0; i < g->num_nodes; i++) graph->node[i] = node_proto(&a, g->nodes[i]);
    graph->n_initializer = (size_t)g->num_inits;
    graph->initializer = arena_alloc(&a, graph->n_initializer * sizeof *graph->initializer);
    for (int i = 0; i < g->num_inits; i++) graph->initializer[i] = tensor_proto(&a, &g->inits[i]);
    graph->n_input = graph->n_output = 1;
    graph->input = arena_alloc(&a, sizeof *graph->input);
    graph->output = arena_alloc(&a, sizeof *graph->output);
    graph->input[0] = value_info(&a, input_name, x, o->static_batch);
    graph->output[0] = value_info(&a, output_name, y, o->static_batch);

    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    opset.domain = "";
    opset.has_version = true;
    opset.version = o->opset;
    Onnx__OperatorSetIdProto *opsets[] = {&opset};
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    model.has_ir_version = true;
    model.ir_version = IR_VERSION;
    model.n_opset_import = 1;
    model.opset_import = opsets;
    model.producer_name = "tapegrad";
    model.producer_version = "0.1";
    model.graph = graph;
    *size = onnx__model_proto__get_packed_size(&model);
    uint8_t *bytes = malloc(*size ? *size : 1);
    if (bytes) onnx__model_proto__pack(&model, bytes);
    else tg_error(OP ": out of memory for a %zu-byte model", *size);
    arena_free(&a);
    return bytes;
}

/* ---------------- the API ---------------- */

tg_status tg_onnx_export(tg_module *model, tg_tensor *example_input, const char *path, const tg_onnx_opts *opts) {
    if (!model) return tg_error(OP ": model is NULL");
    if (tg_unusable_(example_input)) return tg_error_unusable_input(OP, example_input, 1);
    if (!path || !*path) return tg_error(OP ": path is %s", path ? "empty" : "NULL");
    tg_onnx_opts o = opts ? *opts : (tg_onnx_opts){0};
    if (!o.opset) o.opset = DEFAULT_OPSET;
    if (o.opset < MIN_OPSET || o.opset > DEFAULT_OPSET)
        return tg_error(OP ": opset %d is not supported (%d to %d)", o.opset, MIN_OPSET, DEFAULT_OPSET);
    char *input_name = tg_onnx_strdup(o.input_name ? o.input_name : "input");
    char *output_name = tg_onnx_strdup(o.output_name ? o.output_name : "output");
    if (strcmp(input_name, output_name) == 0) {
        tg_status s = tg_error(OP ": the input and the output are both named \"%s\"", input_name);
        free(input_name), free(output_name);
        return s;
    }
    recorder r = {.graph = {.opset = o.opset}};
    tg_scope_begin();                    /* the forward's tensors; the recorder retains what it needs */
    tg_tensor *rng = tg_get_rng_state(); /* the forward may draw: the caller's stream is left as it was */
    tg_status status = rng ? trace(&r, model, example_input, input_name, output_name) : TG_ERROR;
    if (!status) status = check_order(&r.graph, input_name);
    bool batched = example_input->shape.ndim > 0 && example_input->shape.dims[0] > 0;
    if (!status && !o.static_batch && batched) { /* the same forward at one more row */
        recorder again = {.graph = {.opset = o.opset}};
        tg_tensor *x = tg_cat((tg_tensor *[]){example_input, tg_narrow(example_input, 0, 0, 1)}, 2, 0);
        status = x && !tg_set_rng_state(rng) ? trace(&again, model, x, input_name, output_name) : TG_ERROR;
        if (!status) status = check_batch_free(&r.graph, &again.graph, example_input->shape.dims[0]);
        recorder_free(&again);
    }
    if (rng && tg_set_rng_state(rng)) status = TG_ERROR;
    if (!status) {
        prune(&r.graph, output_name);
        size_t size;
        tg_tensor *y = r.values[r.num_values - 1].tensor;
        uint8_t *bytes = serialise(&r, example_input, y, input_name, output_name, &o, &size);
        status = bytes ? tg_write_file_atomic(OP, path, bytes, size) : TG_ERROR;
        free(bytes);
    }
    recorder_free(&r);
    tg_scope_end();
    free(input_name);
    free(output_name);
    return status;
}
