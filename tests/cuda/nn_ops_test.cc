// The nn-level ops on CUDA against the CPU: softmax, cross entropy, gather family,
// conv2d, pooling, batch/layer norm, random fills (the Philox stream), dropout2d,
// conv_transpose2d, interpolate, the modules composed of device ops (Conv1d, ConvTranspose2d,
// GroupNorm, InstanceNorm2d, LSTM, GRU, MultiheadAttention), scaled dot-product attention,
// optimizer steps, and a whole MLP training step. Skipped without a GPU.
#include <cmath>
#include <cstring>

#include "cuda_test_util.h"
#include "core/philox.h"

TEST_F(TgTest, CudaSoftmaxMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        tg_tensor *x = random_cpu(TG_SHAPE(6, 37, 11), dt, 1, -5, 5);
        for (int dim : {0, 1, 2, -1}) {
            for (bool log : {false, true}) {
                CompareOpts o;
                EXPECT_TRUE(compare_devices(
                    [&](const std::vector<tg_tensor *> &in) {
                        return log ? tg_log_softmax(in[0], dim) : tg_softmax(in[0], dim);
                    },
                    {x}, o))
                    << "dim " << dim << " log " << log << " " << tg_dtype_name(dt);
            }
        }
        tg_tensor *wide = random_cpu(TG_SHAPE(3, 5000), dt, 2, -5, 5);
        EXPECT_TRUE(compare_devices(
            [](const std::vector<tg_tensor *> &in) { return tg_softmax(non_contiguous(in[0]), 1); }, {wide}));
    }
}

TEST_F(TgTest, CudaCrossEntropyMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *logits = random_cpu(TG_SHAPE(64, 10), TG_FLOAT32, 1, -3, 3);
    tg_tensor *target = tg_cast(random_cpu(TG_SHAPE(64), TG_FLOAT64, 2, 0, 9.99), TG_INT64);
    EXPECT_TRUE(compare_devices([](const std::vector<tg_tensor *> &in) { return tg_cross_entropy(in[0], in[1]); },
                                {logits, target}));
    tg_loss_opts opts = {};
    opts.label_smoothing = 0.1;
    opts.use_ignore_index = true;
    opts.ignore_index = 3;
    opts.reduction = TG_REDUCTION_SUM;
    EXPECT_TRUE(
        compare_devices([&](const std::vector<tg_tensor *> &in) { return tg_cross_entropy_opts(in[0], in[1], opts); },
                        {logits, target}));
    // reduction none: the fused backward reads one upstream gradient per element
    tg_loss_opts none = {};
    none.reduction = TG_REDUCTION_NONE;
    EXPECT_TRUE(
        compare_devices([&](const std::vector<tg_tensor *> &in) { return tg_cross_entropy_opts(in[0], in[1], none); },
                        {logits, target}));
    // [N, C, d] logits with [N, d] targets
    tg_tensor *l3 = random_cpu(TG_SHAPE(4, 5, 7), TG_FLOAT64, 3);
    tg_tensor *t3 = tg_cast(random_cpu(TG_SHAPE(4, 7), TG_FLOAT64, 4, 0, 4.99), TG_INT64);
    EXPECT_TRUE(
        compare_devices([](const std::vector<tg_tensor *> &in) { return tg_cross_entropy(in[0], in[1]); }, {l3, t3}));
    // class probabilities (composed of device ops), with class weights and smoothing
    tg_tensor *probs = tg_softmax(random_cpu(TG_SHAPE(64, 10), TG_FLOAT32, 5), 1);
    tg_tensor *class_weight = random_cpu(TG_SHAPE(10), TG_FLOAT32, 6, 0.5, 2);
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) {
            tg_loss_opts o = {};
            o.label_smoothing = 0.1;
            o.weight = in[2]; // gets no gradient
            return tg_cross_entropy_opts(in[0], in[1], o);
        },
        {logits, probs, class_weight}));
}

