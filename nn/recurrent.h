/* Recurrent modules (torch.nn.RNN, LSTM, GRU, RNNCell, LSTMCell, GRUCell), composed
 * of linear, elementwise and shape ops, so they run and differentiate on every device
 * those run on. Constructors as in nn/layers.h: a NEW module or NULL + error; float32
 * CPU. Parameters have PyTorch's names (weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k},
 * bias_hh_l{k}, "_reverse" for the backward direction; a cell's weight_ih, weight_hh,
 * bias_ih, bias_hh), shapes and gate order (LSTM: i, f, g, o; GRU: r, z, n), and are
 * drawn U(-1/sqrt(hidden), 1/sqrt(hidden)) in registration order, as PyTorch's
 * reset_parameters, so the same seed gives PyTorch's weights. */
#ifndef TG_NN_RECURRENT_H
#define TG_NN_RECURRENT_H

#include <stdbool.h>
#include <stdint.h>

#include "nn/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TG_RNN_TANH = 0, TG_RNN_RELU } tg_rnn_nonlinearity;

/* Zero fields are PyTorch's defaults. Cells use only nonlinearity and no_bias. */
typedef struct {
    int num_layers;                   /* 0: 1 */
    tg_rnn_nonlinearity nonlinearity; /* RNN / RNNCell: tanh (default) or relu */
    bool no_bias;                     /* bias=False */
    bool batch_first;                 /* input and output [B, T, *] instead of [T, B, *] */
    double dropout;                   /* on each layer's output but the last, in training */
    bool bidirectional;
    int64_t proj_size; /* LSTM only: > 0 projects h by weight_hr_l{k} [proj_size, hidden] */
} tg_rnn_opts;

/* Input [T, B, input_size] ([B, T, input_size] with batch_first) or unbatched
 * [T, input_size]; output [T, B, D * hidden] (D = 2 when bidirectional), h_n (and
 * LSTM's c_n) [num_layers * D, B, hidden] ([num_layers * D, hidden] unbatched).
 * An LSTM with proj_size P > 0 (0 < P < hidden, as PyTorch's) multiplies each step's
 * h by weight_hr_l{k} [P, hidden] (registered and drawn after the biases), so
 * weight_hh is [4 * hidden, P], the output [T, B, D * P], h0 and h_n
 * [num_layers * D, B, P]; c0 and c_n keep hidden. */
tg_module *tg_nn_rnn(int64_t input_size, int64_t hidden_size, tg_rnn_opts opts);
tg_module *tg_nn_lstm(int64_t input_size, int64_t hidden_size, tg_rnn_opts opts);
tg_module *tg_nn_gru(int64_t input_size, int64_t hidden_size, tg_rnn_opts opts);

/* One step: input [B, input_size] or [input_size], state [B, hidden] or [hidden]. */
tg_module *tg_nn_rnn_cell(int64_t input_size, int64_t hidden_size, tg_rnn_opts opts);
tg_module *tg_nn_lstm_cell(int64_t input_size, int64_t hidden_size, tg_rnn_opts opts);
tg_module *tg_nn_gru_cell(int64_t input_size, int64_t hidden_size, tg_rnn_opts opts);

/* What PyTorch's call returns: (output, h_n) / (output, (h_n, c_n)) for the sequence
 * modules; a cell's h' (output and h_n alike) and LSTMCell's c'. c_n is NULL but for
 * LSTMs. NEW references owned by the caller's innermost scope, as tg_forward's. */
typedef struct {
    tg_tensor *output, *h_n, *c_n;
} tg_rnn_result;

/* m(x, h0) / m(x, (h0, c0)): h0 and c0 may be NULL (zeros, as PyTorch); c0 is for
 * LSTMs only. tg_forward(m, x) is this with no states, returning the output (a
 * cell's h'); hooks run with tg_forward only. Fails (result zeroed) on a module
 * that is not recurrent, or on shapes, dtypes or devices that do not match, naming
 * the module and the shapes. */
tg_status tg_rnn_forward(tg_module *m, tg_tensor *x, tg_tensor *h0, tg_tensor *c0, tg_rnn_result *result);

#ifdef __cplusplus
}
#endif
#endif
