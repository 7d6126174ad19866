// float16 and bfloat16 (core/lowp.h, core/dtype.h): conversions bit for bit against
// PyTorch (tests/fixtures/gen_lowp.py), casts from float64, promotion, ops computed in
// float32 and rounded once (values and gradients against PyTorch's bf16 / f16 CPU
// kernels), printing, safetensors F16/BF16, and the refusals (a kernel that has no
// low-precision path, mixed dtypes, custom ops that did not opt in).
#include <cstring>
#include <functional>

#include "core/denormal.h"
#include "core/lowp.h"
#include "test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &lowp_fixtures() {
    static const std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/lowp.txt");
    return fx;
}
const FixtureTensor &fx(const std::string &name) { return fixture_tensor(lowp_fixtures(), name); }

float float_of_bits(int64_t b) {
    uint32_t u = (uint32_t)b;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

bool is_nan_bits16(uint16_t b, bool half) {
    return half ? (b & 0x7C00) == 0x7C00 && (b & 0x3FF) : (b & 0x7F80) == 0x7F80 && (b & 0x7F);
}

std::vector<uint16_t> bits16(tg_tensor *t) {
    std::vector<uint16_t> out((size_t)tg_numel(t));
    EXPECT_EQ(tg_copy_to_host(t, out.data(), out.size() * 2), TG_OK) << tg_last_error();
    return out;
}

using LowTest = TgTest;

TEST_F(LowTest, Float32ToLowMatchesPyTorchBitForBit) {
    const FixtureTensor &in = fx("conv_f32_bits"), &h = fx("conv_f32_to_f16"), &b = fx("conv_f32_to_bf16");
    ASSERT_EQ(in.data.size(), h.data.size());
    ASSERT_GT(in.data.size(), 3000u);
    std::vector<float> xs;
    int nans = 0;
    for (size_t i = 0; i < in.data.size(); i++) {
        float x = float_of_bits((int64_t)in.data[i]);
        xs.push_back(x);
        EXPECT_EQ(tg_float_to_half_bits(x), (uint16_t)h.data[i]) << "element " << i << " = " << x;
        uint16_t want_b = (uint16_t)b.data[i];
        if (std::isnan(x)) {
            nans++;
            EXPECT_TRUE(is_nan_bits16(tg_float_to_bf16_bits(x), false)) << i;
            EXPECT_TRUE(is_nan_bits16(want_b, false)) << i;
        } else {
            EXPECT_EQ(tg_float_to_bf16_bits(x), want_b) << "element " << i << " = " << x;
        }
    }
    EXPECT_GT(nans, 3);
    // The tensor cast runs the same conversion.
    tg_tensor *t = tensor_f32(xs, TG_SHAPE((int64_t)xs.size()));
    std::vector<uint16_t> th = bits16(tg_cast(t, TG_FLOAT16)), tb = bits16(tg_cast(t, TG_BFLOAT16));
    for (size_t i = 0; i < xs.size(); i++) {
        EXPECT_EQ(th[i], (uint16_t)h.data[i]) << i;
        if (!std::isnan(xs[i])) {
            EXPECT_EQ(tb[i], (uint16_t)b.data[i]) << i;
        }
    }
}

TEST_F(LowTest, LowToFloat32MatchesPyTorch) {
    const FixtureTensor &in = fx("conv_f16_bits"), &out = fx("conv_f16_to_f32");
    ASSERT_GT(in.data.size(), 9000u);
    for (size_t i = 0; i < in.data.size(); i++) {
        float f = tg_half_bits_to_float((uint16_t)in.data[i]);
        uint32_t u;
        std::memcpy(&u, &f, sizeof u);
        EXPECT_EQ(u, (uint32_t)(int64_t)out.data[i]) << "half bits " << in.data[i];
    }
    // Every float16 and bfloat16 comes back unchanged through float32 (NaNs stay NaN).
    for (uint32_t b = 0; b < 65536; b++) {
        uint16_t h = (uint16_t)b;
        uint16_t h2 = tg_float_to_half_bits(tg_half_bits_to_float(h));
        uint16_t b2 = tg_float_to_bf16_bits(tg_bf16_bits_to_float(h));
        if (is_nan_bits16(h, true)) EXPECT_TRUE(is_nan_bits16(h2, true)) << b;
        else EXPECT_EQ(h2, h) << b;
        if (is_nan_bits16(h, false)) EXPECT_TRUE(is_nan_bits16(b2, false)) << b;
        else EXPECT_EQ(b2, h) << b;
    }
}

TEST_F(LowTest, Float64CastsRoundThroughFloat32AsPyTorch) {
    const FixtureTensor &d = fx("conv_f64");
    tg_tensor *x = d.make(TG_FLOAT64);
    EXPECT_EQ(values(tg_cast(x, TG_FLOAT16)), fx("conv_f64_to_f16").data);
    EXPECT_EQ(values(tg_cast(x, TG_BFLOAT16)), fx("conv_f64_to_bf16").data);
    // 1 + 2^-11 + 2^-40 rounds to 1 + 2^-11 in float32, a tie that float16 breaks to 1.
    EXPECT_EQ(values(tg_cast(x, TG_FLOAT16))[0], 1.0);
    // And back: exact.
    tg_tensor *h = tg_cast(x, TG_BFLOAT16);
    EXPECT_EQ(values(tg_cast(h, TG_FLOAT64)), values(h));
    EXPECT_EQ(tg_item(tg_cast(tensor_f64({0.1}, TG_SHAPE(1)), TG_BFLOAT16)), 0.10009765625);
}

// bfloat16 and float16 to integers truncate toward zero, as PyTorch 1.13's .to(torch.int64)
// gives [0, -1, 1, 2, 0, 100, -3] for these values. The int64 path read a low-precision
// source as a bool byte (0.4 gave 205, the low byte of its bits): found by the op fuzzer.
TEST_F(LowTest, LowToIntegerTruncatesAsPyTorch) {
    const std::vector<double> want = {0, -1, 1, 2, 0, 100, -3};
    for (tg_dtype low : {TG_BFLOAT16, TG_FLOAT16}) {
        tg_tensor *x = tg_cast(tensor_f32({0.4f, -1.7f, 1.9f, 2.5f, -0.5f, 100.0f, -3.99f}, TG_SHAPE(7)), low);
        for (tg_dtype to : {TG_INT64, TG_INT32}) {
            EXPECT_EQ(values(tg_cast(x, to)), want) << tg_dtype_name(low) << " to " << tg_dtype_name(to);
            EXPECT_EQ(values(tg_cast(tg_select(x, 0, 1), to)), std::vector<double>({-1})); // 0-dim
        }
        EXPECT_EQ(values(tg_cast(x, TG_BOOL)), std::vector<double>(7, 1));
    }
}

TEST_F(LowTest, PromotionMatchesPyTorch) {
    const FixtureTensor &p = fx("promote");
    ASSERT_EQ(p.shape, (std::vector<int64_t>{64, 3}));
    for (size_t r = 0; r < 64; r++) {
        tg_dtype a = (tg_dtype)(int)p.data[3 * r], b = (tg_dtype)(int)p.data[3 * r + 1];
        EXPECT_EQ(tg_promote_types(a, b), (tg_dtype)(int)p.data[3 * r + 2])
            << tg_dtype_name(a) << " with " << tg_dtype_name(b);
    }
    // torch.result_type with a 0-dim second operand, through tg_add (bool + bool is
    // not arithmetic and left out by the script; uint8 has no arithmetic kernels, so
    // its rows are checked through promotion only).
    const FixtureTensor &rt = fx("result_type");
    int checked = 0;
    for (size_t r = 0; r < rt.data.size() / 3; r++) {
        tg_dtype a = (tg_dtype)(int)rt.data[3 * r], b = (tg_dtype)(int)rt.data[3 * r + 1];
        tg_dtype want = (tg_dtype)(int)rt.data[3 * r + 2];
        if (a == TG_UINT8 || b == TG_UINT8 || want == TG_UINT8 || want == TG_BOOL) continue;
        TG_SCOPE {
            tg_tensor *x = tg_ones(TG_SHAPE(2), tg_opts{a}), *y = tg_ones(TG_SCALAR_SHAPE, tg_opts{b});
            tg_tensor *z = tg_add(x, y);
            ASSERT_NE(z, nullptr) << tg_dtype_name(a) << " + " << tg_dtype_name(b) << ": " << tg_last_error();
            EXPECT_EQ(tg_dtype_of(z), want) << tg_dtype_name(a) << " + 0-dim " << tg_dtype_name(b);
            EXPECT_EQ(values(z), (std::vector<double>{2, 2}));
            checked++;
        }
    }
    EXPECT_GT(checked, 30);
}

TEST_F(LowTest, MixedDtypesPromote) {
    tg_tensor *h = fx("mixed_f16").make(TG_FLOAT16), *b = fx("mixed_bf16").make(TG_BFLOAT16);
    tg_tensor *s = tg_add(h, b);
    ASSERT_NE(s, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(s), TG_FLOAT32);
    EXPECT_TRUE(tensor_near(s, fx("mixed_f16_plus_bf16").data, 0));
    tg_tensor *t = tg_add(b, tg_full(TG_SCALAR_SHAPE, 0.3, tg_opts{TG_FLOAT32}));
    EXPECT_EQ(tg_dtype_of(t), TG_BFLOAT16);
    EXPECT_TRUE(tensor_near(t, fx("mixed_bf16_plus_f32_scalar0d").data, 0));
    // Integer with low precision gives low precision; float32 with it gives float32.
    EXPECT_EQ(tg_dtype_of(tg_mul(tg_ones(TG_SHAPE(4), tg_opts{TG_INT64}), b)), TG_BFLOAT16);
    EXPECT_EQ(tg_dtype_of(tg_mul(tg_ones(TG_SHAPE(4), tg_opts{TG_FLOAT32}), h)), TG_FLOAT32);
}

// ---- ops against PyTorch's bf16 / f16 CPU kernels ----

using Op = std::function<tg_tensor *(const std::vector<tg_tensor *> &)>;

// The largest |value|: tolerances scale with it, since PyTorch's kernels round some
// intermediates (partial sums of a GEMM, a layer norm's statistics) to the dtype,
// which moves a result that cancels by an ulp of its terms, not of itself.
double max_abs(const std::vector<double> &v) {
    double m = 0;
    for (double x : v) m = std::isfinite(x) && std::fabs(x) > m ? std::fabs(x) : m;
    return m;
}

// Runs `op` on the fixture's <dt> inputs: the result must be exactly the float32
// computation rounded once to dt (when round_once), and within two ulps (of the
// largest value) of PyTorch's own <dt> kernels, forward and gradients.
void check_op(const std::string &name, tg_dtype dt, const Op &op, tg_dtype out_dtype, bool round_once) {
    const std::string tag = dt == TG_BFLOAT16 ? "bf16" : "f16";
    SCOPED_TRACE(name + " in " + tag);
    double ulps = dt == TG_BFLOAT16 ? 2.0 / 256 : 2.0 / 2048;
    const auto &all = lowp_fixtures();
    TG_SCOPE {
        std::vector<tg_tensor *> in, in32;
        for (int i = 0;; i++) {
            auto it = all.find(name + "_" + tag + "_in" + std::to_string(i));
            if (it == all.end()) break;
            bool f = it->second.dtype == "float64";
            in.push_back(it->second.make(f ? dt : TG_INT64, f));
            in32.push_back(it->second.make(f ? TG_FLOAT32 : TG_INT64));
        }
        ASSERT_FALSE(in.empty());
        tg_tensor *out = op(in);
        ASSERT_NE(out, nullptr) << tg_last_error();
        EXPECT_EQ(tg_dtype_of(out), out_dtype);
        const FixtureTensor &want = fx(name + "_" + tag + "_out");
        EXPECT_EQ(dims(out), want.shape);
        EXPECT_TRUE(tensor_near(out, want.data, ulps * max_abs(want.data), ulps)) << "forward";
        if (round_once) {
            EXPECT_EQ(values(out), values(tg_cast(op(in32), out_dtype))) << "rounded once";
        }
        auto w = all.find(name + "_" + tag + "_w");
        if (w == all.end()) return;
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(out, w->second.make(out_dtype)))), TG_OK) << tg_last_error();
        for (size_t i = 0; i < in.size(); i++) {
            auto g = all.find(name + "_" + tag + "_grad" + std::to_string(i));
            if (g == all.end()) continue;
            tg_tensor *grad = tg_grad(in[i]);
            ASSERT_NE(grad, nullptr) << "input " << i;
            EXPECT_EQ(tg_dtype_of(grad), dt) << "the gradient has the input's dtype";
            EXPECT_TRUE(tensor_near(grad, g->second.data, ulps * max_abs(g->second.data), ulps))
                << "gradient of input " << i;
        }
    }
}

