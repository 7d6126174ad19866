// RNN, LSTM, GRU and their cells (nn/recurrent.h) against PyTorch 1.13
// (tests/fixtures/gen_recurrent.py): the same seed gives PyTorch's weights, outputs and
// gradients (input, initial states, every parameter) match, including bidirectional,
// batch_first, unbatched input, no bias, relu and inter-layer dropout in training;
// float64 gradchecks, state-dict names, and bad inputs.
#include <functional>
#include <string>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/recurrent.txt");
    return f;
}
tg_tensor *f64(const std::string &name, bool grad = false) { return fixture_tensor(fx(), name).make(TG_FLOAT64, grad); }
std::vector<double> want(const std::string &name) { return fixture_tensor(fx(), name).data; }

struct RnnCase {
    const char *name;
    uint64_t seed;
    std::function<tg_module *()> make;
    bool lstm, cell, with_state, train;
};

void check_rnn(const RnnCase &c) {
    SCOPED_TRACE(c.name);
    std::string n = c.name;
    tg_manual_seed(c.seed);
    tg_module *m = c.make();
    ASSERT_NE(m, nullptr) << tg_last_error();
    int count = 0;
    const tg_named_tensor *params = tg_named_parameters(m, &count);
    for (int i = 0; i < count; i++) {
        EXPECT_EQ(dims(params[i].tensor), fixture_tensor(fx(), n + "." + params[i].name).shape) << params[i].name;
        EXPECT_TRUE(tensor_near(params[i].tensor, want(n + "." + params[i].name), 0)) << "init " << params[i].name;
    }
    ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
    tg_train(m, c.train);
    tg_tensor *x = f64(n + ".x", true);
    std::vector<tg_tensor *> states;
    if (c.with_state) {
        states.push_back(f64(n + ".s0", true));
        if (c.lstm) states.push_back(f64(n + ".s1", true));
    }
    tg_manual_seed(c.seed + 1000);
    tg_rnn_result r;
    ASSERT_EQ(
        tg_rnn_forward(m, x, states.size() > 0 ? states[0] : nullptr, states.size() > 1 ? states[1] : nullptr, &r),
        TG_OK)
        << tg_last_error();
    std::vector<tg_tensor *> outs;
    if (c.cell) {
        EXPECT_EQ(r.output, r.h_n);
        outs = {r.h_n};
    } else {
        outs = {r.output, r.h_n};
    }
    if (c.lstm) outs.push_back(r.c_n);
    else EXPECT_EQ(r.c_n, nullptr);
    tg_tensor *loss = nullptr;
    for (size_t k = 0; k < outs.size(); k++) {
        std::string key = n + ".out" + std::to_string(k);
        EXPECT_EQ(dims(outs[k]), fixture_tensor(fx(), key).shape) << key;
        EXPECT_TRUE(tensor_near(outs[k], want(key), 1e-12)) << key;
        tg_tensor *term = tg_sum(tg_mul(outs[k], f64(n + ".g" + std::to_string(k))));
        loss = loss ? tg_add(loss, term) : term;
    }
    ASSERT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), want(n + ".x_grad"), 1e-12)) << "x grad";
    for (size_t k = 0; k < states.size(); k++)
        EXPECT_TRUE(tensor_near(tg_grad(states[k]), want(n + ".s" + std::to_string(k) + "_grad"), 1e-12)) << k;
    params = tg_named_parameters(m, &count);
    for (int i = 0; i < count; i++)
        EXPECT_TRUE(tensor_near(tg_grad(params[i].tensor), want(n + "." + params[i].name + "_grad"), 1e-12))
            << params[i].name << " grad";
    tg_module_free(m);
}

class RecurrentTest : public TgTest {};

} // namespace

TEST_F(RecurrentTest, SequenceModulesMatchPyTorch) {
    const RnnCase cases[] = {
        {"lstm_bi", 1,
         [] { return tg_nn_lstm(5, 4, tg_rnn_opts{.num_layers = 2, .batch_first = true, .bidirectional = true}); },
         true, false, true, false},
        {"gru_dropout", 2, [] { return tg_nn_gru(5, 4, tg_rnn_opts{.num_layers = 3, .dropout = 0.3}); }, false, false,
         false, true},
        {"rnn_relu_unbatched", 3,
         [] { return tg_nn_rnn(5, 3, tg_rnn_opts{.nonlinearity = TG_RNN_RELU, .no_bias = true}); }, false, false, true,
         false},
        {"rnn_tanh_bi", 4, [] { return tg_nn_rnn(3, 4, tg_rnn_opts{.num_layers = 2, .bidirectional = true}); }, false,
         false, false, false},
        {"lstm_plain", 5, [] { return tg_nn_lstm(3, 5, tg_rnn_opts{}); }, true, false, false, false},
        {"gru_bi_batch_first", 6,
         [] { return tg_nn_gru(3, 2, tg_rnn_opts{.batch_first = true, .bidirectional = true}); }, false, false, true,
         false},
    };
    for (const RnnCase &c : cases) check_rnn(c);
}