TEST_F(TgTest, CudaGatherFamilyMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(5, 6, 4), TG_FLOAT32, 1);
    tg_tensor *idx = tensor_i64({4, 0, 2, 2, 1}, TG_SHAPE(5));
    for (int dim : {0, 1}) {
        EXPECT_TRUE(compare_devices(
            [&](const std::vector<tg_tensor *> &in) { return tg_index_select(in[0], dim, in[1]); }, {x, idx}))
            << "index_select dim " << dim;
    }
    tg_tensor *gidx = tg_cast(random_cpu(TG_SHAPE(5, 3, 4), TG_FLOAT64, 2, 0, 5.99), TG_INT64);
    EXPECT_TRUE(
        compare_devices([](const std::vector<tg_tensor *> &in) { return tg_gather(in[0], 1, in[1]); }, {x, gidx}));
    tg_tensor *src = random_cpu(TG_SHAPE(5, 3, 4), TG_FLOAT32, 3);
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) { return tg_scatter_add(in[0], 1, in[1], in[2]); }, {x, gidx, src}));
    tg_tensor *w = random_cpu(TG_SHAPE(10, 8), TG_FLOAT32, 4);
    tg_tensor *tok = tensor_i64({1, 9, 1, 0, 3, 3}, TG_SHAPE(2, 3));
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) { return tg_embedding(in[0], in[1], tg_embedding_opts{}); }, {w, tok}));
    tg_embedding_opts pad = {true, 1}; // padding_idx 1: its row gets no gradient
    EXPECT_TRUE(
        compare_devices([&](const std::vector<tg_tensor *> &in) { return tg_embedding(in[0], in[1], pad); }, {w, tok}));
    // a bad index is an error naming the op, not a crash
    tg_tensor *bad = on_cuda(tensor_i64({0, 7}, TG_SHAPE(2)));
    EXPECT_EQ(tg_index_select(on_cuda(x), 0, bad), nullptr);
    EXPECT_ERROR_CONTAINS("index 7 is out of range");
    EXPECT_TRUE(tensor_near(tg_add_scalar(on_cuda(tensor_f32({1}, TG_SHAPE(1))), 1), {2}, 0)); // still usable
}

