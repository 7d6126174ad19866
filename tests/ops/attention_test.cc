// The fused scaled_dot_product_attention (ops/attention.c, ops/cpu/attention.c) against
// the composed formula (tg_scaled_dot_product_attention_composed): values and the
// gradients of q, k and v for bool and additive masks, is_causal with L = S, L < S and
// L > S, lengths that are not multiples of the 64-row blocks, transposed views,
// broadcast batch dims, grouped query heads, an explicit scale, bfloat16; a fully
// masked row, errors, gradcheck and gradgradcheck (the latter through the composed
// path), thread-count independence, and the memory bound at T = 4096.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ops/cpu/attention.h"
#include "test_util.h"

namespace {

class AttentionFusedTest : public TgTest {};

struct Case {
    const char *name;
    std::vector<int64_t> q, k, v; // the shapes the op sees
    int mask = 0;                 // 0 none, 1 bool, 2 additive
    std::vector<int64_t> mask_shape = {};
    bool causal = false, transposed = false, gqa = false;
    bool merge_heads = false; // the loss reads y as a GPT does: [B, L, H * ev] = y.transpose(1, 2)
    double scale = 0;
};

tg_shape shape_of(const std::vector<int64_t> &d) { return tg_shape_from((int)d.size(), d.data()); }

struct Outcome {
    std::vector<double> y, dq, dk, dv;
};

// Leaves of the case's shapes (with dims 1 and 2 swapped when `transposed`, so the op
// sees transposed views), the same seed for both paths; loss = sum(y * w).
Outcome run(const Case &c, tg_dtype dt, bool fused) {
    Outcome r;
    TG_SCOPE {
        tg_manual_seed(7);
        tg_opts o = {dt, TG_CPU, false};
        tg_tensor *leaf[3], *in[3];
        const std::vector<int64_t> *shapes[3] = {&c.q, &c.k, &c.v};
        for (int i = 0; i < 3; i++) {
            std::vector<int64_t> s = *shapes[i];
            if (c.transposed) std::swap(s[1], s[2]);
            leaf[i] = tg_requires_grad_(tg_cast(tg_randn(shape_of(s), tg_opts{}), dt), true);
            in[i] = c.transposed ? tg_transpose(leaf[i], 1, 2) : leaf[i];
        }
        tg_sdpa_opts so = {};
        if (c.mask == 1) so.attn_mask = tg_gt_scalar(tg_rand(shape_of(c.mask_shape), tg_opts{}), 0.2);
        if (c.mask == 2) so.attn_mask = tg_cast(tg_randn(shape_of(c.mask_shape), tg_opts{}), dt);
        so.is_causal = c.causal;
        so.enable_gqa = c.gqa;
        so.scale = c.scale;
        tg_tensor *y = fused ? tg_scaled_dot_product_attention_opts(in[0], in[1], in[2], so)
                             : tg_scaled_dot_product_attention_composed(in[0], in[1], in[2], so);
        EXPECT_NE(y, nullptr) << c.name << ": " << tg_last_error();
        if (!y) break;
        if (c.merge_heads) {
            tg_tensor *heads_last = tg_transpose(y, 1, 2); /* the fused output's memory order: no copy */
            if (fused) {
                EXPECT_TRUE(tg_is_contiguous(heads_last)) << c.name;
            }
            int64_t b = tg_size(y, 0), l = tg_size(y, 2);
            y = tg_reshape(heads_last, TG_SHAPE(b, l, -1));
        }
        tg_tensor *w = tg_cast(tg_randn(tg_shape_of(y), tg_opts{}), dt);
        EXPECT_EQ(tg_backward(tg_sum(tg_mul(y, w))), TG_OK) << tg_last_error();
        r.y = values(y);
        r.dq = values(tg_grad(leaf[0]));
        r.dk = values(tg_grad(leaf[1]));
        r.dv = values(tg_grad(leaf[2]));
        (void)o;
    }
    return r;
}

::testing::AssertionResult near(const std::vector<double> &a, const std::vector<double> &b, double atol, double rtol) {
    if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " vs " << b.size();
    for (size_t i = 0; i < a.size(); i++) {
        if (std::isnan(a[i]) && std::isnan(b[i])) continue;
        if (!(std::fabs(a[i] - b[i]) <= atol + rtol * std::fabs(b[i])))
            return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
    }
    return ::testing::AssertionSuccess();
}

void expect_match(const Case &c, tg_dtype dt, double atol, double rtol) {
    SCOPED_TRACE(std::string(c.name) + " " + tg_dtype_name(dt));
    Outcome f = run(c, dt, true), ref = run(c, dt, false);
    ASSERT_FALSE(ref.y.empty());
    EXPECT_TRUE(near(f.y, ref.y, atol, rtol)) << "output";
    EXPECT_TRUE(near(f.dq, ref.dq, atol, rtol)) << "dq";
    EXPECT_TRUE(near(f.dk, ref.dk, atol, rtol)) << "dk";
    EXPECT_TRUE(near(f.dv, ref.dv, atol, rtol)) << "dv";
}

const std::vector<Case> &cases() {
    static const std::vector<Case> all = [] {
        std::vector<Case> v;
        v.push_back({"plain", {2, 3, 17, 8}, {2, 3, 23, 8}, {2, 3, 23, 5}});
        v.push_back({"odd_lengths_many_blocks", {1, 2, 130, 16}, {1, 2, 197, 16}, {1, 2, 197, 12}});
        Case bool_mask = {"bool_mask", {2, 2, 70, 8}, {2, 2, 90, 8}, {2, 2, 90, 8}, 1, {2, 1, 70, 90}};
        v.push_back(bool_mask);
        Case add_mask = {"additive_mask", {2, 2, 70, 8}, {2, 2, 90, 8}, {2, 2, 90, 8}, 2, {70, 90}};
        v.push_back(add_mask);
        Case add_row = {"additive_mask_row", {2, 2, 33, 8}, {2, 2, 65, 8}, {2, 2, 65, 8}, 2, {2, 1, 1, 65}};
        v.push_back(add_row);
        Case causal = {"causal_square", {2, 2, 129, 16}, {2, 2, 129, 16}, {2, 2, 129, 16}};
        causal.causal = true;
        v.push_back(causal);
        Case causal_wide = causal;
        causal_wide.name = "causal_L_lt_S", causal_wide.k = {2, 2, 150, 16}, causal_wide.v = {2, 2, 150, 16};
        v.push_back(causal_wide);
        Case causal_tall = causal;
        causal_tall.name = "causal_L_gt_S", causal_tall.k = {2, 2, 70, 16}, causal_tall.v = {2, 2, 70, 16};
        v.push_back(causal_tall);
        Case tr = {"transposed_views", {2, 3, 67, 8}, {2, 3, 45, 8}, {2, 3, 45, 8}};
        tr.transposed = true;
        v.push_back(tr);
        v.push_back({"broadcast_batch", {2, 3, 19, 8}, {3, 21, 8}, {1, 3, 21, 4}});
        Case gqa = {"grouped_query_heads", {2, 6, 40, 8}, {2, 2, 75, 8}, {2, 2, 75, 8}};
        gqa.gqa = true;
        gqa.causal = true;
        v.push_back(gqa);
        Case scaled = {"explicit_scale", {1, 1, 30, 8}, {1, 1, 30, 8}, {1, 1, 30, 8}};
        scaled.scale = 0.7;
        v.push_back(scaled);
        v.push_back({"unbatched", {5, 4}, {9, 4}, {9, 3}});
        // head dims of 32 and 24: the AVX-512 tiles' full and masked 32-column chunks
        v.push_back({"head_dims_32_24", {2, 2, 100, 32}, {2, 2, 140, 32}, {2, 2, 140, 24}});
        Case causal_32 = {"causal_head_dims_32_24", {1, 3, 150, 32}, {1, 3, 150, 32}, {1, 3, 150, 24}};
        causal_32.causal = true;
        v.push_back(causal_32);
        // a GPT's: heads merged back after the op, so its gradient comes in the output's layout
        Case gpt = {"gpt_merged_heads", {2, 4, 129, 32}, {2, 4, 129, 32}, {2, 4, 129, 32}};
        gpt.causal = gpt.transposed = gpt.merge_heads = true;
        v.push_back(gpt);
        Case merged = {"merged_heads_16_8", {3, 2, 70, 16}, {3, 2, 90, 16}, {3, 2, 90, 8}};
        merged.merge_heads = true;
        v.push_back(merged);
        return v;
    }();
    return all;
}

} // namespace

