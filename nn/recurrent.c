/* RNN, LSTM, GRU and their cells as compositions of ops (torch/nn/modules/rnn.py and
 * ATen's native/RNN.cpp cells, step for step). A sequence layer projects all time
 * steps' inputs at once (x W_ih^T + b_ih over [T, B, I]), then runs the cell's
 * recurrent half one step at a time; the backward direction walks t from T-1 to 0
 * and writes its outputs at their own t. See nn/recurrent.h. */
#include "nn/recurrent.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/scope.h"
#include "onnx/graph.h"
#include "onnx/recording.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/random.h"
#include "ops/shape.h"
#include "ops/slice.h"
#include "core/tensor_impl.h"

typedef enum { KIND_RNN_TANH, KIND_RNN_RELU, KIND_LSTM, KIND_GRU } rnn_kind;

typedef struct {
    rnn_kind kind;
    bool cell;
    int64_t input_size, hidden_size;
    int num_layers, directions;
    bool bias, batch_first;
    double dropout;
    int64_t proj_size; /* LSTM's projection, 0 for none */
} rnn_state;

/* The size of h: proj_size when the LSTM projects, else hidden_size. */
static int64_t h_size(const rnn_state *s) { return s->proj_size > 0 ? s->proj_size : s->hidden_size; }

static int gates_of(rnn_kind kind) { return kind == KIND_LSTM ? 4 : kind == KIND_GRU ? 3 : 1; }

static const char *kind_name(const rnn_state *s) {
    static const char *const seq[] = {"RNN", "RNN", "LSTM", "GRU"};
    static const char *const cells[] = {"RNNCell", "RNNCell", "LSTMCell", "GRUCell"};
    return s->cell ? cells[s->kind] : seq[s->kind];
}

static tg_tensor *chunk(tg_tensor *t, int k, int64_t hidden) {
    return tg_narrow(t, tg_ndim(t) - 1, k * hidden, hidden);
}

/* One step of the cell given the input projection xw = x W_ih^T + b_ih, as ATen's
 * RNN.cpp cells: h' (and the LSTM's c') into *h_out / *c_out. */
static void cell_step(rnn_kind kind, int64_t hidden, tg_tensor *xw, tg_tensor *h, tg_tensor *c, tg_tensor *w_hh,
                      tg_tensor *b_hh, tg_tensor *w_hr, tg_tensor **h_out, tg_tensor **c_out) {
    tg_tensor *hw = tg_linear(h, w_hh, b_hh);
    switch (kind) {
    case KIND_RNN_TANH: *h_out = tg_tanh(tg_add(xw, hw)); break;
    case KIND_RNN_RELU: *h_out = tg_relu(tg_add(xw, hw)); break;
    case KIND_LSTM: {
        tg_tensor *gates = tg_add(xw, hw);
        tg_tensor *i = tg_sigmoid(chunk(gates, 0, hidden)), *f = tg_sigmoid(chunk(gates, 1, hidden));
        tg_tensor *g = tg_tanh(chunk(gates, 2, hidden)), *o = tg_sigmoid(chunk(gates, 3, hidden));
        *c_out = tg_add(tg_mul(f, c), tg_mul(i, g));
        *h_out = tg_mul(o, tg_tanh(*c_out));
        if (w_hr) *h_out = tg_linear(*h_out, w_hr, NULL); /* ATen's LSTMCell: hy = hy.matmul(w_hr.t()) */
        break;
    }
    case KIND_GRU: {
        /* n = tanh(x W_in + b_in + r * (h W_hn + b_hn)); h' = n + z * (h - n) */
        tg_tensor *r = tg_sigmoid(tg_add(chunk(xw, 0, hidden), chunk(hw, 0, hidden)));
        tg_tensor *z = tg_sigmoid(tg_add(chunk(xw, 1, hidden), chunk(hw, 1, hidden)));
        tg_tensor *n = tg_tanh(tg_add(chunk(xw, 2, hidden), tg_mul(r, chunk(hw, 2, hidden))));
        *h_out = tg_add(n, tg_mul(z, tg_sub(h, n)));
        break;
    }
    }
}