// one_hot runs on the device (given or inferred classes) and checks the range there.
TEST_F(TgTest, CudaOneHotMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *labels = tensor_i64({3, 0, 2, 2, 1, 5}, TG_SHAPE(2, 3));
    for (int64_t classes : {6, 9, -1}) {
        EXPECT_TRUE(
            compare_devices([&](const std::vector<tg_tensor *> &in) { return tg_one_hot(in[0], classes); }, {labels}))
            << "num_classes " << classes;
    }
    EXPECT_TRUE(compare_devices( // a non-contiguous index
        [](const std::vector<tg_tensor *> &in) { return tg_one_hot(tg_transpose(in[0], 0, 1), -1); }, {labels}));
    EXPECT_EQ(tg_one_hot(on_cuda(tensor_i64({0, 4}, TG_SHAPE(2))), 3), nullptr);
    EXPECT_ERROR_CONTAINS("tg_one_hot: class value 4 is out of range [0, 3)");
    EXPECT_EQ(tg_one_hot(on_cuda(tensor_i64({-2, -1}, TG_SHAPE(2))), -1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_one_hot: class value -");
}

TEST_F(TgTest, CudaConv2dMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    struct Case {
        tg_shape x, w;
        tg_conv_opts o;
        const char *what;
        double atol32; /* float32's absolute tolerance */
    } cases[] = {
        {TG_SHAPE(4, 1, 28, 28), TG_SHAPE(6, 1, 5, 5), {1, 0, 1, 1, false}, "LeNet conv1", 1e-4},
        {TG_SHAPE(2, 4, 9, 11), TG_SHAPE(6, 4, 3, 3), {2, 1, 1, 1, false}, "stride 2 padding 1", 1e-4},
        {TG_SHAPE(2, 4, 9, 9), TG_SHAPE(6, 2, 3, 3), {1, 2, 2, 2, false}, "dilation 2 groups 2", 1e-4},
        // K * P = 576 * 4096 per image: the column buffer holds 28 images, so two chunks. The
        // CPU runs it by Winograd F(4x4, 3x3) (ops/cpu/winograd_conv.c), within about 2e-5 of
        // its sums' spread: 32 forward, 470 for the weight gradient's 122880 terms.
        {TG_SHAPE(30, 64, 64, 64), TG_SHAPE(8, 64, 3, 3), {1, 1, 1, 1, false}, "two column chunks", 2e-2},
    };
    for (const Case &c : cases) {
        for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
            tg_tensor *x = random_cpu(c.x, dt, 1), *w = random_cpu(c.w, dt, 2);
            tg_tensor *b = random_cpu(TG_SHAPE(c.w.dims[0]), dt, 3);
            CompareOpts o;
            o.atol = dt == TG_FLOAT32 ? c.atol32 : 1e-10;
            o.rtol = dt == TG_FLOAT32 ? 1e-4 : 1e-10;
            tg_conv_opts co = c.o;
            EXPECT_TRUE(compare_devices(
                [&](const std::vector<tg_tensor *> &in) { return tg_conv2d(in[0], in[1], in[2], co); }, {x, w, b}, o))
                << c.what << " " << tg_dtype_name(dt);
        }
    }
}

TEST_F(TgTest, CudaPoolingMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(2, 3, 13, 10), TG_FLOAT32, 1);
    tg_pool_opts p2 = {2, 0, 0, false, false}, p3 = {3, 2, 1, true, true}, p3i = {3, 2, 1, false, false};
    tg_pool_opts dilated = {3, 2, 1, true, false, 2}, dilated_unit = {2, 1, 0, false, false, 3};
    EXPECT_TRUE(
        compare_devices([&](const std::vector<tg_tensor *> &in) { return tg_max_pool2d(in[0], p2, nullptr); }, {x}));
    EXPECT_TRUE(
        compare_devices([&](const std::vector<tg_tensor *> &in) { return tg_max_pool2d(in[0], p3, nullptr); }, {x}));
    for (tg_pool_opts d : {dilated, dilated_unit}) {
        EXPECT_TRUE(
            compare_devices([&](const std::vector<tg_tensor *> &in) { return tg_max_pool2d(in[0], d, nullptr); }, {x}))
            << "dilation " << d.dilation;
        EXPECT_TRUE(compare_devices( // the indices too
            [&](const std::vector<tg_tensor *> &in) {
                tg_tensor *idx = nullptr;
                tg_max_pool2d(in[0], d, &idx);
                return idx;
            },
            {x}))
            << "dilation " << d.dilation;
    }
    EXPECT_TRUE(compare_devices([&](const std::vector<tg_tensor *> &in) { return tg_avg_pool2d(in[0], p3); }, {x}));
    EXPECT_TRUE(compare_devices([&](const std::vector<tg_tensor *> &in) { return tg_avg_pool2d(in[0], p3i); }, {x}));
    EXPECT_TRUE(
        compare_devices([](const std::vector<tg_tensor *> &in) { return tg_adaptive_avg_pool2d(in[0], 4, 3); }, {x}));
}

TEST_F(TgTest, CudaBatchAndLayerNormMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_tensor *x = random_cpu(TG_SHAPE(8, 5, 6, 7), TG_FLOAT32, 1);
    tg_tensor *w = random_cpu(TG_SHAPE(5), TG_FLOAT32, 2), *b = random_cpu(TG_SHAPE(5), TG_FLOAT32, 3);
    CompareOpts o;
    o.atol = o.rtol = 1e-4;
    EXPECT_TRUE(compare_devices(
        [](const std::vector<tg_tensor *> &in) {
            return tg_batch_norm(in[0], nullptr, nullptr, in[1], in[2], true, 0.1, 1e-5);
        },
        {x, w, b}, o));
    tg_tensor *rm = tg_zeros(TG_SHAPE(5), tg_opts{}), *rv = tg_ones(TG_SHAPE(5), tg_opts{});
    tg_tensor *grm = on_cuda(rm), *grv = on_cuda(rv);
    ASSERT_NE(tg_batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5), nullptr);
    ASSERT_NE(tg_batch_norm(on_cuda(x), grm, grv, on_cuda(w), on_cuda(b), true, 0.1, 1e-5), nullptr) << tg_last_error();
    EXPECT_TRUE(same_values(rm, grm, 1e-5, 1e-5)); // running statistics updated alike
    EXPECT_TRUE(same_values(rv, grv, 1e-5, 1e-5));
    tg_tensor *lx = random_cpu(TG_SHAPE(16, 33), TG_FLOAT32, 4);
    tg_tensor *lw = random_cpu(TG_SHAPE(33), TG_FLOAT32, 5), *lb = random_cpu(TG_SHAPE(33), TG_FLOAT32, 6);
    EXPECT_TRUE(
        compare_devices([](const std::vector<tg_tensor *> &in) { return tg_layer_norm(in[0], 1, in[1], in[2], 1e-5); },
                        {lx, lw, lb}, o));
}

