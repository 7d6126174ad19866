// The seeds' three real models trained against PyTorch 1.13
// (tests/fixtures/training_models.txt, written by tests/fixtures/gen_training_models.py):
// the MLP 784-1024-512-256-128-10, LeNet (conv 1->20 5x5, max-pool 2, conv 20->50 5x5,
// max-pool 2, fc 800->500->10) and LeNet with BatchNorm2d after each conv, each with
// SGD + momentum (with and without weight decay), Adam, AdamW and RMSprop.
//
// Both sides start from the same initial state, made by a closed-form integer hash
// (no weight fixture; GeneratorMatchesPython checks the two generators agree), and
// train 3 steps on 3 fixed batches of 8 images. In float64: the per-step losses
// within 1e-10 relative; every state-dict entry (parameters, BatchNorm running
// statistics, num_batches_tracked) against PyTorch's checksum (sum, sum of |v|,
// sum of v^2) and 32 sampled entries; the eval-mode output on a 4th batch (all
// 1e-10 relative, except what rounding noise drives in LeNet+BN under the adaptive
// optimizers: 1e-8, see state_rtol). In float32: the losses within 1e-4 relative.
// TG_TRAINING_MODELS_VERBOSE=1 prints the largest observed differences per case.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

namespace {

constexpr int kSteps = 3;
constexpr int kBatch = 8;
constexpr int kSamples = 32;
constexpr double kRtol64 = 1e-10; // float64: losses, checksums, samples, eval outputs
constexpr double kRtol32 = 1e-4;  // float32: losses

const std::map<std::string, FixtureTensor> &fixtures() {
    static const std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/training_models.txt");
    return fx;
}

bool has_fx(const std::string &name) { return fixtures().count(name) > 0; }

const FixtureTensor &fx(const std::string &name) { return fixture_tensor(fixtures(), name); }

// ---- the closed-form generator (gen_training_models.py: hash32, uniform, init_value) ----

uint64_t hash32(uint64_t i, uint64_t salt) {
    const uint64_t mask = 0xFFFFFFFFull;
    uint64_t h = (i * 2654435761ull + salt * 97531ull + 12345ull) & mask;
    h ^= h >> 16;
    h = (h * 0x45D9F3Bull) & mask;
    h ^= h >> 16;
    h = (h * 0x45D9F3Bull) & mask;
    h ^= h >> 16;
    return h;
}

// n values in [-1, 1): hash32 / 2^31 - 1 (exact in double).
std::vector<double> uniform(int64_t n, uint64_t salt) {
    std::vector<double> u((size_t)n);
    for (int64_t i = 0; i < n; i++) u[(size_t)i] = (double)hash32((uint64_t)i, salt) / 2147483648.0 - 1.0;
    return u;
}

int64_t fan_in(tg_tensor *weight) {
    tg_shape s = tg_shape_of(weight);
    int64_t f = 1;
    for (int d = 1; d < s.ndim; d++) f *= s.dims[d];
    return f;
}

// The initial value of state-dict entry `name` at position `salt` (init_value in Python).
std::vector<double> init_value(tg_module *m, const std::string &name, tg_tensor *t, int salt) {
    std::vector<double> u = uniform(tg_numel(t), (uint64_t)salt);
    size_t dot = name.rfind('.');
    std::string leaf = dot == std::string::npos ? name : name.substr(dot + 1);
    std::string prefix = name.substr(0, name.size() - leaf.size());
    tg_tensor *weight = tg_module_get(m, (prefix + "weight").c_str());
    int ndim = tg_shape_of(t).ndim;
    double scale = 0;
    if (leaf == "running_mean") {
        for (double &v : u) v = 0.1 * v;
    } else if (leaf == "running_var") {
        for (double &v : u) v = 1.25 + 0.25 * v;
    } else if (leaf == "weight" && ndim == 1) { // BatchNorm's gamma
        for (double &v : u) v = 1.0 + 0.125 * v;
    } else if (leaf == "bias" && weight && tg_shape_of(weight).ndim == 1) { // BatchNorm's beta
        for (double &v : u) v = 0.1 * v;
    } else {
        scale = 1.0 / std::sqrt((double)fan_in(leaf == "bias" ? weight : t));
        for (double &v : u) v = v * scale;
    }
    return u;
}

// Batch `step` of the inputs: [8, 1, 28, 28] uniform in [-1, 1), and its labels.
tg_tensor *images(int step, tg_dtype dtype) {
    std::vector<double> v = uniform(kBatch * 28 * 28, 1000 + step);
    tg_tensor *x = tensor_f64(v, TG_SHAPE(kBatch, 1, 28, 28));
    return dtype == TG_FLOAT64 ? x : tg_cast(x, dtype);
}
tg_tensor *labels(int step) {
    std::vector<int64_t> y;
    for (int n = 0; n < kBatch; n++) y.push_back((7 * n + 3 * step) % 10);
    return tensor_i64(y, TG_SHAPE(kBatch));
}

// ---- models, as tutorials/02_mlp, 03_lenet and 04_batchnorm_gpu build them ----

tg_module *make_model(const std::string &net) {
    tg_linear_opts lin = {};
    tg_conv_opts conv = {};
    tg_pool_opts pool2 = {.kernel_size = 2};
    tg_batch_norm_opts bn = {};
    if (net == "mlp")
        return TG_NN_SEQUENTIAL(tg_nn_linear(784, 1024, lin), tg_nn_relu(), tg_nn_linear(1024, 512, lin), tg_nn_relu(),
                                tg_nn_linear(512, 256, lin), tg_nn_relu(), tg_nn_linear(256, 128, lin), tg_nn_relu(),
                                tg_nn_linear(128, 10, lin));
    if (net == "lenet")
        return TG_NN_SEQUENTIAL(tg_nn_conv2d(1, 20, 5, conv), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                                tg_nn_conv2d(20, 50, 5, conv), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                                tg_nn_flatten(1, -1), tg_nn_linear(800, 500, lin), tg_nn_relu(),
                                tg_nn_linear(500, 10, lin));
    if (net == "lenet_bn")
        return TG_NN_SEQUENTIAL(tg_nn_conv2d(1, 20, 5, conv), tg_nn_batch_norm2d(20, bn), tg_nn_relu(),
                                tg_nn_max_pool2d(pool2), tg_nn_conv2d(20, 50, 5, conv), tg_nn_batch_norm2d(50, bn),
                                tg_nn_relu(), tg_nn_max_pool2d(pool2), tg_nn_flatten(1, -1),
                                tg_nn_linear(800, 500, lin), tg_nn_relu(), tg_nn_linear(500, 10, lin));
    ADD_FAILURE() << "unknown model " << net;
    return nullptr;
}

// The model in float64 with the closed-form initial state, then cast to `dtype`
// (PyTorch: initial_model(make).to(dtype)).
tg_module *initial_model(const std::string &net, tg_dtype dtype) {
    tg_module *m = make_model(net);
    EXPECT_NE(m, nullptr) << tg_last_error();
    if (!m) return nullptr;
    EXPECT_EQ(tg_module_cast(m, TG_FLOAT64), TG_OK) << tg_last_error();
    int n = 0;
    const tg_named_tensor *state = tg_state_dict(m, &n);
    for (int i = 0; i < n; i++) {
        if (!tg_dtype_is_floating(tg_dtype_of(state[i].tensor))) continue; // num_batches_tracked stays 0
        std::vector<double> v = init_value(m, state[i].name, state[i].tensor, i);
        TG_SCOPE {
            tg_tensor *src = tensor_f64(v, tg_shape_of(state[i].tensor));
            TG_NO_GRAD { EXPECT_EQ(tg_copy_(state[i].tensor, src), TG_OK) << state[i].name << ": " << tg_last_error(); }
        }
    }
    if (dtype != TG_FLOAT64) {
        EXPECT_EQ(tg_module_cast(m, dtype), TG_OK) << tg_last_error();
    }
    return m;
}

tg_optim *make_optimizer(const std::string &config, tg_module *m) {
    if (config == "sgd_momentum") return tg_sgd(m, tg_sgd_opts{.lr = 0.05, .momentum = 0.9});
    if (config == "sgd_momentum_wd") return tg_sgd(m, tg_sgd_opts{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-2});
    if (config == "adam") return tg_adam(m, tg_adam_opts{.lr = 1e-3});
    if (config == "adamw") return tg_adamw(m, tg_adamw_opts{.lr = 1e-3}); // weight_decay 1e-2 (default)
    if (config == "rmsprop") return tg_rmsprop(m, tg_rmsprop_opts{.lr = 1e-4});
    ADD_FAILURE() << "unknown optimizer config " << config;
    return nullptr;
}

tg_tensor *forward(const std::string &net, tg_module *m, tg_tensor *x) {
    return tg_forward(m, net == "mlp" ? tg_reshape(x, TG_SHAPE(kBatch, 784)) : x);
}

std::vector<double> train(const std::string &net, tg_module *m, tg_optim *opt, tg_dtype dtype) {
    std::vector<double> losses;
    for (int step = 0; step < kSteps; step++) {
        TG_SCOPE {
            tg_tensor *loss = tg_cross_entropy(forward(net, m, images(step, dtype)), labels(step));
            EXPECT_NE(loss, nullptr) << tg_last_error();
            EXPECT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
            EXPECT_EQ(tg_optim_step(opt), TG_OK) << tg_last_error();
            tg_optim_zero_grad(opt);
            losses.push_back(loss ? tg_item(loss) : NAN);
        }
    }
    return losses;
}

// ---- comparisons ----

// [sum, sum of |v|, sum of v^2] with Neumaier summation (PyTorch's side: math.fsum).
std::vector<double> checksum(const std::vector<double> &v) {
    std::vector<double> out;
    for (int k = 0; k < 3; k++) {
        double s = 0, c = 0;
        for (double x : v) {
            double term = k == 0 ? x : k == 1 ? std::fabs(x) : x * x;
            double t = s + term;
            c += std::fabs(s) >= std::fabs(term) ? (s - t) + term : (term - t) + s;
            s = t;
        }
        out.push_back(s + c);
    }
    return out;
}

std::vector<double> samples(const std::vector<double> &v) {
    std::vector<double> out;
    int64_t n = (int64_t)v.size();
    for (int j = 0; j < kSamples; j++) out.push_back(v[(size_t)((j * (n - 1)) / (kSamples - 1))]);
    return out;
}

// |got - want| / scale, the largest over the vectors (size mismatch: infinity).
double max_rel(const std::vector<double> &got, const std::vector<double> &want, double scale_floor = 0) {
    if (got.size() != want.size()) return INFINITY;
    double worst = 0;
    for (size_t i = 0; i < got.size(); i++) {
        double d = std::fabs(got[i] - want[i]) / std::max(std::fabs(want[i]), scale_floor);
        if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d; // NaN counts as a failure
    }
    return worst;
}

::testing::AssertionResult within(const char *what, double diff, double tol) {
    if (diff <= tol) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what << ": relative difference " << diff << " > " << tol;
}

// Compares tensor `t` with PyTorch's checksum and samples under `key`; returns the
// largest relative difference. The sum is relative to the sum of |v| (it may
// cancel); samples are relative to max(|want|, the tensor's RMS).
double check_checksum(const std::string &key, tg_tensor *t, double rtol) {
    SCOPED_TRACE(key);
    if (!has_fx(key + ".stats")) {
        ADD_FAILURE() << "PyTorch has no state-dict entry " << key;
        return INFINITY;
    }
    std::vector<double> v = values(t);
    std::vector<double> got = checksum(v), want = fx(key + ".stats").data;
    if (want.size() != 3) {
        ADD_FAILURE() << "bad fixture " << key;
        return INFINITY;
    }
    double d_sum = std::fabs(got[0] - want[0]) / std::max(want[1], 1e-300);
    double d_abs = max_rel({got[1]}, {want[1]}, 1e-300);
    double d_sq = max_rel({got[2]}, {want[2]}, 1e-300);
    double rms = std::sqrt(want[2] / (double)std::max<size_t>(v.size(), 1));
    double d_samples = max_rel(samples(v), fx(key + ".samples").data, std::max(rms, 1e-300));
    EXPECT_TRUE(within("sum", d_sum, rtol)) << got[0] << " vs " << want[0];
    EXPECT_TRUE(within("sum |v|", d_abs, rtol)) << got[1] << " vs " << want[1];
    EXPECT_TRUE(within("sum v^2", d_sq, rtol)) << got[2] << " vs " << want[2];
    EXPECT_TRUE(within("sampled entries", d_samples, rtol));
    return std::max({d_sum, d_abs, d_sq, d_samples});
}

// The conv biases that feed a BatchNorm have no effect on the training loss: their
// true gradient is 0 and what backward gives is rounding noise (~1e-17, different
// in each framework). Adam, AdamW and RMSprop divide it by sqrt(v) + eps with
// sqrt(v) << eps, so the noise moves these biases by ~lr * noise / eps, and through
// them BatchNorm's running_mean and the eval-mode output (observed: up to 5.4e-10
// relative). Those entries get the float64 bound, 1e-8; the rest, 1e-10.
bool noise_amplified(const std::string &net, const std::string &config) {
    return net == "lenet_bn" && (config == "adam" || config == "adamw" || config == "rmsprop");
}
double state_rtol(const std::string &net, const std::string &config, const std::string &name) {
    bool affected = name == "0.bias" || name == "4.bias" || name.find("running_mean") != std::string::npos;
    return noise_amplified(net, config) && affected ? 1e-8 : kRtol64;
}

bool verbose() { return std::getenv("TG_TRAINING_MODELS_VERBOSE") != nullptr; }

void check_against_pytorch(const std::string &net, const std::string &config) {
    SCOPED_TRACE(net + " / " + config);
    const std::string prefix = net + "." + config;
    long live_before = tg_live_tensors();

    // float64: losses, every state-dict entry, the eval-mode output.
    tg_module *m = initial_model(net, TG_FLOAT64);
    ASSERT_NE(m, nullptr);
    tg_optim *opt = make_optimizer(config, m);
    ASSERT_NE(opt, nullptr) << tg_last_error();
    std::vector<double> losses = train(net, m, opt, TG_FLOAT64);
    double d_loss = max_rel(losses, fx(prefix + ".f64.losses").data);
    EXPECT_TRUE(within("float64 losses", d_loss, kRtol64));

    int n = 0;
    const tg_named_tensor *state = tg_state_dict(m, &n);
    EXPECT_EQ(n, (int)fx(net + ".state_count").data.at(0)) << "state-dict entries differ from PyTorch's";
    double d_state = 0, d_stats = 0, d_noise = 0; // d_noise: the entries of state_rtol's 1e-8
    for (int i = 0; i < n; i++) {
        std::string name = state[i].name;
        double d = check_checksum(prefix + ".f64.final." + name, state[i].tensor, state_rtol(net, config, name));
        if (state_rtol(net, config, name) != kRtol64) d_noise = std::max(d_noise, d);
        else if (name.find("running_") != std::string::npos) d_stats = std::max(d_stats, d);
        else d_state = std::max(d_state, d);
        if (name.find("num_batches_tracked") != std::string::npos) {
            EXPECT_EQ(values(state[i].tensor), std::vector<double>{(double)kSteps}) << name;
        }
    }

    double d_eval = INFINITY;
    TG_SCOPE {
        tg_eval(m);
        tg_tensor *out = forward(net, m, images(kSteps, TG_FLOAT64));
        EXPECT_NE(out, nullptr) << tg_last_error(); // (no ASSERT inside a scope: it would stay open)
        const FixtureTensor &want = fx(prefix + ".f64.eval_out");
        EXPECT_EQ(dims(out), want.shape);
        // Relative to the outputs' scale: an output near zero is a difference of larger terms.
        double scale = 0;
        for (double v : want.data) scale = std::max(scale, std::fabs(v));
        d_eval = max_rel(values(out), want.data, scale);
        EXPECT_TRUE(within("eval-mode output", d_eval, noise_amplified(net, config) ? 1e-8 : kRtol64));
    }
    tg_optim_free(opt);
    tg_module_free(m);
    EXPECT_EQ(tg_live_tensors(), live_before) << "a trained model and its optimizer must free every tensor";

    // float32: the losses.
    m = initial_model(net, TG_FLOAT32);
    ASSERT_NE(m, nullptr);
    opt = make_optimizer(config, m);
    ASSERT_NE(opt, nullptr) << tg_last_error();
    std::vector<double> losses32 = train(net, m, opt, TG_FLOAT32);
    double d_loss32 = max_rel(losses32, fx(prefix + ".f32.losses").data);
    EXPECT_TRUE(within("float32 losses", d_loss32, kRtol32));
    tg_optim_free(opt);
    tg_module_free(m);

    if (verbose())
        std::printf("[max rel diff] %-9s %-16s f64: loss %.1e params %.1e bn stats %.1e noise-fed %.1e eval %.1e;"
                    " f32 loss %.1e\n",
                    net.c_str(), config.c_str(), d_loss, d_state, d_stats, d_noise, d_eval, d_loss32);
}

} // namespace