struct OpCase {
    const char *name;
    Op op;
    bool round_once = true; /* one op computed in float32 (mean is a sum, rounded, then divided, as PyTorch's) */
};

const std::vector<OpCase> &op_cases() {
    static const std::vector<OpCase> cases = {
        {"add", [](auto &in) { return tg_add(in[0], in[1]); }},
        {"mul", [](auto &in) { return tg_mul(in[0], in[1]); }},
        {"div", [](auto &in) { return tg_div(in[0], in[1]); }},
        {"mul_scalar", [](auto &in) { return tg_mul_scalar(in[0], 0.1); }},
        {"add_scalar", [](auto &in) { return tg_add_scalar(in[0], 1.7); }},
        {"exp", [](auto &in) { return tg_exp(in[0]); }},
        {"log", [](auto &in) { return tg_log(in[0]); }},
        {"sigmoid", [](auto &in) { return tg_sigmoid(in[0]); }},
        {"tanh", [](auto &in) { return tg_tanh(in[0]); }},
        {"relu", [](auto &in) { return tg_relu(in[0]); }},
        {"gelu", [](auto &in) { return tg_gelu(in[0]); }},
        {"sum", [](auto &in) { return tg_sum(in[0]); }},
        {"mean", [](auto &in) { return tg_mean(in[0]); }, false},
        {"amax",
         [](auto &in) {
             int d = 1;
             return tg_amax(in[0], &d, 1, false);
         }},
        {"matmul", [](auto &in) { return tg_matmul(in[0], in[1]); }},
        {"linear", [](auto &in) { return tg_linear(in[0], in[1], in[2]); }},
        {"softmax", [](auto &in) { return tg_softmax(in[0], 1); }},
        {"log_softmax", [](auto &in) { return tg_log_softmax(in[0], 1); }},
        {"where", [](auto &in) { return tg_where(tg_gt_scalar(in[0], 0), in[0], in[1]); }},
        {"cat", [](auto &in) { return tg_cat(in.data(), 2, 0); }},
        {"transpose_contiguous", [](auto &in) { return tg_contiguous(tg_transpose(in[0], 0, 1)); }},
        {"cross_entropy", [](auto &in) { return tg_cross_entropy(in[0], in[1]); }},
        {"layer_norm", [](auto &in) { return tg_layer_norm(in[0], 1, in[1], in[2], 1e-5); }},
        {"conv2d", [](auto &in) { return tg_conv2d(in[0], in[1], in[2], tg_conv_opts{.padding = 1}); }},
        {"max_pool2d", [](auto &in) { return tg_max_pool2d(in[0], tg_pool_opts{.kernel_size = 2}, nullptr); }},
    };
    return cases;
}