// ops/cuda/random.h's Philox layout, computed here on the host from core/rng.h's
// tg_philox: what a CUDA fill must draw under (seed, offset).
static std::vector<double> philox_fill(int kind, tg_dtype dt, int64_t n, double a, double b, uint64_t seed,
                                       uint64_t offset) {
    std::vector<double> v((size_t)n);
    for (int64_t i = 0; i < n; i++) {
        uint32_t w[4];
        if (kind == 0 && dt == TG_FLOAT64) {
            tg_philox(seed, offset + (uint64_t)i / 2, w);
            int k = 2 * (int)(i % 2);
            double u = (double)((((uint64_t)w[k]) << 21) ^ (w[k + 1] >> 11)) * (1.0 / 9007199254740992.0);
            v[i] = a + (b - a) * u;
        } else if (kind == 0) {
            tg_philox(seed, offset + (uint64_t)i / 4, w);
            double x = a + (b - a) * ((double)(w[i % 4] >> 8) * (1.0 / 16777216.0));
            if ((float)x >= (float)b && b > a) x = nextafterf((float)b, (float)a);
            v[i] = (float)x;
        } else {
            tg_philox(seed, offset + (uint64_t)i / 4, w);
            int k = (int)(i % 4) / 2 * 2;
            double r = std::sqrt(-2.0 * std::log(tg_uint_to_unit(w[k])));
            double theta = 6.283185307179586476925 * tg_uint_to_unit(w[k + 1]);
            double x = a + b * (i % 2 == 0 ? r * std::cos(theta) : r * std::sin(theta));
            v[i] = dt == TG_FLOAT32 ? (double)(float)x : x;
        }
    }
    return v;
}

static tg_tensor *host_tensor(const std::vector<double> &v, tg_dtype dt) {
    return tg_cast(tg_from_data(v.data(), TG_SHAPE((int64_t)v.size()), tg_opts{TG_FLOAT64, TG_CPU, false}), dt);
}

// CUDA tensors draw from the CUDA generator (Philox, the same seed as the CPU's), on the
// device; the CPU generator is left alone.
TEST_F(TgTest, CudaRandomDrawsThePhiloxStream) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        tg_manual_seed(123);
        tg_rng_state cpu_before = tg_rng_get_state();
        tg_tensor *gu = tg_rand(TG_SHAPE(1001), tg_opts{dt, tg_cuda(0), false});
        uint64_t after_uniform = tg_rng_get_state().offset;
        tg_tensor *gn = tg_randn(TG_SHAPE(1001), tg_opts{dt, tg_cuda(0), false});
        ASSERT_TRUE(gu && gn) << tg_last_error();
        EXPECT_EQ(after_uniform, dt == TG_FLOAT32 ? 251u : 501u);
        EXPECT_TRUE(same_values(host_tensor(philox_fill(0, dt, 1001, 0, 1, 123, 0), dt), gu, 0, 0))
            << tg_dtype_name(dt);
        EXPECT_TRUE(same_values(host_tensor(philox_fill(1, dt, 1001, 0, 1, 123, after_uniform), dt), gn, 1e-12,
                                1e-12))
            << tg_dtype_name(dt); // libm vs CUDA math: last bits
        tg_rng_state cpu_after = tg_rng_get_state();
        EXPECT_EQ(std::memcmp(cpu_before.cpu.words, cpu_after.cpu.words, sizeof cpu_after.cpu.words), 0);
        EXPECT_EQ(cpu_before.cpu.index, cpu_after.cpu.index);
    }
}