class TrainingModelsTest : public TgTest {};

// The C generator reproduces Python's: the inputs, labels and every model's initial
// state (names and values) agree to the last bit, up to the checksums' own rounding.
TEST_F(TrainingModelsTest, GeneratorMatchesPython) {
    for (int step = 0; step <= kSteps; step++) {
        TG_SCOPE {
            EXPECT_LE(check_checksum("data.x." + std::to_string(step), images(step, TG_FLOAT64), 1e-15), 1e-15);
            EXPECT_EQ(values(labels(step)), fx("data.y." + std::to_string(step)).data);
        }
    }
    for (const char *net : {"mlp", "lenet", "lenet_bn"}) {
        tg_module *m = initial_model(net, TG_FLOAT64);
        ASSERT_NE(m, nullptr);
        int n = 0;
        const tg_named_tensor *state = tg_state_dict(m, &n);
        EXPECT_EQ(n, (int)fx(std::string(net) + ".state_count").data.at(0)) << net;
        for (int i = 0; i < n; i++)
            EXPECT_LE(check_checksum(std::string(net) + ".init." + state[i].name, state[i].tensor, 1e-15), 1e-15);
        tg_module_free(m);
    }
}

#define PYTORCH_CASE(net, config) \
    TEST_F(TrainingModelsTest, net##_##config) { check_against_pytorch(#net, #config); }

PYTORCH_CASE(mlp, sgd_momentum)
PYTORCH_CASE(mlp, sgd_momentum_wd)
PYTORCH_CASE(mlp, adam)
PYTORCH_CASE(mlp, adamw)
PYTORCH_CASE(mlp, rmsprop)
PYTORCH_CASE(lenet, sgd_momentum)
PYTORCH_CASE(lenet, sgd_momentum_wd)
PYTORCH_CASE(lenet, adam)
PYTORCH_CASE(lenet, adamw)
PYTORCH_CASE(lenet, rmsprop)
PYTORCH_CASE(lenet_bn, sgd_momentum)
PYTORCH_CASE(lenet_bn, sgd_momentum_wd)
PYTORCH_CASE(lenet_bn, adam)
PYTORCH_CASE(lenet_bn, adamw)
PYTORCH_CASE(lenet_bn, rmsprop)