static tg_tensor *param(tg_module *m, const char *what, int layer, int direction) {
    char name[64];
    snprintf(name, sizeof name, "%s_l%d%s", what, layer, direction ? "_reverse" : "");
    return tg_module_param(m, name);
}

/* One layer, one direction, over xs [T, B, I]: the outputs [T, B, H] and the last state. */
static tg_tensor *run_direction(tg_module *m, const rnn_state *s, tg_tensor *xs, int layer, int direction, tg_tensor *h,
                                tg_tensor *c, tg_tensor **h_last, tg_tensor **c_last) {
    int64_t steps = tg_size(xs, 0);
    tg_tensor *xw_all = tg_linear(xs, param(m, "weight_ih", layer, direction), param(m, "bias_ih", layer, direction));
    tg_tensor *w_hh = param(m, "weight_hh", layer, direction), *b_hh = param(m, "bias_hh", layer, direction);
    tg_tensor *w_hr = s->proj_size > 0 ? param(m, "weight_hr", layer, direction) : NULL;
    if (!xw_all) return NULL;
    tg_tensor **outs = malloc((size_t)steps * sizeof *outs);
    TG_ASSERT(outs != NULL);
    bool ok = true;
    for (int64_t k = 0; ok && k < steps; k++) {
        int64_t t = direction ? steps - 1 - k : k;
        tg_tensor *h_next = NULL, *c_next = NULL;
        cell_step(s->kind, s->hidden_size, tg_select(xw_all, 0, t), h, c, w_hh, b_hh, w_hr, &h_next, &c_next);
        ok = h_next && (s->kind != KIND_LSTM || c_next);
        outs[t] = h = h_next;
        c = c_next;
    }
    tg_tensor *out = ok ? tg_stack(outs, (int)steps, 0) : NULL;
    free(outs);
    *h_last = h;
    *c_last = c;
    return out;
}

/* ---- ONNX export: one layer and direction as one op ----
 *
 * While tg_onnx_export records, a sequence module runs each layer's direction as one
 * op (below) whose forward is run_direction itself, so the recorder sees the layer
 * and writes it as ONNX's LSTM, GRU or RNN node, as torch.onnx.export does: weights
 * re-ordered into ONNX's gate order (PyTorch's LSTM i,f,g,o -> ONNX's i,o,f,c; GRU
 * r,z,n -> z,r,h with linear_before_reset=1), W, R and B as constants with a leading
 * direction dim, the initial state left out when it is zeros (so the batch stays
 * free). A bidirectional layer is two nodes, forward and reverse, concatenated as the
 * module does; layers are stacked nodes. */
typedef struct {
    tg_module *m;
    int layer, direction;
} layer_args;

static tg_tensor *layer_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const layer_args *a = tg_ctx_attrs(ctx);
    const rnn_state *s = tg_module_state(a->m);
    bool given = tg_ctx_function(ctx)->num_inputs > 1;
    tg_opts opts = {.dtype = tg_dtype_of(in[0]), .device = tg_device_of(in[0])};
    int64_t batch = tg_size(in[0], 1);
    tg_tensor *h = given ? in[1] : tg_zeros(TG_SHAPE(batch, h_size(s)), opts);
    tg_tensor *c = s->kind != KIND_LSTM ? NULL : given ? in[2] : tg_zeros(TG_SHAPE(batch, s->hidden_size), opts);
    tg_tensor *h_last = NULL, *c_last = NULL;
    tg_tensor *out = h ? run_direction(a->m, s, in[0], a->layer, a->direction, h, c, &h_last, &c_last) : NULL;
    if (!out) return NULL;
    tg_ctx_set_output(ctx, 1, tg_unsqueeze(h_last, 0)); /* [1, B, H]: ONNX's Y_h, concatenated into h_n */
    if (s->kind == KIND_LSTM) tg_ctx_set_output(ctx, 2, tg_unsqueeze(c_last, 0));
    return out;
}