TEST_F(LowTest, OpsMatchPyTorchInBfloat16) {
    for (const OpCase &c : op_cases()) check_op(c.name, TG_BFLOAT16, c.op, TG_BFLOAT16, c.round_once);
    check_op(
        "cast_f32", TG_BFLOAT16, [](auto &in) { return tg_cast(in[0], TG_FLOAT32); }, TG_FLOAT32, true);
}

TEST_F(LowTest, OpsMatchPyTorchInFloat16) {
    for (const OpCase &c : op_cases()) check_op(c.name, TG_FLOAT16, c.op, TG_FLOAT16, c.round_once);
    check_op(
        "cast_f32", TG_FLOAT16, [](auto &in) { return tg_cast(in[0], TG_FLOAT32); }, TG_FLOAT32, true);
}

TEST_F(LowTest, MixedBatchNormAsPyTorch) {
    tg_tensor *x = fx("bn_mixed_x").make(TG_BFLOAT16, true);
    tg_tensor *w = fx("bn_mixed_w").make(TG_FLOAT32, true), *b = fx("bn_mixed_b").make(TG_FLOAT32, true);
    tg_tensor *rm = tg_zeros(TG_SHAPE(3), tg_opts{}), *rv = tg_ones(TG_SHAPE(3), tg_opts{});
    tg_tensor *y = tg_batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(y), TG_BFLOAT16);
    EXPECT_TRUE(tensor_near(y, fx("bn_mixed_out").data, 0.02, 0.01));
    EXPECT_EQ(tg_dtype_of(rm), TG_FLOAT32);
    EXPECT_TRUE(tensor_near(rm, fx("bn_mixed_running_mean").data, 1e-6, 1e-5));
    EXPECT_TRUE(tensor_near(rv, fx("bn_mixed_running_var").data, 1e-6, 1e-5));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, fx("bn_mixed_wt").make(TG_BFLOAT16)))), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(tg_grad(x)), TG_BFLOAT16);
    EXPECT_EQ(tg_dtype_of(tg_grad(w)), TG_FLOAT32);
    EXPECT_TRUE(tensor_near(tg_grad(x), fx("bn_mixed_grad_x").data, 0.03, 0.02));
    EXPECT_TRUE(tensor_near(tg_grad(w), fx("bn_mixed_grad_w").data, 0.02, 0.01));
    EXPECT_TRUE(tensor_near(tg_grad(b), fx("bn_mixed_grad_b").data, 0.02, 0.01));
}