// Dropout masks and Bernoulli draws (tensor p and scalar p) are made on the device from
// the Philox stream.
TEST_F(TgTest, CudaDropoutAndBernoulliDrawThePhiloxStream) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        tg_tensor *x = tg_ones(TG_SHAPE(37, 29), tg_opts{dt, TG_CPU, false});
        tg_tensor *p = tg_rand(TG_SHAPE(1001), tg_opts{dt, TG_CPU, false});
        tg_manual_seed(7);
        tg_tensor *gd = tg_dropout(on_cuda(x), 0.3, true), *gb = tg_bernoulli(on_cuda(p));
        ASSERT_TRUE(gd && gb) << tg_last_error();
        std::vector<double> d = values(gd), b = values(gb), probs = values(p);
        double keep = 1.0 - 0.3, scale = dt == TG_FLOAT32 ? (double)(1.0f / (float)keep) : 1.0 / keep; // as tg_dropout
        uint64_t threshold = (uint64_t)(0.3 * 4294967296.0), mask_counters = (37 * 29 + 3) / 4;
        for (int64_t i = 0; i < 37 * 29; i++) {
            uint32_t w[4];
            tg_philox(7, (uint64_t)i / 4, w);
            ASSERT_EQ(d[i], w[i % 4] < threshold ? 0.0 : scale) << "dropout element " << i;
        }
        for (int64_t i = 0; i < 1001; i++) {
            uint32_t w[4];
            tg_philox(7, mask_counters + (uint64_t)i / 4, w);
            ASSERT_EQ(b[i], (double)w[i % 4] * (1.0 / 4294967296.0) < probs[i] ? 1.0 : 0.0) << "bernoulli " << i;
        }
        EXPECT_EQ(tg_rng_get_state().offset, mask_counters + (1001 + 3) / 4);
        // tg_bernoulli_ with a scalar p: the same kernel, p for every element.
        tg_manual_seed(9);
        tg_tensor *g = tg_empty(TG_SHAPE(101), tg_opts{dt, tg_cuda(0), false});
        ASSERT_EQ(tg_bernoulli_(g, 0.25), TG_OK) << tg_last_error();
        std::vector<double> gv = values(g);
        double p_dt = dt == TG_FLOAT32 ? (double)0.25f : 0.25;
        for (int64_t i = 0; i < 101; i++) {
            uint32_t w[4];
            tg_philox(9, (uint64_t)i / 4, w);
            ASSERT_EQ(gv[i], (double)w[i % 4] * (1.0 / 4294967296.0) < p_dt ? 1.0 : 0.0) << "bernoulli_ " << i;
        }
    }
}

// tg_dropout2d: one Philox word per [n, c] channel (the mask [N, C, 1, 1] is drawn as
// tg_dropout draws), broadcast over the plane; the gradient is the same mask.
TEST_F(TgTest, CudaDropout2dDrawsOneWordPerChannel) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        tg_tensor *x = tg_ones(TG_SHAPE(3, 7, 4, 5), tg_opts{dt, TG_CPU, false});
        tg_tensor *gx = on_cuda(x);
        tg_requires_grad_(gx, true);
        tg_manual_seed(7);
        tg_tensor *y = tg_dropout2d(gx, 0.3, true);
        ASSERT_NE(y, nullptr) << tg_last_error();
        ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK) << tg_last_error();
        std::vector<double> v = values(y), g = values(tg_grad(gx));
        double keep = 1.0 - 0.3, scale = dt == TG_FLOAT32 ? (double)(1.0f / (float)keep) : 1.0 / keep;
        uint64_t threshold = (uint64_t)(0.3 * 4294967296.0);
        for (int64_t i = 0; i < 3 * 7 * 20; i++) {
            int64_t channel = i / 20;
            uint32_t w[4];
            tg_philox(7, (uint64_t)channel / 4, w);
            double expected = w[channel % 4] < threshold ? 0.0 : scale;
            ASSERT_EQ(v[i], expected) << "element " << i;
            ASSERT_EQ(g[i], expected) << "gradient " << i;
        }
        EXPECT_EQ(tg_rng_get_state().offset, (uint64_t)(3 * 7 + 3) / 4);
    }
}