/* PyTorch's gate blocks of t ([G * hidden, ...]) in ONNX's order, with a leading dim of 1. */
static tg_tensor *onnx_gates(const rnn_state *s, tg_tensor *t) {
    static const int lstm[] = {0, 3, 1, 2}, gru[] = {1, 0, 2}, rnn[] = {0};
    const int *order = s->kind == KIND_LSTM ? lstm : s->kind == KIND_GRU ? gru : rnn;
    int gates = gates_of(s->kind);
    tg_tensor *parts[4];
    for (int k = 0; k < gates; k++) parts[k] = tg_narrow(t, 0, order[k] * s->hidden_size, s->hidden_size);
    return tg_unsqueeze(tg_cat(parts, gates, 0), 0);
}

static tg_status layer_onnx(tg_onnx_op *op) {
    const layer_args *a = tg_onnx_attrs(op);
    const rnn_state *s = tg_module_state(a->m);
    if (s->proj_size > 0) return tg_onnx_unsupported(op, "ONNX's LSTM has no projection (proj_size)");
    if (s->kind == KIND_RNN_RELU) return tg_onnx_unsupported(op, "an RNN with nonlinearity relu is not written yet");
    const char *w = NULL, *r = NULL, *b = "";
    tg_op_observer paused = tg_onnx_pause(); /* the re-ordering's ops are not the model's */
    TG_SCOPE {
        w = tg_onnx_const_tensor(op, onnx_gates(s, param(a->m, "weight_ih", a->layer, a->direction)));
        r = tg_onnx_const_tensor(op, onnx_gates(s, param(a->m, "weight_hh", a->layer, a->direction)));
        if (s->bias) {
            tg_tensor *both[2] = {onnx_gates(s, param(a->m, "bias_ih", a->layer, a->direction)),
                                  onnx_gates(s, param(a->m, "bias_hh", a->layer, a->direction))};
            b = tg_onnx_const_tensor(op, tg_cat(both, 2, 1));
        }
    }
    tg_onnx_resume(paused);
    if (!w || !r || !b) return TG_ERROR;
    bool lstm = s->kind == KIND_LSTM, given = tg_onnx_num_inputs(op) > 1;
    int outputs = lstm ? 3 : 2;
    const char *in[7] = {tg_onnx_input_name(op, 0), w, r, b, "", NULL, NULL}, *out[3];
    int num_in = given ? (lstm ? 7 : 6) : 4;
    const char *axis0 = tg_onnx_const_ints(op, (const int64_t[]){0}, 1);
    const char *axis1 = tg_onnx_const_ints(op, (const int64_t[]){1}, 1);
    for (int i = 1; given && i < tg_onnx_num_inputs(op); i++) { /* [B, H] -> initial_h / initial_c [1, B, H] */
        in[4 + i] = tg_onnx_value(op);
        if (!tg_onnx_add_node(op, "Unsqueeze", 2, (const char *[]){tg_onnx_input_name(op, i), axis0}, 1, &in[4 + i]))
            return TG_ERROR;
    }
    out[0] = tg_onnx_value(op);
    for (int i = 1; i < outputs; i++) out[i] = tg_onnx_output_name(op, i);
    static const char *const types[] = {"RNN", "RNN", "LSTM", "GRU"};
    tg_onnx_node *n = tg_onnx_add_node(op, types[s->kind], num_in, in, outputs, out);
    if (!n) return TG_ERROR;
    tg_onnx_attr_int(n, "hidden_size", s->hidden_size);
    tg_onnx_attr_string(n, "direction", a->direction ? "reverse" : "forward");
    if (s->kind == KIND_GRU) tg_onnx_attr_int(n, "linear_before_reset", 1);
    /* Y [T, 1, B, H] -> [T, B, H] */
    return tg_onnx_add_node(op, "Squeeze", 2, (const char *[]){out[0], axis1}, 1,
                            (const char *[]){tg_onnx_output_name(op, 0)})
               ? TG_OK
               : TG_ERROR;
}

