// The fused CUDA attention (ops/cuda/attention.cu) against the composed formula on the
// CPU (tg_scaled_dot_product_attention_composed): values and the gradients of q, k and
// v, float32 and float64, plain, bool and additive masks, is_causal with L != S, odd
// lengths, transposed views, broadcast batch dims, grouped query heads, bfloat16 (cast
// to float32 by the op); a GPT's q, k, v split from one qkv (heads-last results, packed
// gradients). SKIPPED without a GPU.
#include <vector>

#include "cuda_test_util.h"

namespace {

struct Case {
    const char *name;
    tg_shape q, k, v;
    int mask; // 0 none, 1 bool [L, S], 2 additive [L, S]
    bool causal, gqa, transposed;
};

// Inputs on the CPU; fused on CUDA vs composed on the CPU.
void check(const Case &c, tg_dtype dt, double tol) {
    SCOPED_TRACE(std::string(c.name) + " " + tg_dtype_name(dt));
    std::vector<tg_tensor *> in = {random_cpu(c.q, dt, 1), random_cpu(c.k, dt, 2), random_cpu(c.v, dt, 3)};
    int64_t l = c.q.dims[c.q.ndim - 2], s = c.k.dims[c.k.ndim - 2];
    if (c.mask == 1) in.push_back(tg_gt_scalar(random_cpu(TG_SHAPE(l, s), TG_FLOAT32, 4, 0, 1), 0.2));
    if (c.mask == 2) in.push_back(random_cpu(TG_SHAPE(l, s), dt, 4));
    bool gqa = c.gqa, causal = c.causal, transposed = c.transposed;
    auto call = [=](const std::vector<tg_tensor *> &x, bool fused) {
        tg_sdpa_opts o = {};
        o.attn_mask = x.size() > 3 ? x[3] : nullptr;
        o.is_causal = causal;
        o.enable_gqa = gqa;
        tg_tensor *q = transposed ? tg_transpose(tg_contiguous(tg_transpose(x[0], 1, 2)), 1, 2) : x[0];
        return fused ? tg_scaled_dot_product_attention_opts(q, x[1], x[2], o)
                     : tg_scaled_dot_product_attention_composed(q, x[1], x[2], o);
    };
    // compare_devices runs one function on both devices; the reference is the composed
    // formula on the CPU, so run that first and compare the CUDA fused run to it.
    std::vector<tg_tensor *> cpu, gpu;
    for (size_t i = 0; i < in.size(); i++) {
        bool grad = i < 3;
        cpu.push_back(grad ? tg_requires_grad_(tg_clone(in[i]), true) : in[i]);
        gpu.push_back(grad ? tg_requires_grad_(on_cuda(in[i]), true) : on_cuda(in[i]));
    }
    tg_tensor *ref = call(cpu, false), *got = call(gpu, true);
    ASSERT_TRUE(ref && got) << tg_last_error();
    tg_tensor *w = random_cpu(tg_shape_of(ref), dt, 9);
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(ref, w))), TG_OK) << tg_last_error();
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(got, on_cuda(w)))), TG_OK) << tg_last_error();
    EXPECT_TRUE(same_values(ref, got, tol, tol)) << "output";
    for (int i = 0; i < 3; i++) EXPECT_TRUE(same_values(tg_grad(cpu[i]), tg_grad(gpu[i]), tol, tol)) << "grad " << i;
}

} // namespace