// tg_conv_transpose2d runs conv2d's input-gradient kernel forward: values and
// gradients against the CPU.
TEST_F(TgTest, CudaConvTranspose2dMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        tg_tensor *x = random_cpu(TG_SHAPE(3, 4, 5, 6), dt, 1), *w = random_cpu(TG_SHAPE(4, 3, 3, 2), dt, 2);
        tg_tensor *b = random_cpu(TG_SHAPE(6), dt, 3);
        CompareOpts o;
        EXPECT_TRUE(compare_devices(
            [](const std::vector<tg_tensor *> &in) {
                return tg_conv_transpose2d(
                    in[0], in[1], in[2],
                    tg_conv_transpose_opts{.stride = 2, .padding = 1, .output_padding = 1, .dilation = 2, .groups = 2});
            },
            {x, w, b}, o))
            << tg_dtype_name(dt);
    }
}

// tg_interpolate (index_select and broadcast arithmetic on the device).
TEST_F(TgTest, CudaInterpolateMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_interpolate_opts modes[] = {{.mode = TG_INTERP_NEAREST, .scale_factor = {2}},
                                   {.mode = TG_INTERP_BILINEAR, .scale_factor = {1.7, 0.6}},
                                   {.mode = TG_INTERP_BILINEAR, .size = {9, 5}, .align_corners = true}};
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        tg_tensor *x = random_cpu(TG_SHAPE(2, 3, 6, 7), dt, 4);
        for (const tg_interpolate_opts &o : modes)
            EXPECT_TRUE(
                compare_devices([&](const std::vector<tg_tensor *> &in) { return tg_interpolate(in[0], o); }, {x}))
                << tg_dtype_name(dt) << " mode " << o.mode;
    }
}

// Conv1d, ConvTranspose2d, GroupNorm, InstanceNorm2d (eval) are composed of device ops:
// the same module moved to CUDA gives the CPU's outputs.
TEST_F(TgTest, CudaComposedModulesMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_manual_seed(3);
    tg_module *modules[] = {tg_nn_conv1d(4, 6, 3, tg_conv_opts{.stride = 2, .padding = 1}),
                            tg_nn_group_norm(2, 4, tg_group_norm_opts{}),
                            tg_nn_instance_norm2d(4, tg_instance_norm_opts{.affine = true}),
                            tg_nn_conv_transpose2d(4, 2, 3, tg_conv_transpose_opts{.stride = 2})};
    tg_shape shapes[] = {TG_SHAPE(2, 4, 9), TG_SHAPE(2, 4, 3, 5), TG_SHAPE(2, 4, 3, 5), TG_SHAPE(2, 4, 3, 5)};
    for (int i = 0; i < 4; i++) {
        tg_tensor *x = random_cpu(shapes[i], TG_FLOAT32, 5 + i);
        tg_tensor *cpu = tg_forward(modules[i], x);
        ASSERT_EQ(tg_module_to(modules[i], tg_cuda(0)), TG_OK) << tg_last_error();
        tg_tensor *gpu = tg_forward(modules[i], on_cuda(x));
        EXPECT_TRUE(same_values(cpu, gpu, 1e-5, 1e-5)) << tg_module_type_of(modules[i])->name;
        tg_module_free(modules[i]);
    }
}