TEST_F(AttentionFusedTest, Float64MatchesComposed) {
    for (const Case &c : cases()) expect_match(c, TG_FLOAT64, 1e-12, 1e-11);
}

// On a CPU with AVX-512 both sets of leaf kernels (ops/cpu/attention_avx512.h and
// attention_avx2.h's) are checked.
TEST_F(AttentionFusedTest, Float32MatchesComposed) {
    for (bool avx512 : {true, false}) {
        SCOPED_TRACE(avx512 ? "AVX-512 kernels where the CPU has them" : "AVX2 kernels");
        bool was = tg_cpu_attention_set_avx512(avx512);
        for (const Case &c : cases()) expect_match(c, TG_FLOAT32, 2e-5, 2e-4);
        tg_cpu_attention_set_avx512(was);
    }
}

// bfloat16: computed in float32 and rounded once; the composed path rounds after every
// op, so the two agree to bfloat16's precision (8 bits), not to float32's.
TEST_F(AttentionFusedTest, Bfloat16MatchesComposedToItsPrecision) {
    for (int i : {0, 2, 5}) expect_match(cases()[(size_t)i], TG_BFLOAT16, 0.08, 0.05);
    tg_manual_seed(1);
    tg_tensor *q = tg_cast(tg_randn(TG_SHAPE(1, 9, 8), tg_opts{}), TG_BFLOAT16);
    tg_tensor *y = tg_scaled_dot_product_attention(q, q, q, nullptr, 0.0, false);
    ASSERT_NE(y, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(y), TG_BFLOAT16);
}

