/* float32 and bfloat16 GEMM throughput at n = 256 .. 2048 (square), tg_matmul into a new
 * output. The two dtypes alternate rep by rep, so a busy machine slows both alike; the
 * bfloat16 rows (bench "matmul_bf16_N") use vdpbf16ps where the CPU has AVX512-BF16
 * (ops/cpu/gemm_bf16.c), else the float32 GEMM on widened copies. Twin: bench/matmul_torch.py
 * (float32; bench/matmul_torch.py --bf16 for PyTorch's bfloat16 matmul). */
#include "bench/bench_util.h"
#include "tapegrad.h"

static void report(const char *bench, int n, double median, double check) {
    printf("RESULT {\"bench\": \"%s_%d\", \"impl\": \"tapegrad\", \"seconds\": %.6g, \"unit_value\": %.4g, "
           "\"unit\": \"GFLOP/s\", \"check\": %.4f, \"peak_rss_mib\": %.1f}\n",
           bench, n, median, 2.0 * n * n * n / median * 1e-9, check, bench_peak_rss_mib());
}

int main(void) {
    const int sizes[] = {256, 512, 1024, 2048};
    for (int s = 0; s < 4; s++) {
        int n = sizes[s], reps = n <= 512 ? 50 : n == 1024 ? 10 : 5;
        double times[2][50], check[2] = {0, 0};
        tg_manual_seed(0);
        tg_tensor *a = tg_randn(TG_SHAPE(n, n), (tg_opts){0}), *b = tg_randn(TG_SHAPE(n, n), (tg_opts){0});
        tg_tensor *operands[2][2] = {{a, b}, {tg_cast(a, TG_BFLOAT16), tg_cast(b, TG_BFLOAT16)}};
        for (int r = 0; r < reps + 1; r++)
            for (int bf = 0; bf < 2; bf++) {
                double start = bench_now();
                TG_SCOPE {
                    tg_tensor *c = tg_matmul(operands[bf][0], operands[bf][1]);
                    if (r == 0) check[bf] = tg_item(tg_cast(tg_narrow(tg_flatten(c, 0, -1), 0, 0, 1), TG_FLOAT32));
                }
                if (r > 0) times[bf][r - 1] = bench_now() - start; /* the first run warms up */
            }
        report("matmul", n, bench_median(times[0], reps), check[0]);
        report("matmul_bf16", n, bench_median(times[1], reps), check[1]);
        tg_release(operands[1][0]);
        tg_release(operands[1][1]);
        tg_release(a);
        tg_release(b);
    }
    return 0;
}