#define LAYER_FN(inputs, outputs)                                                                        \
    {                                                                                                    \
        .name = "rnn_layer", .num_inputs = (inputs), .forward = layer_forward, .num_outputs = (outputs), \
        .low_precision = TG_LOW_PRECISION_NATIVE, .onnx = layer_onnx                                     \
    }
/* [LSTM or not][state given]: no backward (applied only while recording, grad off) */
static const tg_function layer_fns[2][2] = {{LAYER_FN(1, 2), LAYER_FN(2, 2)}, {LAYER_FN(1, 3), LAYER_FN(3, 3)}};

/* run_direction as one op; h and c: the initial state, NULL for zeros. The last state
 * comes back as [1, B, H], for run() to concatenate (a stack's unsqueeze would be a
 * Reshape to the example's batch size). */
static tg_tensor *export_direction(tg_module *m, const rnn_state *s, tg_tensor *xs, int layer, int direction,
                                   tg_tensor *h, tg_tensor *c, tg_tensor **h_last, tg_tensor **c_last) {
    bool lstm = s->kind == KIND_LSTM;
    layer_args a = {m, layer, direction};
    tg_tensor *in[3] = {xs, h, c}, *out[3] = {NULL, NULL, NULL};
    if (h && lstm && !c) return tg_error("%s: no c0 for the given h0", kind_name(s)), NULL;
    if (tg_apply_multi_args(&layer_fns[lstm][h != NULL], in, &a, sizeof a, out)) return NULL;
    *h_last = out[1];
    *c_last = lstm ? out[2] : NULL;
    return out[0];
}

static bool same_shape(tg_tensor *t, tg_shape want) { return t && tg_shape_equal(tg_shape_of(t), want); }

static tg_status shape_error(const rnn_state *s, const char *what, tg_tensor *t, tg_shape want) {
    char got[96], expected[96];
    return tg_error("%s(%lld, %lld): %s %s must be %s", kind_name(s), (long long)s->input_size,
                    (long long)s->hidden_size, what, tg_shape_str(tg_shape_of(t), got, sizeof got),
                    tg_shape_str(want, expected, sizeof expected));
}

static tg_status check_state(const rnn_state *s, const char *what, tg_tensor *x, tg_tensor *state, tg_shape want) {
    if (!state) return TG_OK;
    if (!same_shape(state, want)) return shape_error(s, what, state, want);
    char a[16], b[16];
    if (tg_dtype_of(state) != tg_dtype_of(x) || !tg_device_equal(tg_device_of(state), tg_device_of(x)))
        return tg_error("%s: %s is %s on %s, the input %s on %s", kind_name(s), what, tg_dtype_name(tg_dtype_of(state)),
                        tg_device_str(tg_device_of(state), a), tg_dtype_name(tg_dtype_of(x)),
                        tg_device_str(tg_device_of(x), b));
    return TG_OK;
}