TEST_F(AttentionFusedTest, FullyMaskedRowIsNaNAsPyTorchsMathPath) {
    tg_manual_seed(3);
    tg_tensor *q = tg_randn(TG_SHAPE(1, 3, 4), tg_opts{}), *k = tg_randn(TG_SHAPE(1, 5, 4), tg_opts{});
    bool m[15] = {true, true, false, true, true, false, false, false, false, false, false, false, false, true, true};
    tg_tensor *mask = tg_from_data(m, TG_SHAPE(3, 5), tg_opts{TG_BOOL});
    tg_tensor *y = tg_scaled_dot_product_attention(q, k, k, mask, 0.0, false);
    tg_tensor *ref = tg_scaled_dot_product_attention_composed(q, k, k, tg_sdpa_opts{mask});
    ASSERT_TRUE(y && ref) << tg_last_error();
    std::vector<double> got = values(y), want = values(ref);
    for (int j = 0; j < 4; j++) {
        EXPECT_TRUE(std::isnan(got[4 + j])) << j;
        EXPECT_TRUE(std::isnan(want[4 + j])) << j;
    }
    EXPECT_TRUE(near(got, want, 1e-6, 1e-5));
}

TEST_F(AttentionFusedTest, ErrorsNameTheOpAndShapes) {
    tg_tensor *q = tg_zeros(TG_SHAPE(2, 3, 4), tg_opts{}), *k = tg_zeros(TG_SHAPE(2, 5, 4), tg_opts{});
    tg_tensor *v = tg_zeros(TG_SHAPE(2, 5, 3), tg_opts{});
    EXPECT_EQ(tg_scaled_dot_product_attention_opts(q, v, k, tg_sdpa_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_scaled_dot_product_attention: expected query [..., L, E], key [..., S, E] and value "
                          "[..., S, Ev], got query [2, 3, 4], key [2, 5, 3], value [2, 5, 4]");
    tg_clear_error();
    tg_tensor *k3 = tg_zeros(TG_SHAPE(3, 5, 4), tg_opts{}), *v3 = tg_zeros(TG_SHAPE(3, 5, 3), tg_opts{});
    EXPECT_EQ(tg_scaled_dot_product_attention_opts(q, k3, v3, tg_sdpa_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("the batch dims of query [2, 3, 4], key [3, 5, 4] and value [3, 5, 3] do not broadcast");
    tg_clear_error();
    tg_tensor *q4 = tg_zeros(TG_SHAPE(1, 6, 3, 4), tg_opts{}), *k4 = tg_zeros(TG_SHAPE(1, 4, 5, 4), tg_opts{});
    tg_sdpa_opts gqa = {};
    gqa.enable_gqa = true;
    EXPECT_EQ(tg_scaled_dot_product_attention_opts(q4, k4, k4, gqa), nullptr);
    EXPECT_ERROR_CONTAINS("enable_gqa needs key and value with one head count (dim -3) dividing the query's, got "
                          "query [1, 6, 3, 4], key [1, 4, 5, 4]");
    tg_clear_error();
    EXPECT_EQ(tg_scaled_dot_product_attention_opts(q, k, tg_cast(v, TG_FLOAT64), tg_sdpa_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("expected query, key and value of one floating dtype, got float32, float32, float64");
}

namespace {
tg_tensor *fused_fn(tg_tensor *const *in, void *user) {
    tg_sdpa_opts o = {};
    o.attn_mask = user ? nullptr : in[3];
    o.is_causal = user != nullptr;
    return tg_scaled_dot_product_attention_opts(in[0], in[1], in[2], o);
}
} // namespace

TEST_F(AttentionFusedTest, GradcheckFirstAndSecondOrder) {
    tg_manual_seed(4);
    tg_opts o = {TG_FLOAT64, TG_CPU, true};
    tg_tensor *in[] = {tg_randn(TG_SHAPE(2, 5, 4), o), tg_randn(TG_SHAPE(2, 7, 4), o), tg_randn(TG_SHAPE(2, 7, 3), o),
                       tg_randn(TG_SHAPE(5, 7), tg_opts{TG_FLOAT64})};
    tg_gradcheck_opts go = {};
    EXPECT_EQ(tg_gradcheck(fused_fn, 4, in, &go), TG_OK) << tg_last_error();
    int causal = 1;
    go.user = &causal;
    EXPECT_EQ(tg_gradcheck(fused_fn, 3, in, &go), TG_OK) << tg_last_error();
    go.user = nullptr;
    EXPECT_EQ(tg_gradgradcheck(fused_fn, 4, in, &go), TG_OK) << tg_last_error(); // through the composed formula
}

TEST_F(AttentionFusedTest, ResultsDoNotDependOnTheThreadCount) {
    int threads = tg_get_num_threads();
    Case c = {"threads", {1, 4, 200, 32}, {1, 4, 200, 32}, {1, 4, 200, 32}};
    for (bool avx512 : {true, false}) {
        bool was = tg_cpu_attention_set_avx512(avx512);
        std::vector<Outcome> runs;
        for (int n : {1, 2, 3}) {
            tg_set_num_threads(n);
            runs.push_back(run(c, TG_FLOAT32, true));
        }
        tg_set_num_threads(threads);
        tg_cpu_attention_set_avx512(was);
        for (size_t i = 1; i < runs.size(); i++) {
            EXPECT_EQ(runs[i].y, runs[0].y);
            EXPECT_EQ(runs[i].dq, runs[0].dq);
            EXPECT_EQ(runs[i].dk, runs[0].dk);
            EXPECT_EQ(runs[i].dv, runs[0].dv);
        }
    }
}

namespace {
// Peak allocator bytes of forward + backward beyond what was allocated before (the
// inputs), T = 4096, one head of 64, float32.
size_t peak_bytes(bool fused) {
    size_t peak = 0;
    TG_SCOPE {
        tg_manual_seed(5);
        tg_opts o = {TG_FLOAT32, TG_CPU, true};
        tg_tensor *q = tg_randn(TG_SHAPE(1, 4096, 64), o), *k = tg_randn(TG_SHAPE(1, 4096, 64), o);
        tg_tensor *v = tg_randn(TG_SHAPE(1, 4096, 64), o);
        size_t before = tg_cpu_memory_stats().allocated;
        tg_cpu_reset_peak_memory_stats();
        tg_sdpa_opts so = {};
        so.is_causal = true;
        TG_SCOPE {
            tg_tensor *y = fused ? tg_scaled_dot_product_attention_opts(q, k, v, so)
                                 : tg_scaled_dot_product_attention_composed(q, k, v, so);
            EXPECT_EQ(tg_backward(tg_sum(y)), TG_OK) << tg_last_error();
        }
        peak = tg_cpu_memory_stats().peak - before;
    }
    return peak;
}
} // namespace

TEST_F(AttentionFusedTest, MemoryAtT4096IsUnderATenthOfTheComposed) {
    size_t fused = peak_bytes(true), composed = peak_bytes(false);
    RecordProperty("fused_peak_bytes", std::to_string(fused));
    RecordProperty("composed_peak_bytes", std::to_string(composed));
    std::printf("T=4096, 1 head of 64, float32, forward + backward peak beyond the inputs: fused %.2f MiB, composed "
                "%.2f MiB\n",
                fused / 1048576.0, composed / 1048576.0);
    EXPECT_LT(fused * 10, composed);
    EXPECT_LT(fused, (size_t)16 << 20); // O(T): outputs, gradients, statistics, never [T, T]
}

// A GPT's attention: q, k and v split from one qkv projection [B, T, 3 C] and heads
// merged back after. The fused op packs dq, dk and dv into one [B, T, 3 C] buffer, so the
// split's gradient is that buffer, no cat (the profile has no cat row); qkv's gradient
// matches the composed formula's, whose backward does concatenate.
namespace {
struct GptRun {
    std::vector<double> y, dqkv;
    bool concatenated = false;
};

GptRun gpt_attention(bool fused) {
    GptRun r;
    TG_SCOPE {
        tg_manual_seed(11);
        const int64_t B = 2, T = 129, H = 4, D = 32, C = H * D;
        tg_tensor *qkv = tg_requires_grad_(tg_randn(TG_SHAPE(B, T, 3 * C), tg_opts{}), true);
        tg_tensor *w = tg_randn(TG_SHAPE(B, T, C), tg_opts{});
        tg_tensor *parts[3];
        EXPECT_EQ(tg_split(qkv, C, 2, parts, 3), 3) << tg_last_error();
        tg_tensor *heads[3];
        for (int i = 0; i < 3; i++) heads[i] = tg_transpose(tg_reshape(parts[i], TG_SHAPE(B, T, H, D)), 1, 2);
        tg_sdpa_opts so = {};
        so.is_causal = true;
        tg_profile_reset();
        tg_profile_enable(true);
        tg_tensor *y = fused ? tg_scaled_dot_product_attention_opts(heads[0], heads[1], heads[2], so)
                             : tg_scaled_dot_product_attention_composed(heads[0], heads[1], heads[2], so);
        EXPECT_NE(y, nullptr) << tg_last_error();
        if (!y) break;
        y = tg_reshape(tg_transpose(y, 1, 2), TG_SHAPE(B, T, C));
        EXPECT_EQ(tg_backward(tg_sum(tg_mul(y, w))), TG_OK) << tg_last_error();
        tg_profile_enable(false);
        char *buf = nullptr;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        tg_profile_print(f);
        fclose(f);
        r.concatenated = std::string(buf).find("\ncat ") != std::string::npos;
        free(buf);
        tg_profile_reset();
        r.y = values(y);
        r.dqkv = values(tg_grad(qkv));
    }
    return r;
}
} // namespace

TEST_F(AttentionFusedTest, GptSplitQkvGradientNeedsNoCat) {
    GptRun fused = gpt_attention(true), composed = gpt_attention(false);
    ASSERT_FALSE(composed.y.empty());
    EXPECT_TRUE(near(fused.y, composed.y, 2e-5, 2e-4)) << "output";
    EXPECT_TRUE(near(fused.dqkv, composed.dqkv, 2e-5, 2e-4)) << "qkv's gradient";
    EXPECT_FALSE(fused.concatenated) << "the split's backward concatenated the fused op's gradients";
    EXPECT_TRUE(composed.concatenated) << "the composed path's split no longer concatenates: the check above is moot";
}
