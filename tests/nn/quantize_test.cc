// Dynamic quantisation of Linear (quant/quantize.h) against PyTorch 1.13's
// quantize_dynamic (tests/fixtures/gen_quantize.py; Debian's 1.13 has no fbgemm, so
// the onednn engine, whose dynamic Linear quantises inputs the same way: quint8 with
// reduce_range), and the int8 GEMM's two kernels against each other.
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ops/cpu/qgemm.h"
#include "tapegrad.h"
#include "test_util.h"

namespace {

class QuantizeTest : public TgTempDirTest {
  protected:
    std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/quantize.txt");

    // Sequential(Linear(70, 33), ReLU, Linear(33, 5)) with the fixture's weights
    tg_module *float_model() {
        tg_module *m = TG_NN_SEQUENTIAL(tg_nn_linear(70, 33, tg_linear_opts{}), tg_nn_relu(),
                                        tg_nn_linear(33, 5, tg_linear_opts{}));
        TG_SCOPE {
            TG_NO_GRAD {
                for (const char *name : {"0.weight", "0.bias", "2.weight", "2.bias"})
                    tg_copy_(tg_module_get(m, name), fixture_tensor(fx, std::string("float_") + name).make(TG_FLOAT32));
            }
        }
        return m;
    }

    void check(const char *tag, bool per_channel) {
        tg_module *m = tg_quantize_dynamic(float_model(), tg_quantize_opts{.per_channel = per_channel});
        ASSERT_NE(m, nullptr) << tg_last_error();
        for (int layer : {0, 2}) {
            tg_module *q = tg_module_child(m, std::to_string(layer).c_str());
            ASSERT_STREQ(tg_module_type_of(q)->name, "DynamicQuantizedLinear");
            std::string p = std::string(tag) + "_" + std::to_string(layer);
            TG_SCOPE {
                // the int8 weights exactly, the scales as PyTorch's float32 values
                EXPECT_TRUE(tensor_near(tg_quantized_linear_weight(q), fixture_tensor(fx, p + "_int").data, 0, 0)) << p;
                EXPECT_TRUE(tensor_near(tg_module_buffer(q, "scale"), fixture_tensor(fx, p + "_scale").data, 0, 0))
                    << p;
                EXPECT_TRUE(
                    tensor_near(tg_module_buffer(q, "zero_point"), fixture_tensor(fx, p + "_zero_point").data, 0, 0))
                    << p;
            }
        }
        for (const char *input : {"x_batch", "x_one", "x_pos", "x_3d"}) {
            TG_SCOPE {
                tg_tensor *x = fixture_tensor(fx, input).make(TG_FLOAT32);
                std::string first = std::string(tag) + "_first_" + input, out = std::string(tag) + "_out_" + input;
                // one Linear: float32 rounding only (measured: at most 2.4e-7, a couple of ulps
                // from onednn's order of the scale products)
                tg_tensor *y1 = tg_forward(tg_module_child(m, "0"), x);
                EXPECT_EQ(dims(y1), fixture_tensor(fx, first).shape);
                EXPECT_TRUE(tensor_near(y1, fixture_tensor(fx, first).data, 1e-6, 0)) << first;
                // the model: the second Linear quantises the first one's output, where a
                // value that rounded the other way would move the result by a quantisation
                // step (none did here: measured within 1e-6)
                EXPECT_TRUE(tensor_near(tg_forward(m, x), fixture_tensor(fx, out).data, 1e-5, 0)) << out;
            }
        }
        tg_module_free(m);
    }
};

TEST_F(QuantizeTest, PerTensorDefaultMatchesPyTorch) { check("pt", false); }
TEST_F(QuantizeTest, PerChannelMatchesPyTorch) { check("pc", true); }

// Inputs of a packed u8 x s8 product (patterned bytes; with extremes, x[0] = 255 and
// w[0] = -128), w's packing (freed with the case) and the exact int32 sums.
struct PackedCase {
    std::vector<uint8_t> x;
    std::vector<int8_t> w;
    std::vector<int32_t> want;
    std::unique_ptr<int8_t, void (*)(void *)> packed{nullptr, free};
};

PackedCase packed_case(int64_t rows, int64_t cols, int64_t depth, bool extremes) {
    PackedCase c;
    c.x.resize(rows * depth);
    c.w.resize(cols * depth);
    for (int64_t i = 0; i < rows * depth; i++) c.x[i] = (uint8_t)(i * 53 % 256);
    for (int64_t i = 0; i < cols * depth; i++) c.w[i] = (int8_t)(i * 29 % 256 - 128);
    if (extremes) c.x[0] = 255, c.w[0] = -128;
    c.want.assign(rows * cols, 0);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            for (int64_t p = 0; p < depth; p++)
                c.want[i * cols + j] += (int32_t)c.x[i * depth + p] * c.w[j * depth + p];
    c.packed.reset(tg_qgemm_pack(cols, depth, c.w.data()));
    return c;
}

TEST_F(QuantizeTest, PortableKernelMatchesVnni) {
    check("pt", false);
    tg_qgemm_allow_vnni(false);
    check("pt", false);
    tg_qgemm_allow_vnni(true);
    // odd sizes (tails of k and of the column blocks), extreme values: exact int32 sums
    const int64_t m = 3, n = 70, k = 131;
    std::vector<uint8_t> a(m * k);
    std::vector<int8_t> b(n * k);
    for (int64_t i = 0; i < m * k; i++) a[i] = (uint8_t)(i * 37 % 256);
    for (int64_t i = 0; i < n * k; i++) b[i] = (int8_t)(i * 91 % 256 - 128);
    a[0] = 255;
    b[0] = -128;
    std::vector<int32_t> fast(m * n), slow(m * n), expect(m * n, 0);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            for (int64_t p = 0; p < k; p++) expect[i * n + j] += (int32_t)a[i * k + p] * b[j * k + p];
    tg_qgemm_u8s8s32(m, n, k, a.data(), b.data(), fast.data());
    tg_qgemm_allow_vnni(false);
    tg_qgemm_u8s8s32(m, n, k, a.data(), b.data(), slow.data());
    tg_qgemm_allow_vnni(true);
    EXPECT_EQ(fast, expect);
    EXPECT_EQ(slow, expect);
    if (tg_qgemm_has_vnni()) { // the packed layout of static quantisation (ops/cpu/qconv.h)
        int8_t *packed = tg_qgemm_pack(n, k, b.data());
        std::vector<int32_t> packed_out(m * n);
        tg_qgemm_u8s8s32_packed(m, n, k, a.data(), k, packed, packed_out.data());
        free(packed);
        EXPECT_EQ(packed_out, expect);
    }
    if (tg_qgemm_has_vnni()) { // every row block (1..6 rows) and panel width (1..4 blocks) of the packed kernel
        for (int64_t rows : {1, 5, 6, 13}) {
            for (int64_t cols : {10, 50, 64, 200}) {
                for (int64_t depth : {25, 131, 1024}) {
                    PackedCase c = packed_case(rows, cols, depth, false);
                    std::vector<int32_t> got(rows * cols, -1);
                    tg_qgemm_u8s8s32_packed(rows, cols, depth, c.x.data(), depth, c.packed.get(), got.data());
                    EXPECT_EQ(got, c.want) << rows << "x" << cols << "x" << depth;
                }
            }
        }
    }
    if (!tg_qgemm_has_vnni()) GTEST_LOG_(INFO) << "no AVX512-VNNI here: both runs used the portable kernel";
}

// The AMX kernel (16 rows or more, where the CPU has AMX-INT8): exact int32 sums, the
// VNNI kernel's, on row counts around its 16-row tiles and 32-row blocks, panels of 1 to 4
// blocks of 16 columns, and k around its 64-byte tile rows (padded with zeros).
TEST_F(QuantizeTest, AmxKernelGivesTheExactSums) {
    if (!tg_qgemm_has_amx()) GTEST_SKIP() << "no AMX-INT8 on this CPU (or not granted by the OS)";
    ASSERT_TRUE(tg_qgemm_amx_enabled() || getenv("TG_AMX") != nullptr);
    for (int64_t rows : {16, 17, 31, 32, 33, 64, 100}) {
        for (int64_t cols : {10, 40, 64, 200}) {
            for (int64_t depth : {4, 25, 64, 131, 1024}) {
                PackedCase c = packed_case(rows, cols, depth, true);
                std::vector<int32_t> amx(rows * cols, -1), vnni(rows * cols, -1);
                tg_qgemm_u8s8s32_packed(rows, cols, depth, c.x.data(), depth, c.packed.get(), amx.data());
                tg_qgemm_allow_amx(false);
                tg_qgemm_u8s8s32_packed(rows, cols, depth, c.x.data(), depth, c.packed.get(), vnni.data());
                tg_qgemm_allow_amx(true);
                EXPECT_EQ(amx, c.want) << rows << "x" << cols << "x" << depth;
                EXPECT_EQ(vnni, c.want) << rows << "x" << cols << "x" << depth;
            }
        }
    }
}

// A batch's floats from the packed kernel (its requantisation on the sums in registers)
// are the portable path's to the bit, per tensor and per channel, with and without bias,
// for row counts around the kernel's 6-row blocks and widths around its 64 columns (and,
// from 16 rows, the AMX kernel's where the CPU has it).
TEST_F(QuantizeTest, PackedBatchGivesThePortableFloatsExactly) {
    for (bool per_channel : {false, true}) {
        for (bool bias : {true, false}) {
            tg_linear_opts lo{};
            lo.no_bias = !bias;
            tg_module *m = TG_NN_SEQUENTIAL(tg_nn_linear(131, 70, lo), tg_nn_relu(), tg_nn_linear(70, 130, lo));
            m = tg_quantize_dynamic(m, tg_quantize_opts{.per_channel = per_channel});
            ASSERT_NE(m, nullptr) << tg_last_error();
            for (int64_t rows : {2, 6, 13, 16, 40, 64}) {
                TG_SCOPE {
                    tg_tensor *x = tg_sub_scalar(tg_mul_scalar(tg_rand(TG_SHAPE(rows, 131), tg_opts{}), 3), 1);
                    tg_qgemm_allow_vnni(false);
                    std::vector<double> slow = values(tg_forward(m, x));
                    tg_qgemm_allow_vnni(true);
                    std::vector<double> fast = values(tg_forward(m, x));
                    EXPECT_EQ(fast, slow) << rows << " rows, per_channel " << per_channel << ", bias " << bias;
                }
            }
            tg_module_free(m);
        }
    }
}

TEST_F(QuantizeTest, ModelShapeAndErrors) {
    tg_module *lin = tg_nn_linear(4, 3, tg_linear_opts{});
    tg_module *q = tg_quantize_dynamic(lin, tg_quantize_opts{}); // a Linear root is replaced
    ASSERT_NE(q, nullptr) << tg_last_error();
    EXPECT_STREQ(tg_module_type_of(q)->name, "DynamicQuantizedLinear");
    int n = 0;
    const tg_named_tensor *sd = tg_state_dict(q, &n);
    ASSERT_EQ(n, 4);
    EXPECT_STREQ(sd[0].name, "weight");
    EXPECT_EQ(tg_dtype_of(sd[0].tensor), TG_UINT8);
    EXPECT_STREQ(sd[1].name, "scale");
    EXPECT_STREQ(sd[2].name, "zero_point");
    EXPECT_STREQ(sd[3].name, "bias");
    TG_SCOPE {
        tg_clear_error();
        EXPECT_EQ(tg_forward(q, tg_ones(TG_SHAPE(2, 5), tg_opts{})), nullptr);
        EXPECT_ERROR_CONTAINS(
            "DynamicQuantizedLinear: expected a float32 CPU input of shape [..., 4], got float32 [2, 5]");
        tg_clear_error();
        EXPECT_EQ(tg_forward(q, tg_ones(TG_SHAPE(2, 4), tg_opts{.dtype = TG_FLOAT64})), nullptr);
        EXPECT_ERROR_CONTAINS("got float64");
        // zeros in: the scale falls back to 0.1 as PyTorch's; the output is the bias
        tg_tensor *y = tg_forward(q, tg_zeros(TG_SHAPE(2, 4), tg_opts{}));
        EXPECT_TRUE(tensor_near(y, values(tg_expand(tg_module_buffer(q, "bias"), TG_SHAPE(2, 3))), 0, 0));
    }
    tg_module_free(q);

    tg_module *model = TG_NN_SEQUENTIAL(tg_nn_linear(4, 3, tg_linear_opts{}));
    ASSERT_EQ(tg_module_cast(model, TG_FLOAT64), TG_OK);
    tg_clear_error();
    EXPECT_EQ(tg_quantize_dynamic(model, tg_quantize_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("every Linear must have a float32 CPU weight");
    EXPECT_STREQ(tg_module_type_of(tg_module_child(model, "0"))->name, "Linear"); // untouched
    tg_clear_error();
    EXPECT_EQ(tg_quantized_linear_weight(model), nullptr);
    EXPECT_ERROR_CONTAINS("expected a DynamicQuantizedLinear, got Sequential");
    tg_clear_error();
    EXPECT_EQ(tg_nn_dynamic_quantized_linear(model, tg_quantize_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("expected a Linear, got Sequential");
    tg_module_free(model);
}

// Issue 35: one +Inf in a batch made every row's output the bias, and a NaN row came out
// finite. Now a row's NaN / Inf gives what the float Linear of the dequantised weights
// gives for that row (column 2 of the weights is 0.75, -0.6, 0: Inf * 0 is NaN), and the
// other rows are what they are with those entries 0 (the range is of the finite values),
// on both kernels, per tensor and per channel, for a batch and a single row.
TEST_F(QuantizeTest, NonFiniteInputsStayInTheirRow) {
    const float inf = INFINITY, nan = NAN;
    for (bool per_channel : {false, true}) {
        tg_module *q = tg_nn_linear(4, 3, tg_linear_opts{});
        TG_SCOPE {
            TG_NO_GRAD {
                tg_copy_(tg_module_get(q, "weight"),
                         tensor_f32({0.5f, -0.25f, 0.75f, 0.1f, -0.5f, 0.3f, -0.6f, 0.2f, 0.4f, 0.2f, 0.f, -0.3f},
                                    TG_SHAPE(3, 4)));
                tg_copy_(tg_module_get(q, "bias"), tensor_f32({0.1f, -0.2f, 0.3f}, TG_SHAPE(3)));
            }
        }
        q = tg_quantize_dynamic(q, tg_quantize_opts{.per_channel = per_channel});
        ASSERT_NE(q, nullptr) << tg_last_error();
        for (bool vnni : {true, false}) {
            tg_qgemm_allow_vnni(vnni);
            TG_SCOPE {
                std::vector<float> x = {1.f, -2.f, 0.5f, 3.f, 0.25f, 1.5f, 0.f, -1.f, -0.75f, 2.f, 1.f, 0.5f};
                std::vector<float> inf_in = x, nan_row = x;
                inf_in[6] = inf; // row 1, column 2
                for (int p = 4; p < 8; p++) nan_row[p] = nan;
                std::vector<double> ref = values(tg_forward(q, tensor_f32(x, TG_SHAPE(3, 4))));
                std::vector<double> y = values(tg_forward(q, tensor_f32(inf_in, TG_SHAPE(3, 4))));
                ASSERT_EQ(y.size(), 9u) << tg_last_error();
                for (int i : {0, 1, 2, 6, 7, 8}) EXPECT_EQ(y[i], ref[i]) << i << (vnni ? " vnni" : " portable");
                EXPECT_EQ(y[3], inf);
                EXPECT_EQ(y[4], -inf);
                EXPECT_TRUE(std::isnan(y[5]));
                // a single row (the row kernel)
                std::vector<float> one(inf_in.begin() + 4, inf_in.begin() + 8);
                EXPECT_TRUE(tensor_near(tg_forward(q, tensor_f32(one, TG_SHAPE(1, 4))), {inf, -inf, nan}, 0));
                // a NaN row: NaN out; the others as in the batch without it
                std::vector<float> two = {1.f, -2.f, 0.5f, 3.f, -0.75f, 2.f, 1.f, 0.5f};
                std::vector<double> r2 = values(tg_forward(q, tensor_f32(two, TG_SHAPE(2, 4))));
                EXPECT_TRUE(tensor_near(tg_forward(q, tensor_f32(nan_row, TG_SHAPE(3, 4))),
                                        {r2[0], r2[1], r2[2], nan, nan, nan, r2[3], r2[4], r2[5]}, 0));
                for (double v : ref) EXPECT_TRUE(std::isfinite(v));
            }
        }
        tg_qgemm_allow_vnni(true);
        tg_module_free(q);
    }
}

// Issue 35: a NaN weight quantised to finite int8 values; now refused, naming it.
TEST_F(QuantizeTest, NonFiniteWeightIsRefused) {
    tg_module *model = TG_NN_SEQUENTIAL(tg_nn_linear(4, 3, tg_linear_opts{}), tg_nn_relu(),
                                        TG_NN_SEQUENTIAL(tg_nn_linear(3, 2, tg_linear_opts{})));
    TG_SCOPE {
        TG_NO_GRAD { tg_fill_(tg_narrow(tg_narrow(tg_module_get(model, "2.0.weight"), 0, 1, 1), 1, 2, 1), NAN); }
    }
    tg_clear_error();
    EXPECT_EQ(tg_quantize_dynamic(model, tg_quantize_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_quantize_dynamic: \"2.0.weight\" holds nan at [1, 2]: a weight with NaN or Inf "
                          "cannot be quantised, module unchanged");
    EXPECT_STREQ(tg_module_type_of(tg_module_child(model, "0"))->name, "Linear"); // untouched, the first too
    tg_module *lin = tg_nn_linear(4, 3, tg_linear_opts{});
    TG_SCOPE {
        TG_NO_GRAD { tg_fill_(tg_narrow(tg_narrow(tg_module_get(lin, "weight"), 0, 2, 1), 1, 0, 1), -INFINITY); }
    }
    tg_clear_error();
    EXPECT_EQ(tg_nn_dynamic_quantized_linear(lin, tg_quantize_opts{.per_channel = true}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_nn_dynamic_quantized_linear: Linear(in_features=4, out_features=3).weight holds -inf "
                          "at [2, 0]");
    tg_module_free(lin);
    tg_module_free(model);
}

TEST_F(QuantizeTest, PrunedLinearQuantisesItsMaskedWeight) {
    tg_module *model = float_model();
    tg_module *first = tg_module_child(model, "0");
    ASSERT_EQ(tg_prune_l1_unstructured(first, "weight", tg_prune_fraction(0.9)), TG_OK);
    int64_t zeros = 0;
    ASSERT_NE(tg_quantize_dynamic(model, tg_quantize_opts{}), nullptr) << tg_last_error();
    TG_SCOPE {
        for (double v : values(tg_quantized_linear_weight(tg_module_child(model, "0")))) zeros += v == 0;
    }
    EXPECT_GE(zeros, (int64_t)std::lround(0.9 * 70 * 33));
    tg_module_free(model);
}

TEST_F(QuantizeTest, SaveAndLoadTheQuantisedModel) {
    // a bigger model, so that the file sizes show the 4x of int8 weights
    auto make = []() {
        return TG_NN_SEQUENTIAL(tg_nn_linear(256, 128, tg_linear_opts{}), tg_nn_relu(),
                                tg_nn_linear(128, 10, tg_linear_opts{}));
    };
    tg_manual_seed(1);
    tg_module *model = make();
    std::string float_path = dir_ + "/float.safetensors", int8_path = dir_ + "/int8.safetensors";
    ASSERT_EQ(tg_save_state_dict(model, float_path.c_str()), TG_OK) << tg_last_error();
    for (bool per_channel : {false, true}) {
        tg_module *q = tg_quantize_dynamic(model, tg_quantize_opts{.per_channel = per_channel});
        ASSERT_NE(q, nullptr) << tg_last_error();
        model = q;
        ASSERT_EQ(tg_save_state_dict(q, int8_path.c_str()), TG_OK) << tg_last_error();
        tg_manual_seed(2); // other weights, quantised the same way, then loaded
        tg_module *other = tg_quantize_dynamic(make(), tg_quantize_opts{.per_channel = per_channel});
        ASSERT_EQ(tg_load_state_dict(other, int8_path.c_str(), true), TG_OK) << tg_last_error();
        TG_SCOPE {
            tg_tensor *x = tg_randn(TG_SHAPE(4, 256), tg_opts{});
            EXPECT_TRUE(tensor_near(tg_forward(other, x), values(tg_forward(q, x)), 0, 0));
            EXPECT_TRUE(tensor_near(tg_quantized_linear_weight(tg_module_child(other, "0")),
                                    values(tg_quantized_linear_weight(tg_module_child(q, "0"))), 0, 0));
        }
        tg_module_free(other);
        FILE *f = fopen(float_path.c_str(), "rb"), *g = fopen(int8_path.c_str(), "rb");
        ASSERT_TRUE(f && g);
        fseek(f, 0, SEEK_END);
        fseek(g, 0, SEEK_END);
        double ratio = (double)ftell(f) / (double)ftell(g);
        fclose(f);
        fclose(g);
        EXPECT_GT(ratio, 3.5) << "float32 file / int8 file";
        if (!per_channel) { // back to a float model for the per-channel round
            tg_module_free(model);
            tg_manual_seed(1);
            model = make();
        }
    }
    tg_module_free(model);
}

} // namespace