/* The whole call inside the caller's scope: the three results are tracked there. */
static tg_status run(tg_module *m, tg_tensor *x, tg_tensor *h0, tg_tensor *c0, tg_rnn_result *r) {
    const rnn_state *s = tg_module_state(m);
    *r = (tg_rnn_result){0};
    if (c0 && s->kind != KIND_LSTM) return tg_error("%s: c0 is for LSTMs only", kind_name(s));
    int nd = tg_ndim(x);
    bool batched = nd == (s->cell ? 2 : 3);
    if ((!batched && nd != (s->cell ? 1 : 2)) || tg_size(x, -1) != s->input_size) {
        char got[96];
        return tg_error("%s(%lld, %lld): input %s must be %s", kind_name(s), (long long)s->input_size,
                        (long long)s->hidden_size, tg_shape_str(tg_shape_of(x), got, sizeof got),
                        s->cell          ? "[B, input_size] or [input_size]"
                        : s->batch_first ? "[B, T, input_size] or [T, input_size]"
                                         : "[T, B, input_size] or [T, input_size]");
    }
    int64_t hidden = s->hidden_size, hsize = h_size(s), stack = (int64_t)s->num_layers * s->directions;
    /* everything below works batched, sequence first */
    tg_tensor *xs = batched ? x : tg_unsqueeze(x, s->cell ? 0 : 1);
    if (batched && s->batch_first && !s->cell) xs = tg_transpose(xs, 0, 1);
    if (!xs) return TG_ERROR;
    int64_t batch = tg_size(xs, s->cell ? 0 : 1);
    /* h has hsize (the projection's size when the LSTM projects), c hidden */
    tg_shape h_shape = s->cell ? (batched ? TG_SHAPE(batch, hsize) : TG_SHAPE(hsize))
                               : (batched ? TG_SHAPE(stack, batch, hsize) : TG_SHAPE(stack, hsize));
    tg_shape c_shape = s->cell ? (batched ? TG_SHAPE(batch, hidden) : TG_SHAPE(hidden))
                               : (batched ? TG_SHAPE(stack, batch, hidden) : TG_SHAPE(stack, hidden));
    if (check_state(s, s->kind == KIND_LSTM ? "h0" : "hx", x, h0, h_shape) || check_state(s, "c0", x, c0, c_shape))
        return TG_ERROR;
    tg_opts opts = {.dtype = tg_dtype_of(x), .device = tg_device_of(x)};
    tg_shape h_inner = s->cell ? TG_SHAPE(batch, hsize) : TG_SHAPE(stack, batch, hsize);
    tg_shape c_inner = s->cell ? TG_SHAPE(batch, hidden) : TG_SHAPE(stack, batch, hidden);
    tg_tensor *h_all = h0 ? tg_reshape(h0, h_inner) : tg_zeros(h_inner, opts);
    tg_tensor *c_all = s->kind != KIND_LSTM ? NULL : c0 ? tg_reshape(c0, c_inner) : tg_zeros(c_inner, opts);
    if (!h_all || (s->kind == KIND_LSTM && !c_all)) return TG_ERROR;

    if (s->cell) {
        tg_tensor *h = NULL, *c = NULL;
        tg_tensor *xw = tg_linear(xs, tg_module_param(m, "weight_ih"), tg_module_param(m, "bias_ih"));
        cell_step(s->kind, hidden, xw, h_all, c_all, tg_module_param(m, "weight_hh"), tg_module_param(m, "bias_hh"),
                  NULL, &h, &c);
        if (!h || (s->kind == KIND_LSTM && !c)) return TG_ERROR;
        r->output = r->h_n = batched ? h : tg_squeeze(h, 0);
        r->c_n = c && !batched ? tg_squeeze(c, 0) : c;
        return TG_OK;
    }

    bool exporting = tg_onnx_recording(); /* tg_onnx_export: each layer as ONNX's LSTM / GRU / RNN */
    tg_tensor **h_n = malloc((size_t)stack * sizeof *h_n), **c_n = malloc((size_t)stack * sizeof *c_n);
    TG_ASSERT(h_n && c_n);
    tg_tensor *layer_input = xs, *out = NULL;
    bool ok = true;
    for (int layer = 0; ok && layer < s->num_layers; layer++) {
        tg_tensor *dir_out[2] = {NULL, NULL};
        for (int d = 0; ok && d < s->directions; d++) {
            int k = layer * s->directions + d;
            if (exporting) { /* one recorded op; zeros made inside it unless a state was given */
                tg_tensor *h = h0 || c0 ? tg_select(h_all, 0, k) : NULL;
                tg_tensor *c = h && c_all ? tg_select(c_all, 0, k) : NULL;
                dir_out[d] = export_direction(m, s, layer_input, layer, d, h, c, &h_n[k], &c_n[k]);
                ok = dir_out[d] != NULL;
                continue;
            }
            tg_tensor *h = tg_select(h_all, 0, k), *c = c_all ? tg_select(c_all, 0, k) : NULL;
            dir_out[d] = run_direction(m, s, layer_input, layer, d, h, c, &h_n[k], &c_n[k]);
            ok = dir_out[d] != NULL;
        }
        if (!ok) break;
        out = s->directions == 2 ? tg_cat(dir_out, 2, 2) : dir_out[0];
        /* ATen's RNN.cpp: dropout on every layer's output but the last, in training */
        if (out && s->dropout > 0 && tg_is_training(m) && layer < s->num_layers - 1)
            layer_input = tg_dropout(out, s->dropout, true);
        else layer_input = out;
        ok = layer_input != NULL;
    }
    tg_tensor *(*join)(tg_tensor *const *, int, int) =
        exporting ? tg_cat : tg_stack; /* [1, B, H] each when exporting */
    tg_tensor *hn = ok ? join(h_n, (int)stack, 0) : NULL;
    tg_tensor *cn = ok && s->kind == KIND_LSTM ? join(c_n, (int)stack, 0) : NULL;
    free(h_n);
    free(c_n);
    if (!hn || (s->kind == KIND_LSTM && !cn)) return TG_ERROR;
    if (!batched) {
        out = tg_squeeze(out, 1);
        hn = tg_squeeze(hn, 1);
        cn = cn ? tg_squeeze(cn, 1) : NULL;
    } else if (s->batch_first) {
        out = tg_transpose(out, 0, 1);
    }
    if (!out || !hn) return TG_ERROR;
    *r = (tg_rnn_result){out, hn, cn};
    return TG_OK;
}

