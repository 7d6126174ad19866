/* float32 GEMM throughput at n = 256 .. 2048 (square), tg_matmul into a new output.
 * Twin: bench/matmul_torch.py. */
#include "bench/bench_util.h"
#include "tapegrad.h"

int main(void) {
    const int sizes[] = {256, 512, 1024, 2048};
    for (int s = 0; s < 4; s++) {
        int n = sizes[s], reps = n <= 512 ? 50 : n == 1024 ? 10 : 5;
        double times[50];
        tg_manual_seed(0);
        tg_tensor *a = tg_randn(TG_SHAPE(n, n), (tg_opts){0}), *b = tg_randn(TG_SHAPE(n, n), (tg_opts){0});
        double check = 0;
        for (int r = 0; r < reps + 1; r++) {
            double start = bench_now();
            TG_SCOPE {
                tg_tensor *c = tg_matmul(a, b);
                if (r == 0) check = tg_item(tg_narrow(tg_flatten(c, 0, -1), 0, 0, 1));
            }
            if (r > 0) times[r - 1] = bench_now() - start; /* the first run warms up */
        }
        double median = bench_median(times, reps);
        printf("RESULT {\"bench\": \"matmul_%d\", \"impl\": \"tapegrad\", \"seconds\": %.6g, \"unit_value\": %.4g, "
               "\"unit\": \"GFLOP/s\", \"check\": %.4f, \"peak_rss_mib\": %.1f}\n",
               n, median, 2.0 * n * n * n / median * 1e-9, check, bench_peak_rss_mib());
        tg_release(a);
        tg_release(b);
    }
    return 0;
}