TEST_F(TgTest, CudaFusedAttentionMatchesComposedCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    const Case cases[] = {
        {"plain", TG_SHAPE(2, 3, 17, 8), TG_SHAPE(2, 3, 23, 8), TG_SHAPE(2, 3, 23, 5), 0, false, false, false},
        {"odd_lengths", TG_SHAPE(1, 2, 130, 64), TG_SHAPE(1, 2, 197, 64), TG_SHAPE(1, 2, 197, 64), 0, false, false,
         false},
        {"bool_mask", TG_SHAPE(2, 2, 40, 16), TG_SHAPE(2, 2, 50, 16), TG_SHAPE(2, 2, 50, 16), 1, false, false, false},
        {"additive_mask", TG_SHAPE(2, 2, 40, 16), TG_SHAPE(2, 2, 50, 16), TG_SHAPE(2, 2, 50, 16), 2, false, false,
         false},
        {"causal_L_lt_S", TG_SHAPE(2, 2, 70, 32), TG_SHAPE(2, 2, 90, 32), TG_SHAPE(2, 2, 90, 32), 0, true, false,
         false},
        {"causal_L_gt_S", TG_SHAPE(2, 2, 90, 32), TG_SHAPE(2, 2, 70, 32), TG_SHAPE(2, 2, 70, 32), 0, true, false,
         false},
        {"transposed", TG_SHAPE(2, 3, 33, 8), TG_SHAPE(2, 3, 33, 8), TG_SHAPE(2, 3, 33, 8), 0, false, false, true},
        {"broadcast_batch", TG_SHAPE(2, 3, 19, 8), TG_SHAPE(3, 21, 8), TG_SHAPE(1, 3, 21, 4), 0, false, false, false},
        {"gqa", TG_SHAPE(2, 6, 40, 8), TG_SHAPE(2, 2, 75, 8), TG_SHAPE(2, 2, 75, 8), 0, true, true, false},
        {"head_128", TG_SHAPE(1, 1, 65, 128), TG_SHAPE(1, 1, 65, 128), TG_SHAPE(1, 1, 65, 128), 0, true, false, false},
    };
    for (const Case &c : cases) {
        check(c, TG_FLOAT32, 1e-4);
        check(c, TG_FLOAT64, 1e-10);
    }
    check(cases[0], TG_BFLOAT16, 0.08);
}

// A GPT's attention on CUDA: q, k, v split from one qkv [B, T, 3C] (the op then packs dq,
// dk, dv into one buffer, tg_attn_plan.grad_row, and the split takes it as its gradient),
// heads merged back after (the output heads-last). qkv's gradient and the output against
// the composed formula on the CPU.
TEST_F(TgTest, CudaFusedAttentionGptSplitQkvMatchesComposedCpu) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    const int64_t B = 2, T = 70, H = 4, D = 32, C = H * D;
    tg_tensor *qkv = random_cpu(TG_SHAPE(B, T, 3 * C), TG_FLOAT32, 5);
    tg_tensor *w = random_cpu(TG_SHAPE(B, T, C), TG_FLOAT32, 6);
    tg_tensor *y[2] = {nullptr, nullptr},
              *leaf[2] = {tg_requires_grad_(tg_clone(qkv), true), tg_requires_grad_(on_cuda(qkv), true)};
    for (int dev = 0; dev < 2; dev++) {
        tg_tensor *parts[3], *heads[3];
        ASSERT_EQ(tg_split(leaf[dev], C, 2, parts, 3), 3) << tg_last_error();
        for (int i = 0; i < 3; i++) heads[i] = tg_transpose(tg_reshape(parts[i], TG_SHAPE(B, T, H, D)), 1, 2);
        tg_sdpa_opts o = {};
        o.is_causal = true;
        tg_tensor *att = dev == 1 ? tg_scaled_dot_product_attention_opts(heads[0], heads[1], heads[2], o)
                                  : tg_scaled_dot_product_attention_composed(heads[0], heads[1], heads[2], o);
        ASSERT_NE(att, nullptr) << tg_last_error();
        y[dev] = tg_reshape(tg_transpose(att, 1, 2), TG_SHAPE(B, T, C));
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(y[dev], dev == 1 ? on_cuda(w) : w))), TG_OK) << tg_last_error();
    }
    EXPECT_TRUE(same_values(y[0], y[1], 1e-4, 1e-4)) << "output";
    EXPECT_TRUE(same_values(tg_grad(leaf[0]), tg_grad(leaf[1]), 1e-4, 1e-4)) << "qkv's gradient";
}
