/* scaled_dot_product_attention forward + backward, float32, batch 1, no mask: the fused
 * op (ops/cpu/attention.c) against the composed formula (matmul, softmax, matmul), at
 * T = 256, 1024, 4096 for one head of 64 and four heads of 32. The two alternate rep by
 * rep, so a busy machine slows both alike. Bench names "attention_<heads>x<dim>_<T>"
 * (impl tapegrad) and "..._composed". Twin: bench/attention_torch.py. */
#include "bench/bench_util.h"
#include "tapegrad.h"

static void report(const char *impl, int heads, int dim, int t, double median, double check, size_t peak) {
    double flops = 4.0 * heads * (double)t * t * dim * 2.5; /* fwd 2 products, bwd 5 (as FlashAttention counts) */
    printf("RESULT {\"bench\": \"attention_%dx%d_%d%s\", \"impl\": \"tapegrad\", \"seconds\": %.6g, \"unit_value\": "
           "%.4g, \"unit\": \"GFLOP/s\", \"check\": %.4f, \"peak_mib\": %.2f, \"peak_rss_mib\": %.1f}\n",
           heads, dim, t, impl, median, flops / median * 1e-9, check, (double)peak / 1048576.0, bench_peak_rss_mib());
}

int main(void) {
    const int lengths[] = {256, 1024, 4096}, shapes[2][2] = {{1, 64}, {4, 32}};
    for (int si = 0; si < 2; si++)
        for (int li = 0; li < 3; li++) {
            int heads = shapes[si][0], dim = shapes[si][1], t = lengths[li];
            int reps = t <= 256 ? 30 : t == 1024 ? 8 : 3;
            double times[2][30], check[2] = {0, 0};
            size_t peak[2] = {0, 0};
            tg_manual_seed(0);
            tg_opts o = {.requires_grad = true};
            tg_tensor *q = tg_randn(TG_SHAPE(1, heads, t, dim), o), *k = tg_randn(TG_SHAPE(1, heads, t, dim), o);
            tg_tensor *v = tg_randn(TG_SHAPE(1, heads, t, dim), o);
            for (int r = 0; r < reps + 1; r++)
                for (int fused = 1; fused >= 0; fused--) {
                    size_t before = tg_cpu_memory_stats().allocated;
                    tg_cpu_reset_peak_memory_stats();
                    double start = bench_now();
                    TG_SCOPE {
                        tg_tensor *y = fused ? tg_scaled_dot_product_attention_opts(q, k, v, (tg_sdpa_opts){0})
                                             : tg_scaled_dot_product_attention_composed(q, k, v, (tg_sdpa_opts){0});
                        tg_backward(tg_sum(y));
                        if (r == 0) check[fused] = tg_item(tg_sum(tg_grad(q)));
                        tg_zero_grad(q), tg_zero_grad(k), tg_zero_grad(v);
                    }
                    if (r > 0) times[fused][r - 1] = bench_now() - start; /* the first run warms up */
                    peak[fused] = tg_cpu_memory_stats().peak - before;
                }
            report("", heads, dim, t, bench_median(times[1], reps), check[1], peak[1]);
            report("_composed", heads, dim, t, bench_median(times[0], reps), check[0], peak[0]);
            tg_release(q), tg_release(k), tg_release(v);
        }
    return 0;
}