static tg_tensor *rnn_module_forward(tg_module *self, tg_tensor *x) {
    tg_rnn_result r;
    return run(self, x, NULL, NULL, &r) ? NULL : r.output;
}

static void rnn_repr(tg_module *self, char *buf, size_t size) {
    rnn_state *s = tg_module_state(self);
    int n = snprintf(buf, size, "%lld, %lld", (long long)s->input_size, (long long)s->hidden_size);
    if (n < 0 || (size_t)n >= size) return;
    if (s->num_layers != 1) n += snprintf(buf + n, size - (size_t)n, ", num_layers=%d", s->num_layers);
    if (n >= 0 && (size_t)n < size && s->kind == KIND_RNN_RELU)
        n += snprintf(buf + n, size - (size_t)n, ", nonlinearity=relu");
    if (n >= 0 && (size_t)n < size && !s->bias) n += snprintf(buf + n, size - (size_t)n, ", bias=False");
    if (n >= 0 && (size_t)n < size && s->batch_first) n += snprintf(buf + n, size - (size_t)n, ", batch_first=True");
    if (n >= 0 && (size_t)n < size && s->dropout > 0)
        n += snprintf(buf + n, size - (size_t)n, ", dropout=%g", s->dropout);
    if (n >= 0 && (size_t)n < size && s->directions == 2)
        n += snprintf(buf + n, size - (size_t)n, ", bidirectional=True");
    if (n >= 0 && (size_t)n < size && s->proj_size > 0)
        snprintf(buf + n, size - (size_t)n, ", proj_size=%lld", (long long)s->proj_size);
}