// The CPU's mixed batch norm keeps its bfloat16 input (not a float32 copy) for backward
// and widens it there: bit for bit the float32 batch norm of the widened input rounded
// once, forward and gradients (fused backward, and the composed one under
// create_graph); float32 parameters of another shape are refused. The bfloat16 kernels
// (ops/cpu/norm_bf16.c) run on rows with a tail (5x5) and, split over channels, without (32x32).
TEST_F(LowTest, MixedBatchNormEqualsTheFloat32OneOnWidenedInput) {
    for (bool create_graph : {false, true})
        for (tg_shape shape : {TG_SHAPE(4, 3, 5, 5), TG_SHAPE(16, 3, 32, 32)}) {
            tg_tensor *x32 = tg_cast(tg_cast(tg_randn(shape, tg_opts{}), TG_BFLOAT16), TG_FLOAT32);
            tg_tensor *x = tg_requires_grad_(tg_cast(x32, TG_BFLOAT16), true),
                      *xw = tg_requires_grad_(tg_clone(x32), true);
            tg_tensor *w = tg_requires_grad_(tg_randn(TG_SHAPE(3), tg_opts{}), true);
            tg_tensor *b = tg_requires_grad_(tg_randn(TG_SHAPE(3), tg_opts{}), true);
            tg_tensor *w2 = tg_requires_grad_(tg_clone(tg_detach(w)), true),
                      *b2 = tg_requires_grad_(tg_clone(tg_detach(b)), true);
            tg_tensor *rm = tg_zeros(TG_SHAPE(3), tg_opts{}), *rv = tg_ones(TG_SHAPE(3), tg_opts{});
            tg_tensor *rm2 = tg_zeros(TG_SHAPE(3), tg_opts{}), *rv2 = tg_ones(TG_SHAPE(3), tg_opts{});
            tg_tensor *y = tg_batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
            tg_tensor *y32 = tg_batch_norm(xw, rm2, rv2, w2, b2, true, 0.1, 1e-5);
            ASSERT_NE(y, nullptr) << tg_last_error();
            ASSERT_NE(y32, nullptr) << tg_last_error();
            EXPECT_EQ(bits16(y), bits16(tg_cast(y32, TG_BFLOAT16)));
            EXPECT_EQ(values(rm), values(rm2));
            EXPECT_EQ(values(rv), values(rv2));
            tg_tensor *up = tg_randn(shape, tg_opts{});
            tg_backward_opts o{};
            o.create_graph = create_graph;
            ASSERT_EQ(tg_backward_opts_run(tg_sum(tg_mul(tg_cast(y, TG_FLOAT32), up)), o), TG_OK) << tg_last_error();
            ASSERT_EQ(tg_backward_opts_run(tg_sum(tg_mul(tg_cast(tg_cast(y32, TG_BFLOAT16), TG_FLOAT32), up)), o),
                      TG_OK)
                << tg_last_error();
            EXPECT_EQ(tg_dtype_of(tg_grad(x)), TG_BFLOAT16);
            EXPECT_EQ(bits16(tg_grad(x)), bits16(tg_cast(tg_grad(xw), TG_BFLOAT16))) << "create_graph " << create_graph;
            EXPECT_EQ(values(tg_grad(w)), values(tg_grad(w2))) << "create_graph " << create_graph;
            EXPECT_EQ(values(tg_grad(b)), values(tg_grad(b2))) << "create_graph " << create_graph;
            for (tg_tensor *leaf : {x, xw, w, w2, b, b2}) tg_zero_grad(leaf); /* graphs of create_graph's gradients */
        }
    tg_clear_error();
    EXPECT_EQ(tg_batch_norm(tg_cast(tg_randn(TG_SHAPE(2, 3, 2), tg_opts{}), TG_BFLOAT16), nullptr, nullptr,
                            tg_ones(TG_SHAPE(4), tg_opts{}), nullptr, true, 0.1, 1e-5),
              nullptr);
    EXPECT_ERROR_CONTAINS("tg_batch_norm: expected weight of shape [3]");
}