TEST_F(RecurrentTest, CellsMatchPyTorch) {
    const RnnCase cases[] = {
        {"lstm_cell", 7, [] { return tg_nn_lstm_cell(4, 3, tg_rnn_opts{}); }, true, true, true, false},
        {"gru_cell", 8, [] { return tg_nn_gru_cell(4, 3, tg_rnn_opts{}); }, false, true, true, false},
        {"rnn_cell", 9, [] { return tg_nn_rnn_cell(4, 3, tg_rnn_opts{}); }, false, true, true, false},
        {"rnn_cell_relu_nostate", 10,
         [] { return tg_nn_rnn_cell(4, 3, tg_rnn_opts{.nonlinearity = TG_RNN_RELU, .no_bias = true}); }, false, true,
         false, false},
    };
    for (const RnnCase &c : cases) check_rnn(c);
}

TEST_F(RecurrentTest, StateDictNamesAndTgForward) {
    tg_module *lstm = tg_nn_lstm(3, 2, tg_rnn_opts{.num_layers = 2, .bidirectional = true});
    int n = 0;
    const tg_named_tensor *sd = tg_state_dict(lstm, &n);
    std::vector<std::string> names;
    for (int i = 0; i < n; i++) names.push_back(sd[i].name);
    std::vector<std::string> expected;
    for (const char *layer : {"l0", "l1"})
        for (const char *dir : {"", "_reverse"})
            for (const char *p : {"weight_ih_", "weight_hh_", "bias_ih_", "bias_hh_"})
                expected.push_back(std::string(p) + layer + dir);
    EXPECT_EQ(names, expected);
    EXPECT_EQ(dims(tg_module_get(lstm, "weight_ih_l1")), (std::vector<int64_t>{8, 4})) << "input of layer 1 is 2 * H";
    // tg_forward gives the output of tg_rnn_forward without states
    tg_manual_seed(3);
    tg_tensor *x = tg_randn(TG_SHAPE(4, 2, 3), tg_opts{});
    tg_rnn_result r;
    ASSERT_EQ(tg_rnn_forward(lstm, x, nullptr, nullptr, &r), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_forward(lstm, x), values(r.output), 0));
    tg_module *gru_cell = tg_nn_gru_cell(3, 2, tg_rnn_opts{.no_bias = true});
    sd = tg_state_dict(gru_cell, &n);
    names.clear();
    for (int i = 0; i < n; i++) names.push_back(sd[i].name);
    EXPECT_EQ(names, (std::vector<std::string>{"weight_ih", "weight_hh"}));
    tg_module_free(gru_cell);
    tg_module_free(lstm);
}

TEST_F(RecurrentTest, StateDictsLoadBothWays) {
    // PyTorch's bidirectional two-layer LSTM and GRUCell weights, by PyTorch's names, into
    // modules drawn from another seed; then tapegrad's map back into fresh modules
    tg_manual_seed(99);
    tg_module *lstm = tg_nn_lstm(5, 4, tg_rnn_opts{.num_layers = 2, .batch_first = true, .bidirectional = true});
    tg_module *cell = tg_nn_gru_cell(4, 3, tg_rnn_opts{});
    for (auto [m, name] : {std::pair<tg_module *, std::string>{lstm, "lstm_bi"}, {cell, "gru_cell"}}) {
        tg_tensor_map *from_torch = tg_tensor_map_new();
        int n = 0;
        const tg_named_tensor *sd = tg_state_dict(m, &n);
        for (int i = 0; i < n; i++)
            tg_tensor_map_set(from_torch, sd[i].name, fixture_tensor(fx(), name + "." + sd[i].name).make(TG_FLOAT32));
        ASSERT_EQ(tg_module_load_state_map(m, from_torch, true, "PyTorch"), TG_OK) << tg_last_error();
        tg_tensor_map_free(from_torch);
        tg_module *fresh =
            m == lstm ? tg_nn_lstm(5, 4, tg_rnn_opts{.num_layers = 2, .batch_first = true, .bidirectional = true})
                      : tg_nn_gru_cell(4, 3, tg_rnn_opts{});
        tg_tensor_map *mine = tg_module_state_map(m);
        ASSERT_EQ(tg_module_load_state_map(fresh, mine, true, nullptr), TG_OK) << tg_last_error();
        tg_tensor_map_free(mine);
        sd = tg_state_dict(fresh, &n);
        for (int i = 0; i < n; i++)
            EXPECT_TRUE(tensor_near(sd[i].tensor, want(name + "." + sd[i].name), 0)) << sd[i].name;
        tg_module_free(fresh);
    }
    tg_module_free(lstm);
    tg_module_free(cell);
}