static const tg_module_type rnn_type = {"RNN", rnn_module_forward, NULL, rnn_repr};
static const tg_module_type lstm_type = {"LSTM", rnn_module_forward, NULL, rnn_repr};
static const tg_module_type gru_type = {"GRU", rnn_module_forward, NULL, rnn_repr};
static const tg_module_type rnn_cell_type = {"RNNCell", rnn_module_forward, NULL, rnn_repr};
static const tg_module_type lstm_cell_type = {"LSTMCell", rnn_module_forward, NULL, rnn_repr};
static const tg_module_type gru_cell_type = {"GRUCell", rnn_module_forward, NULL, rnn_repr};

static bool is_recurrent(tg_module *m) {
    const tg_module_type *t = tg_module_type_of(m);
    return t == &rnn_type || t == &lstm_type || t == &gru_type || t == &rnn_cell_type || t == &lstm_cell_type ||
           t == &gru_cell_type;
}

tg_status tg_rnn_forward(tg_module *m, tg_tensor *x, tg_tensor *h0, tg_tensor *c0, tg_rnn_result *result) {
    if (!result) return tg_error("tg_rnn_forward: result is NULL");
    *result = (tg_rnn_result){0};
    if (!m || !is_recurrent(m))
        return tg_error("tg_rnn_forward: the module is %s, not an RNN, LSTM, GRU or one of their cells",
                        m ? tg_module_type_of(m)->name : "NULL");
    if (tg_unusable_(x)) return tg_error_unusable_input(kind_name(tg_module_state(m)), x, 0);
    tg_rnn_result r;
    tg_status status;
    tg_scope_begin();
    status = run(m, x, h0, c0, &r);
    if (!status) {
        tg_scope_return(r.output);
        if (r.h_n != r.output) tg_scope_return(r.h_n);
        if (r.c_n) tg_scope_return(r.c_n);
    }
    tg_scope_end();
    if (!status) *result = r;
    return status;
}

/* ---- constructors ---- */

/* Registers (and draws, in this order, as reset_parameters does over parameters())
 * weight_ih, weight_hh, bias_ih, bias_hh and, for an LSTM projecting to proj > 0,
 * weight_hr with `suffix` ("_l0", "_l0_reverse", or ""). */
static tg_status add_weights(tg_module *m, const char *suffix, int64_t gate_rows, int64_t in, int64_t hidden,
                             int64_t proj, bool bias) {
    double bound = 1.0 / sqrt((double)hidden);
    int64_t h = proj > 0 ? proj : hidden;
    const char *names[5] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"};
    tg_shape shapes[5] = {TG_SHAPE(gate_rows, in), TG_SHAPE(gate_rows, h), TG_SHAPE(gate_rows), TG_SHAPE(gate_rows),
                          TG_SHAPE(proj, hidden)};
    tg_status status = TG_OK;
    TG_SCOPE {
        for (int k = 0; !status && k < 5; k++) {
            if ((k >= 2 && k < 4 && !bias) || (k == 4 && proj <= 0)) continue;
            char name[64];
            snprintf(name, sizeof name, "%s%s", names[k], suffix);
            tg_tensor *t = tg_empty(shapes[k], (tg_opts){0});
            status = t ? tg_uniform_(t, -bound, bound) : TG_ERROR;
            if (!status) status = tg_register_parameter(m, name, t);
        }
    }
    return status;
}