// LSTM, GRU and RNN (compositions of device ops) moved to CUDA give the CPU's results.
TEST_F(TgTest, CudaRecurrentModulesMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    tg_manual_seed(5);
    tg_module *modules[] = {tg_nn_lstm(3, 4, tg_rnn_opts{.num_layers = 2, .bidirectional = true}),
                            tg_nn_gru(3, 4, tg_rnn_opts{.batch_first = true}), tg_nn_lstm_cell(3, 4, tg_rnn_opts{})};
    tg_shape shapes[] = {TG_SHAPE(5, 2, 3), TG_SHAPE(2, 5, 3), TG_SHAPE(2, 3)};
    for (int i = 0; i < 3; i++) {
        tg_tensor *x = random_cpu(shapes[i], TG_FLOAT32, 8 + i);
        tg_rnn_result cpu, gpu;
        ASSERT_EQ(tg_rnn_forward(modules[i], x, nullptr, nullptr, &cpu), TG_OK) << tg_last_error();
        ASSERT_EQ(tg_module_to(modules[i], tg_cuda(0)), TG_OK) << tg_last_error();
        ASSERT_EQ(tg_rnn_forward(modules[i], on_cuda(x), nullptr, nullptr, &gpu), TG_OK) << tg_last_error();
        EXPECT_TRUE(same_values(cpu.output, gpu.output, 1e-5, 1e-5)) << i;
        EXPECT_TRUE(same_values(cpu.h_n, gpu.h_n, 1e-5, 1e-5)) << i;
        if (cpu.c_n) {
            EXPECT_TRUE(same_values(cpu.c_n, gpu.c_n, 1e-5, 1e-5)) << i;
        }
        tg_module_free(modules[i]);
    }
}

// tg_scaled_dot_product_attention (matmul, softmax, masks on the device) and
// MultiheadAttention moved to CUDA give the CPU's results.
TEST_F(TgTest, CudaAttentionMatchesCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (tg_dtype dt : {TG_FLOAT32, TG_FLOAT64}) {
        tg_tensor *q = random_cpu(TG_SHAPE(2, 3, 5, 8), dt, 1), *k = random_cpu(TG_SHAPE(2, 3, 7, 8), dt, 2);
        tg_tensor *v = random_cpu(TG_SHAPE(2, 3, 7, 4), dt, 3), *m = random_cpu(TG_SHAPE(5, 7), dt, 4);
        EXPECT_TRUE(compare_devices(
            [](const std::vector<tg_tensor *> &in) {
                return tg_scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.0, false);
            },
            {q, k, v, m}))
            << tg_dtype_name(dt);
        EXPECT_TRUE(compare_devices(
            [](const std::vector<tg_tensor *> &in) {
                return tg_scaled_dot_product_attention(in[0], in[1], in[2], nullptr, 0.0, true);
            },
            {q, k, v}))
            << tg_dtype_name(dt) << " causal";
    }
    tg_manual_seed(2);
    tg_module *mha = tg_nn_multihead_attention(8, 2, tg_mha_opts{});
    tg_tensor *x = random_cpu(TG_SHAPE(5, 3, 8), TG_FLOAT32, 6);
    tg_tensor *cpu_out = nullptr, *cpu_w = nullptr, *gpu_out = nullptr, *gpu_w = nullptr;
    ASSERT_EQ(tg_mha_forward(mha, x, x, x, tg_mha_call_opts{}, &cpu_out, &cpu_w), TG_OK) << tg_last_error();
    ASSERT_EQ(tg_module_to(mha, tg_cuda(0)), TG_OK) << tg_last_error();
    tg_tensor *gx = on_cuda(x);
    ASSERT_EQ(tg_mha_forward(mha, gx, gx, gx, tg_mha_call_opts{}, &gpu_out, &gpu_w), TG_OK) << tg_last_error();
    EXPECT_TRUE(same_values(cpu_out, gpu_out, 1e-5, 1e-5));
    EXPECT_TRUE(same_values(cpu_w, gpu_w, 1e-5, 1e-5));
    tg_module_free(mha);
}

