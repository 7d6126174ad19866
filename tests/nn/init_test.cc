// Default initialisation statistics over many seeds against PyTorch's formulas
// (reset_parameters of torch.nn.Linear, Conv2d, Embedding, BatchNorm, LayerNorm):
// uniform bounds exact, standard deviations within a few percent.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

namespace {

struct Stats {
    double mean = 0, std = 0, max_abs = 0;
    size_t n = 0;
};

Stats stats_of(const std::vector<double> &v) {
    Stats s;
    s.n = v.size();
    for (double x : v) s.mean += x;
    s.mean /= (double)v.size();
    for (double x : v) {
        s.std += (x - s.mean) * (x - s.mean);
        s.max_abs = std::max(s.max_abs, std::fabs(x));
    }
    s.std = std::sqrt(s.std / (double)(v.size() - 1));
    return s;
}

// Collects `name` over `seeds` freshly made modules.
template <typename Make> std::vector<double> gather_over_seeds(Make make, const char *name, int seeds) {
    std::vector<double> all;
    for (int seed = 0; seed < seeds; seed++) {
        tg_manual_seed((uint64_t)seed + 1);
        tg_module *m = make();
        EXPECT_NE(m, nullptr) << tg_last_error();
        if (!m) return all;
        std::vector<double> v = values(tg_module_get(m, name));
        all.insert(all.end(), v.begin(), v.end());
        tg_module_free(m);
    }
    return all;
}

// U(-bound, bound): every value inside, the extremes close to the bound, mean ~0,
// std bound/sqrt(3) within 3%.
void expect_uniform(const std::vector<double> &v, double bound) {
    ASSERT_GT(v.size(), 1000u);
    Stats s = stats_of(v);
    EXPECT_LE(s.max_abs, bound);
    EXPECT_GT(s.max_abs, 0.99 * bound);
    double expected_std = bound / std::sqrt(3.0);
    EXPECT_NEAR(s.std, expected_std, 0.03 * expected_std);
    EXPECT_NEAR(s.mean, 0.0, 5 * expected_std / std::sqrt((double)s.n));
}

} // namespace

class InitTest : public TgTest {};

TEST_F(InitTest, LinearIsKaimingUniformWithASqrt5) {
    // kaiming_uniform_(a=sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in).
    auto make = [] { return tg_nn_linear(50, 40, tg_linear_opts{}); };
    expect_uniform(gather_over_seeds(make, "weight", 20), 1.0 / std::sqrt(50.0));
    expect_uniform(gather_over_seeds(make, "bias", 60), 1.0 / std::sqrt(50.0));
}

TEST_F(InitTest, Conv2dFanInIncludesTheReceptiveField) {
    // fan_in = in_channels / groups * k * k = 4 * 3 * 3 = 36.
    auto make = [] { return tg_nn_conv2d(4, 6, 3, tg_conv_opts{}); };
    expect_uniform(gather_over_seeds(make, "weight", 20), 1.0 / 6.0);
    expect_uniform(gather_over_seeds(make, "bias", 200), 1.0 / 6.0);
    // groups=2: fan_in = 2 * 3 * 3 = 18.
    auto grouped = [] { return tg_nn_conv2d(4, 6, 3, tg_conv_opts{.groups = 2}); };
    expect_uniform(gather_over_seeds(grouped, "weight", 30), 1.0 / std::sqrt(18.0));
}

TEST_F(InitTest, EmbeddingIsStandardNormal) {
    std::vector<double> v =
        gather_over_seeds([] { return tg_nn_embedding(100, 16, tg_embedding_opts{}); }, "weight", 10);
    Stats s = stats_of(v);
    EXPECT_NEAR(s.mean, 0.0, 5.0 / std::sqrt((double)s.n));
    EXPECT_NEAR(s.std, 1.0, 0.03);
}

TEST_F(InitTest, NormLayersStartAsIdentity) {
    tg_module *bn = tg_nn_batch_norm1d(5, tg_batch_norm_opts{});
    EXPECT_TRUE(tensor_near(tg_module_get(bn, "weight"), std::vector<double>(5, 1.0), 0));
    EXPECT_TRUE(tensor_near(tg_module_get(bn, "bias"), std::vector<double>(5, 0.0), 0));
    EXPECT_TRUE(tensor_near(tg_module_get(bn, "running_mean"), std::vector<double>(5, 0.0), 0));
    EXPECT_TRUE(tensor_near(tg_module_get(bn, "running_var"), std::vector<double>(5, 1.0), 0));
    EXPECT_TRUE(tensor_near(tg_module_get(bn, "num_batches_tracked"), {0}, 0));
    tg_module_free(bn);
    tg_module *plain = tg_nn_batch_norm2d(3, tg_batch_norm_opts{.no_affine = true, .no_track_running_stats = true});
    int n = -1;
    tg_state_dict(plain, &n);
    EXPECT_EQ(n, 0);
    tg_module_free(plain);
    tg_module *ln = tg_nn_layer_norm(TG_SHAPE(2, 3), tg_layer_norm_opts{});
    EXPECT_EQ(dims(tg_module_get(ln, "weight")), (std::vector<int64_t>{2, 3}));
    EXPECT_TRUE(tensor_near(tg_module_get(ln, "weight"), std::vector<double>(6, 1.0), 0));
    EXPECT_TRUE(tensor_near(tg_module_get(ln, "bias"), std::vector<double>(6, 0.0), 0));
    tg_module_free(ln);
}

TEST_F(InitTest, SameSeedSameWeights) {
    tg_manual_seed(7);
    tg_module *a = tg_nn_linear(10, 10, tg_linear_opts{});
    tg_manual_seed(7);
    tg_module *b = tg_nn_linear(10, 10, tg_linear_opts{});
    EXPECT_EQ(values(tg_module_get(a, "weight")), values(tg_module_get(b, "weight")));
    EXPECT_EQ(values(tg_module_get(a, "bias")), values(tg_module_get(b, "bias")));
    EXPECT_NE(values(tg_module_get(a, "weight")), values(tg_module_get(a, "bias")));
    tg_module_free(a);
    tg_module_free(b);
}