static tg_module *make(const tg_module_type *type, const char *ctor, rnn_kind kind, bool cell, int64_t input_size,
                       int64_t hidden_size, tg_rnn_opts opts) {
    int layers = opts.num_layers ? opts.num_layers : 1;
    if (input_size <= 0 || hidden_size <= 0 || layers < 0 || !(opts.dropout >= 0 && opts.dropout <= 1) ||
        (opts.nonlinearity != TG_RNN_TANH && opts.nonlinearity != TG_RNN_RELU)) {
        tg_error("%s: input_size=%lld and hidden_size=%lld must be positive, num_layers=%d non-negative (0 means 1), "
                 "dropout=%g in [0, 1], nonlinearity tanh or relu",
                 ctor, (long long)input_size, (long long)hidden_size, opts.num_layers, opts.dropout);
        return NULL;
    }
    /* PyTorch's RNNBase checks (ValueError there) */
    if (opts.proj_size < 0) {
        tg_error("%s: proj_size should be a positive integer or zero to disable projections, got %lld", ctor,
                 (long long)opts.proj_size);
        return NULL;
    }
    if (opts.proj_size > 0 && (kind != KIND_LSTM || cell)) {
        tg_error("%s: proj_size argument is only supported for LSTM, not RNN or GRU (got proj_size=%lld)", ctor,
                 (long long)opts.proj_size);
        return NULL;
    }
    if (opts.proj_size >= hidden_size) {
        tg_error("%s: proj_size has to be smaller than hidden_size (got proj_size=%lld, hidden_size=%lld)", ctor,
                 (long long)opts.proj_size, (long long)hidden_size);
        return NULL;
    }
    if (kind == KIND_RNN_TANH && opts.nonlinearity == TG_RNN_RELU) kind = KIND_RNN_RELU;
    tg_module *m = tg_module_new(type, sizeof(rnn_state));
    rnn_state *s = tg_module_state(m);
    *s = (rnn_state){.kind = kind,
                     .cell = cell,
                     .input_size = input_size,
                     .hidden_size = hidden_size,
                     .num_layers = cell ? 1 : layers,
                     .directions = !cell && opts.bidirectional ? 2 : 1,
                     .bias = !opts.no_bias,
                     .batch_first = !cell && opts.batch_first,
                     .dropout = cell ? 0 : opts.dropout,
                     .proj_size = opts.proj_size};
    int64_t rows = gates_of(kind) * hidden_size;
    tg_status status = TG_OK;
    if (cell) status = add_weights(m, "", rows, input_size, hidden_size, 0, s->bias);
    for (int layer = 0; !cell && !status && layer < s->num_layers; layer++)
        for (int d = 0; !status && d < s->directions; d++) {
            char suffix[32];
            snprintf(suffix, sizeof suffix, "_l%d%s", layer, d ? "_reverse" : "");
            status = add_weights(m, suffix, rows, layer ? h_size(s) * s->directions : input_size, hidden_size,
                                 s->proj_size, s->bias);
        }
    if (status) {
        tg_module_free(m);
        return NULL;
    }
    return m;
}

tg_module *tg_nn_rnn(int64_t input_size, int64_t hidden_size, tg_rnn_opts opts) {
    return make(&rnn_type, "tg_nn_rnn", KIND_RNN_TANH, false, input_size, hidden_size, opts);
}
tg_module *tg_nn_lstm(int64_t input_size, int64_t hidden_size, tg_rnn_opts opts) {
    return make(&lstm_type, "tg_nn_lstm", KIND_LSTM, false, input_size, hidden_size, opts);
}
tg_module *tg_nn_gru(int64_t input_size, int64_t hidden_size, tg_rnn_opts opts) {
    return make(&gru_type, "tg_nn_gru", KIND_GRU, false, input_size, hidden_size, opts);
}
tg_module *tg_nn_rnn_cell(int64_t input_size, int64_t hidden_size, tg_rnn_opts opts) {
    return make(&rnn_cell_type, "tg_nn_rnn_cell", KIND_RNN_TANH, true, input_size, hidden_size, opts);
}
tg_module *tg_nn_lstm_cell(int64_t input_size, int64_t hidden_size, tg_rnn_opts opts) {
    return make(&lstm_cell_type, "tg_nn_lstm_cell", KIND_LSTM, true, input_size, hidden_size, opts);
}
tg_module *tg_nn_gru_cell(int64_t input_size, int64_t hidden_size, tg_rnn_opts opts) {
    return make(&gru_cell_type, "tg_nn_gru_cell", KIND_GRU, true, input_size, hidden_size, opts);
}