// bfloat16 max pooling on the CPU (ops/pool.c: the float32 kernel on one widened plane at a
// time) is bit for bit the float32 op on the widened input, rounded once: values, indices
// and the input gradient, with overlapping windows (gradients added), padding, the 2x2
// fast path, a NaN, and a call split over planes.
TEST_F(LowTest, Bfloat16MaxPoolIsTheFloat32OneRoundedOnce) {
    struct Case {
        tg_shape shape;
        tg_pool_opts opts;
    };
    for (const Case &c : {Case{TG_SHAPE(2, 3, 9, 9), tg_pool_opts{.kernel_size = 3, .stride = 2, .padding = 1}},
                          Case{TG_SHAPE(2, 3, 8, 8), tg_pool_opts{.kernel_size = 2}},
                          Case{TG_SHAPE(64, 20, 24, 24), tg_pool_opts{.kernel_size = 2}}}) {
        SCOPED_TRACE(c.shape.dims[0]);
        tg_tensor *x32 = tg_cast(tg_cast(tg_randn(c.shape, tg_opts{}), TG_BFLOAT16), TG_FLOAT32);
        ASSERT_EQ(tg_fill_(tg_narrow(tg_narrow(tg_narrow(tg_narrow(x32, 0, 1, 1), 1, 2, 1), 2, 3, 1), 3, 4, 1), NAN),
                  TG_OK)
            << tg_last_error();
        tg_tensor *x = tg_requires_grad_(tg_cast(x32, TG_BFLOAT16), true), *xw = tg_requires_grad_(tg_clone(x32), true);
        tg_tensor *i = nullptr, *iw = nullptr;
        tg_tensor *y = tg_max_pool2d(x, c.opts, &i), *yw = tg_max_pool2d(xw, c.opts, &iw);
        ASSERT_NE(y, nullptr) << tg_last_error();
        EXPECT_EQ(tg_dtype_of(y), TG_BFLOAT16);
        EXPECT_EQ(bits16(y), bits16(tg_cast(yw, TG_BFLOAT16)));
        EXPECT_EQ(values(i), values(iw));
        tg_tensor *up = tg_cast(tg_randn(tg_shape_of(y), tg_opts{}), TG_BFLOAT16);
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(tg_cast(y, TG_FLOAT32), tg_cast(up, TG_FLOAT32)))), TG_OK);
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(yw, tg_cast(up, TG_FLOAT32)))), TG_OK);
        EXPECT_EQ(tg_dtype_of(tg_grad(x)), TG_BFLOAT16);
        EXPECT_EQ(bits16(tg_grad(x)), bits16(tg_cast(tg_grad(xw), TG_BFLOAT16)));
    }
}

TEST_F(LowTest, CastGradientComesBackInTheInputDtype) {
    tg_tensor *w = tg_requires_grad_(tensor_f32({0.5f, -1.25f, 3.0f}, TG_SHAPE(3)), true);
    tg_tensor *y = tg_mul_scalar(tg_cast(w, TG_BFLOAT16), 3.0);
    EXPECT_EQ(tg_dtype_of(y), TG_BFLOAT16);
    ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(tg_grad(w)), TG_FLOAT32);
    EXPECT_EQ(values(tg_grad(w)), (std::vector<double>{3, 3, 3}));
}

TEST_F(LowTest, InPlaceOpsRoundOnce) {
    tg_tensor *x = tg_cast(tensor_f32({1.0f, 2.0f, -3.0f}, TG_SHAPE(3)), TG_BFLOAT16);
    ASSERT_EQ(tg_mul_scalar_(x, 1.0 / 3), TG_OK) << tg_last_error();
    // bf16(float(1) * float(1/3)) etc.
    EXPECT_EQ(values(x), (std::vector<double>{0.333984375, 0.66796875, -1.0}));
    ASSERT_EQ(tg_add_(x, tg_ones(TG_SHAPE(3), tg_opts{TG_BFLOAT16})), TG_OK) << tg_last_error();
    EXPECT_EQ(values(x), (std::vector<double>{1.3359375, 1.671875, 0.0})); /* 1.66796875: a tie, to even */
    ASSERT_EQ(tg_fill_(x, 0.1), TG_OK);
    EXPECT_EQ(values(x)[2], 0.10009765625);
}