TEST_F(TgTest, CudaOptimizerStepsMatchCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    for (int kind = 0; kind < 4; kind++) {
        tg_tensor *p = tg_requires_grad_(random_cpu(TG_SHAPE(300, 7), TG_FLOAT32, 1), true);
        tg_tensor *gp = tg_requires_grad_(on_cuda(p), true);
        tg_optim *opt = nullptr, *gopt = nullptr;
        if (kind == 0) {
            tg_sgd_opts o = {0.1, 0.9, 0, 1e-4, true, false};
            opt = tg_sgd_params(&p, 1, o);
            gopt = tg_sgd_params(&gp, 1, o);
        } else if (kind == 1 || kind == 2) {
            tg_adam_opts o = {1e-2, {0.9, 0.999}, 1e-8, kind == 2 ? 1e-2 : 0, kind == 2, false};
            opt = tg_adam_params(&p, 1, o);
            gopt = tg_adam_params(&gp, 1, o);
        } else {
            tg_rmsprop_opts o = {1e-2, 0.99, 1e-8, 0, 0.5, true, false};
            opt = tg_rmsprop_params(&p, 1, o);
            gopt = tg_rmsprop_params(&gp, 1, o);
        }
        ASSERT_NE(opt, nullptr) << tg_last_error();
        ASSERT_NE(gopt, nullptr) << tg_last_error();
        for (int step = 0; step < 3; step++) {
            TG_SCOPE {
                ASSERT_EQ(tg_backward(tg_sum(tg_sin(tg_mul(p, p)))), TG_OK);
                ASSERT_EQ(tg_backward(tg_sum(tg_sin(tg_mul(gp, gp)))), TG_OK) << tg_last_error();
                ASSERT_EQ(tg_optim_step(opt), TG_OK);
                ASSERT_EQ(tg_optim_step(gopt), TG_OK) << tg_last_error();
                tg_optim_zero_grad(opt);
                tg_optim_zero_grad(gopt);
            }
        }
        EXPECT_TRUE(same_values(p, gp, 1e-5, 1e-5)) << "optimizer kind " << kind;
        tg_optim_free(opt);
        tg_optim_free(gopt);
    }
}

// 784-256-10 MLP, Adam, three steps on each device from the same initial weights.
static std::vector<double> mlp_losses(tg_device device, int steps) {
    std::vector<double> losses;
    tg_manual_seed(0);
    tg_module *layers[] = {tg_nn_linear(784, 256, {}), tg_nn_relu(), tg_nn_linear(256, 10, {})};
    tg_module *model = tg_nn_sequential(3, layers);
    if (!model || tg_module_to(model, device)) return losses;
    tg_adam_opts ao = {};
    ao.lr = 1e-3;
    tg_optim *opt = tg_adam(model, ao);
    TG_SCOPE {
        tg_tensor *x = tg_tensor_to(random_cpu(TG_SHAPE(64, 784), TG_FLOAT32, 5, 0, 1), device);
        tg_tensor *y = tg_tensor_to(tg_cast(random_cpu(TG_SHAPE(64), TG_FLOAT64, 6, 0, 9.99), TG_INT64), device);
        for (int s = 0; s < steps; s++) {
            TG_SCOPE {
                tg_tensor *loss = tg_cross_entropy(tg_forward(model, x), y);
                if (loss && !tg_backward(loss) && !tg_optim_step(opt)) losses.push_back(tg_item(loss));
                tg_optim_zero_grad(opt);
            }
        }
    }
    tg_optim_free(opt);
    tg_module_free(model);
    return losses;
}

TEST_F(TgTest, CudaMlpTrainingStepGivesTheCpuLoss) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    std::vector<double> cpu = mlp_losses(TG_CPU, 3), gpu = mlp_losses(tg_cuda(0), 3);
    ASSERT_EQ(cpu.size(), 3u);
    ASSERT_EQ(gpu.size(), 3u) << tg_last_error();
    for (int s = 0; s < 3; s++) EXPECT_NEAR(gpu[s], cpu[s], 1e-4 * std::fabs(cpu[s]) + 1e-5) << "step " << s;
    EXPECT_LT(cpu[2], cpu[0]); // it learns
    // a second run makes no new cudaMalloc (the caching allocator)
    tg_cuda_allocator_stats before = tg_cuda_memory_stats(0);
    mlp_losses(tg_cuda(0), 3);
    EXPECT_EQ(tg_cuda_memory_stats(0).num_mallocs, before.num_mallocs);
}