namespace {
struct GcCase {
    tg_module *m;
    bool lstm;
};
// The sum of all three results, so that every path is checked at once.
tg_tensor *rnn_fn(tg_tensor *const *in, void *user) {
    GcCase *c = static_cast<GcCase *>(user);
    tg_rnn_result r;
    if (tg_rnn_forward(c->m, in[0], in[1], c->lstm ? in[2] : nullptr, &r)) return nullptr;
    tg_tensor *y = tg_add(tg_sum(tg_square(r.output)), tg_sum(r.h_n));
    return c->lstm ? tg_add(y, tg_sum(tg_mul_scalar(r.c_n, 0.5))) : y;
}
} // namespace

TEST_F(RecurrentTest, GradcheckFloat64) {
    tg_manual_seed(4);
    tg_opts o = {TG_FLOAT64, TG_CPU, true};
    tg_module *modules[] = {tg_nn_lstm(2, 3, tg_rnn_opts{.num_layers = 2, .bidirectional = true}),
                            tg_nn_gru(2, 3, tg_rnn_opts{.batch_first = true}), tg_nn_rnn(2, 3, tg_rnn_opts{})};
    for (int i = 0; i < 3; i++) {
        tg_module *m = modules[i];
        ASSERT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK);
        int64_t stack = i == 0 ? 4 : 1;
        tg_tensor *in[] = {tg_randn(TG_SHAPE(3, 2, 2), o), tg_randn(TG_SHAPE(stack, i == 1 ? 3 : 2, 3), o),
                           tg_randn(TG_SHAPE(stack, 2, 3), o)};
        GcCase c = {m, i == 0};
        tg_gradcheck_opts go = {};
        go.user = &c;
        EXPECT_EQ(tg_gradcheck(rnn_fn, c.lstm ? 3 : 2, in, &go), TG_OK)
            << tg_module_type_of(m)->name << ": " << tg_last_error();
        tg_module_free(m);
    }
}

TEST_F(RecurrentTest, BadInputsNameTheModuleAndShapes) {
    tg_module *lstm = tg_nn_lstm(3, 2, tg_rnn_opts{.num_layers = 2});
    tg_rnn_result r;
    tg_clear_error();
    EXPECT_EQ(tg_rnn_forward(lstm, tg_zeros(TG_SHAPE(4, 2, 5), tg_opts{}), nullptr, nullptr, &r), TG_ERROR);
    EXPECT_ERROR_CONTAINS("LSTM(3, 2): input [4, 2, 5] must be [T, B, input_size] or [T, input_size]");
    EXPECT_EQ(r.output, nullptr);
    tg_clear_error();
    EXPECT_EQ(tg_rnn_forward(lstm, tg_zeros(TG_SHAPE(4, 2, 3), tg_opts{}), tg_zeros(TG_SHAPE(1, 2, 2), tg_opts{}),
                             nullptr, &r),
              TG_ERROR);
    EXPECT_ERROR_CONTAINS("LSTM(3, 2): h0 [1, 2, 2] must be [2, 2, 2]");
    tg_clear_error();
    EXPECT_EQ(tg_rnn_forward(lstm, tg_zeros(TG_SHAPE(4, 2, 3), tg_opts{}), nullptr,
                             tg_zeros(TG_SHAPE(2, 2, 2), tg_opts{TG_FLOAT64}), &r),
              TG_ERROR);
    EXPECT_ERROR_CONTAINS("LSTM: c0 is float64 on cpu, the input float32 on cpu");
    tg_module *gru = tg_nn_gru_cell(3, 2, tg_rnn_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_rnn_forward(gru, tg_zeros(TG_SHAPE(3), tg_opts{}), nullptr, tg_zeros(TG_SHAPE(2), tg_opts{}), &r),
              TG_ERROR);
    EXPECT_ERROR_CONTAINS("GRUCell: c0 is for LSTMs only");
    tg_clear_error();
    EXPECT_EQ(tg_forward(gru, tg_zeros(TG_SHAPE(1, 2, 3), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("GRUCell(3, 2): input [1, 2, 3] must be [B, input_size] or [input_size]");
    tg_module *relu = tg_nn_relu();
    tg_clear_error();
    EXPECT_EQ(tg_rnn_forward(relu, tg_zeros(TG_SHAPE(3), tg_opts{}), nullptr, nullptr, &r), TG_ERROR);
    EXPECT_ERROR_CONTAINS("the module is ReLU, not an RNN");
    tg_clear_error();
    EXPECT_EQ(tg_nn_gru(0, 2, tg_rnn_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_gru: input_size=0 and hidden_size=2 must be positive");
    tg_clear_error();
    EXPECT_EQ(tg_nn_lstm(2, 2, tg_rnn_opts{.dropout = 1.5}), nullptr);
    EXPECT_ERROR_CONTAINS("dropout=1.5 in [0, 1]");
    tg_module_free(relu);
    tg_module_free(gru);
    tg_module_free(lstm);
}