// The CPU computes low-precision elementwise ops block by block in float32 stack
// buffers (ops/elementwise.c): rows longer than a block, transposed and broadcast
// operands, a float32 operand, comparisons, NaN and Inf, in-place writes, both dtypes:
// bit for bit the float32 computation of the widened values rounded once.
TEST_F(LowTest, ElementwiseBlocksAreTheFloat32ComputationRoundedOnce) {
    for (tg_dtype dt : {TG_BFLOAT16, TG_FLOAT16}) {
        tg_tensor *a32 = tg_mul_scalar(tg_randn(TG_SHAPE(37, 300), tg_opts{}), 3.0);
        tg_tensor *b32 = tg_randn(TG_SHAPE(300, 37), tg_opts{});
        tg_tensor *row32 = tg_randn(TG_SHAPE(300), tg_opts{});
        float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 65504.0f, 1e-8f};
        tg_tensor *s32 = tensor_f32(std::vector<float>(special, special + 7), TG_SHAPE(7));
        tg_tensor *a = tg_cast(a32, dt), *bt = tg_transpose(tg_cast(b32, dt), 0, 1), *row = tg_cast(row32, dt);
        tg_tensor *s = tg_cast(s32, dt);
        auto wide = [](tg_tensor *t) { return tg_cast(t, TG_FLOAT32); };
        auto same = [&](tg_tensor *got, tg_tensor *want32, const char *what) {
            ASSERT_NE(got, nullptr) << what << ": " << tg_last_error();
            ASSERT_EQ(tg_dtype_of(got), dt) << what;
            EXPECT_EQ(bits16(tg_contiguous(got)), bits16(tg_cast(want32, dt))) << what << " " << tg_dtype_name(dt);
        };
        same(tg_exp(a), tg_exp(wide(a)), "exp, 11100 contiguous");
        same(tg_relu(bt), tg_relu(wide(bt)), "relu, transposed");
        same(tg_mul(a, bt), tg_mul(wide(a), wide(bt)), "mul, contiguous by transposed");
        same(tg_add(a, row), tg_add(wide(a), wide(row)), "add, row broadcast");
        same(tg_sub(row, tg_narrow(a, 0, 3, 1)), tg_sub(wide(row), wide(tg_narrow(a, 0, 3, 1))),
             "sub, [300] - [1, 300]");
        tg_tensor *k = tg_full(TG_SCALAR_SHAPE, 0.37, tg_opts{});
        /* the 0-dim float32 tensor takes a's dtype first (PyTorch's result_type) */
        same(tg_div(a, k), tg_div(wide(a), wide(tg_cast(k, dt))), "div by a float32 0-dim tensor");
        same(tg_mul_scalar(s, 3.0), tg_mul_scalar(wide(s), 3.0), "NaN, Inf, overflow, tiny");
        same(tg_sqrt(s), tg_sqrt(wide(s)), "sqrt of NaN, Inf, -Inf, zeros");
        tg_tensor *gt = tg_gt(a, bt), *gt32 = tg_gt(wide(a), wide(bt));
        ASSERT_NE(gt, nullptr) << tg_last_error();
        EXPECT_EQ(tg_dtype_of(gt), TG_BOOL);
        EXPECT_EQ(tg_item(tg_sum(tg_cast(tg_eq(gt, gt32), TG_FLOAT32))), 37.0 * 300)
            << "comparison " << tg_dtype_name(dt);
        tg_tensor *inplace = tg_clone(a), *inplace32 = tg_mul(wide(a), wide(bt));
        ASSERT_EQ(tg_mul_(inplace, bt), TG_OK) << tg_last_error();
        same(inplace, inplace32, "mul_ in place");
    }
}

// Sums of bfloat16 and float16 read the values as they are instead of a widened copy
// (ops/reduce.c): bit for bit the float32 sum of the widened tensor rounded once, for
// each layout of the kernel (leading dims as a bias gradient's, a last dim, a strided
// dim, two dims at once, all of a transposed view, all of a contiguous run), with NaN,
// Inf and subnormals, subnormals kept and flushed.
TEST_F(LowTest, LowPrecisionSumsAreTheWidenedSumRoundedOnce) {
    bool was = tg_get_flush_denormal();
    for (tg_dtype dt : {TG_BFLOAT16, TG_FLOAT16})
        for (bool flush : {false, true}) {
            tg_set_flush_denormal(flush);
            SCOPED_TRACE(testing::Message() << tg_dtype_name(dt) << ", flush " << flush);
            tg_manual_seed(11);
            tg_tensor *x32 = tg_mul_scalar(tg_randn(TG_SHAPE(64, 300), tg_opts{}), 5.0);
            float special[] = {NAN, INFINITY, 1e-39f, -3e-41f, 6e-8f};
            for (int i = 0; i < 5; i++)
                ASSERT_EQ(tg_fill_(tg_narrow(tg_narrow(x32, 0, 7 * i, 1), 1, 41 * i + 3, 1), special[i]), TG_OK);
            tg_tensor *x = tg_cast(x32, dt), *x3 = tg_reshape(x, TG_SHAPE(16, 4, 300));
            auto wide = [](tg_tensor *t) { return tg_cast(t, TG_FLOAT32); };
            auto same = [&](tg_tensor *got, tg_tensor *want32, const char *what) {
                ASSERT_NE(got, nullptr) << what << ": " << tg_last_error();
                ASSERT_EQ(tg_dtype_of(got), dt) << what;
                EXPECT_EQ(bits16(tg_contiguous(got)), bits16(tg_cast(want32, dt))) << what;
            };
            same(tg_sum_dim(x, 0, false), tg_sum_dim(wide(x), 0, false), "leading dim (a bias gradient)");
            same(tg_sum_to(x3, TG_SHAPE(300)), tg_sum_to(wide(x3), TG_SHAPE(300)), "two leading dims");
            same(tg_sum_dim(x, 1, true), tg_sum_dim(wide(x), 1, true), "last dim");
            tg_tensor *t = tg_transpose(x, 0, 1);
            same(tg_sum_dim(t, 1, false), tg_sum_dim(wide(t), 1, false), "a strided dim");
            int dims[] = {0, 2};
            same(tg_sum_dims(x3, dims, 2, false), tg_sum_dims(wide(x3), dims, 2, false), "dims 0 and 2");
            same(tg_sum(t), tg_sum(wide(t)), "all of a transposed view");
            same(tg_sum(x), tg_sum(wide(x)), "all of a contiguous run");
        }
    tg_set_flush_denormal(was);
}

// relu and relu_backward on contiguous bfloat16 select bits instead of widening
// (ops/cpu/relu_bf16.c): every one of the 65,536 patterns (NaNs, Infs, zeros, subnormals), as
// x and as g against a shuffled y, at a 64-byte boundary and 3 elements past one (the
// masked ends), with subnormals kept and flushed: bit for bit the float32 op on the
// widened values rounded once.
TEST_F(LowTest, Bfloat16ReluSelectsTheBitsOfTheWidenedOp) {
    std::vector<uint16_t> all(65536), shuffled(65536);
    for (uint32_t b = 0; b < 65536; b++) all[b] = (uint16_t)b, shuffled[b] = (uint16_t)(b * 40503u + 17u);
    tg_opts bf{TG_BFLOAT16};
    tg_tensor *x0 = tg_from_data(all.data(), TG_SHAPE(65536), bf),
              *y0 = tg_from_data(shuffled.data(), TG_SHAPE(65536), bf);
    ASSERT_NE(x0, nullptr) << tg_last_error();
    bool was = tg_get_flush_denormal();
    for (bool flush : {false, true}) {
        tg_set_flush_denormal(flush);
        for (int64_t at : {0, 3}) {
            SCOPED_TRACE(testing::Message() << "flush " << flush << ", offset " << at);
            /* views 2 * at bytes past their storages' starts */
            tg_tensor *x = tg_narrow(x0, 0, at, 65536 - at), *y = tg_narrow(y0, 0, at, 65536 - at);
            auto wide = [](tg_tensor *t) { return tg_cast(t, TG_FLOAT32); };
            EXPECT_EQ(bits16(tg_relu(x)), bits16(tg_cast(tg_relu(wide(x)), TG_BFLOAT16)));
            EXPECT_EQ(bits16(tg_relu_backward(x, y)), bits16(tg_cast(tg_relu_backward(wide(x), wide(y)), TG_BFLOAT16)));
            EXPECT_EQ(bits16(tg_relu_backward(y, x)), bits16(tg_cast(tg_relu_backward(wide(y), wide(x)), TG_BFLOAT16)));
        }
    }
    tg_set_flush_denormal(was);
    tg_tensor *x = tg_from_data(all.data(), TG_SHAPE(4), bf);
    EXPECT_EQ(bits16(tg_relu(x)), (std::vector<uint16_t>{0, 1, 2, 3})); /* hand-checked: tiny positives stay */
}

TEST_F(LowTest, PrintsLikeFloats) {
    char *buf = nullptr;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    tg_fprint(f, tg_cast(tensor_f32({1.5f, -2.25f}, TG_SHAPE(2)), TG_BFLOAT16));
    tg_fprint(f, tg_cast(tensor_f32({65504.0f, 1e-7f}, TG_SHAPE(2)), TG_FLOAT16));
    fclose(f);
    EXPECT_EQ(std::string(buf), "tensor([1.5000, -2.2500], shape=[2], dtype=bfloat16, device=cpu)\n"
                                "tensor([6.5504e+04, 1.1921e-07], shape=[2], dtype=float16, device=cpu)\n");
    free(buf);
}

TEST_F(LowTest, SafetensorsReadsAndWritesF16AndBF16) {
    tg_tensor_map *m = tg_safetensors_load("tests/fixtures/lowp.safetensors");
    ASSERT_NE(m, nullptr) << tg_last_error();
    tg_tensor *half = tg_tensor_map_get(m, "half"), *brain = tg_tensor_map_get(m, "brain");
    ASSERT_TRUE(half && brain);
    EXPECT_EQ(tg_dtype_of(half), TG_FLOAT16);
    EXPECT_EQ(tg_dtype_of(brain), TG_BFLOAT16);
    EXPECT_EQ(dims(half), (std::vector<int64_t>{2, 3}));
    std::vector<uint16_t> hb = bits16(half), bb = bits16(brain);
    const FixtureTensor &wh = fx("st_half_bits"), &wb = fx("st_brain_bits");
    for (size_t i = 0; i < hb.size(); i++) EXPECT_EQ(hb[i], (uint16_t)wh.data[i]) << i;
    for (size_t i = 0; i < bb.size(); i++) EXPECT_EQ(bb[i], (uint16_t)wb.data[i]) << i;
    // Written back, the file is the reference writer's byte for byte.
    size_t n = 0;
    uint8_t *bytes = nullptr;
    ASSERT_EQ(tg_safetensors_serialize(m, &bytes, &n), TG_OK) << tg_last_error();
    FILE *f = fopen("tests/fixtures/lowp.safetensors", "rb");
    ASSERT_NE(f, nullptr);
    std::vector<char> want(4096);
    want.resize(fread(want.data(), 1, want.size(), f));
    fclose(f);
    // Written back, the file is the reference writer's byte for byte, but for the
    // checksums tapegrad adds to "__metadata__" (io/safetensors.h): the tensor entries
    // of the header and the data are the same bytes.
    auto entries_and_data = [](const std::string &file) {
        uint64_t header = 0;
        memcpy(&header, file.data(), 8);
        std::string json = file.substr(8, header), data = file.substr(8 + header);
        size_t first = json.find("\"brain\""), end = json.find_last_not_of(' ');
        return json.substr(first, end + 1 - first) + "|" + data;
    };
    std::string ours((char *)bytes, n), theirs(want.data(), want.size());
    EXPECT_NE(ours.find("\"tapegrad.crc32c.brain\""), std::string::npos);
    EXPECT_EQ(entries_and_data(ours), entries_and_data(theirs));
    free(bytes);
    tg_tensor_map_free(m);
}

// ---- refusals ----

tg_tensor *reads_floats(tg_ctx *, tg_tensor *const *in) { return tg_clone(in[0]); }

TEST_F(LowTest, CustomOpsRefuseLowPrecisionUnlessTheyOptIn) {
    static const tg_function plain = {"my_op", 1, reads_floats, nullptr, 0, TG_LOW_PRECISION_REFUSE, TG_AUTOCAST_NONE};
    static const tg_function native = {"my_op", 1, reads_floats, nullptr, 0, TG_LOW_PRECISION_NATIVE, TG_AUTOCAST_NONE};
    tg_tensor *x = tg_ones(TG_SHAPE(2), tg_opts{TG_BFLOAT16});
    tg_clear_error();
    EXPECT_EQ(tg_apply(&plain, &x), nullptr);
    EXPECT_ERROR_CONTAINS("my_op: no bfloat16 kernel (input 0 is bfloat16)");
    tg_tensor *y = tg_apply(&native, &x);
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(y), TG_BFLOAT16);
}

tg_tensor *needs_float32(tg_ctx *, tg_tensor *const *in) {
    if (tg_dtype_of(in[0]) != TG_FLOAT32 || tg_dtype_of(in[1]) != TG_FLOAT32)
        return tg_error("needs_float32: got %s", tg_dtype_name(tg_dtype_of(in[0]))), nullptr;
    return tg_add(in[0], tg_mul_scalar(in[1], 1.0 / 3));
}

TEST_F(LowTest, CustomOpsCanAskForFloat32) {
    static const tg_function op = {"plus_third",    2, needs_float32, nullptr, 0, TG_LOW_PRECISION_IN_FLOAT32,
                                   TG_AUTOCAST_NONE};
    tg_tensor *a = tg_ones(TG_SHAPE(2), tg_opts{TG_BFLOAT16}), *b = tg_ones(TG_SHAPE(2), tg_opts{TG_BFLOAT16});
    tg_tensor *ab[] = {a, b};
    tg_tensor *y = tg_apply(&op, ab);
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(y), TG_BFLOAT16);
    EXPECT_EQ(values(y), (std::vector<double>{1.3359375, 1.3359375})); /* bf16(1 + 1/3f): rounded once */
    tg_tensor *f = tg_ones(TG_SHAPE(2), tg_opts{TG_FLOAT32});
    tg_clear_error();
    tg_tensor *af[] = {a, f};
    EXPECT_EQ(tg_apply(&op, af), nullptr);
    EXPECT_ERROR_CONTAINS("plus_third: expected floating inputs of one dtype, got bfloat16 and float32");
}

TEST_F(LowTest, ClearErrorsWhereThereIsNoLowPrecisionPath) {
    tg_tensor *b = tg_ones(TG_SHAPE(2, 2), tg_opts{TG_BFLOAT16}), *f = tg_ones(TG_SHAPE(2, 2), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_matmul(b, f), nullptr);
    EXPECT_ERROR_CONTAINS("tg_matmul: expected tensors of one dtype, got bfloat16 and float32");
    tg_clear_error();
    EXPECT_NE(tg_uniform_(b, 0, 1), TG_OK);
    EXPECT_ERROR_CONTAINS("tg_uniform_: expected a floating dtype (float32 or float64), got bfloat16");
    tg_clear_error();
    EXPECT_EQ(tg_randn(TG_SHAPE(2), tg_opts{TG_FLOAT16}), nullptr);
    EXPECT_ERROR_CONTAINS("got float16");
    tg_clear_error();
    EXPECT_EQ(tg_dropout(b, 0.5, true), nullptr);
    EXPECT_ERROR_CONTAINS("tg_dropout");
    tg_tensor *p = tg_requires_grad_(tg_ones(TG_SHAPE(2), tg_opts{TG_BFLOAT16}), true);
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(p, p))), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(tg_grad(p)), TG_BFLOAT16);
    tg_optim *opt = tg_sgd_params(&p, 1, tg_sgd_opts{.lr = 0.1});
    ASSERT_NE(opt, nullptr) << tg_last_error();
    tg_clear_error();
    EXPECT_NE(tg_optim_step(opt), TG_OK);
    EXPECT_ERROR_CONTAINS("parameter 0 is bfloat16; only float32 and float64 are updated");
    tg_optim_free(opt);
}

} // namespace
