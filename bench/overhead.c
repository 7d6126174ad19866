/* Per-op overhead: a chain of 1,000 ops on 1-element tensors, forward + backward.
 * What it measures is the framework's fixed cost per op (dispatch, graph recording,
 * allocation, the backward walk), not arithmetic. Twin: bench/overhead_torch.py. */
#include "bench/bench_util.h"
#include "tapegrad.h"

#define CHAIN 1000
#define REPS 200

int main(void) {
    double times[REPS];
    double final_grad = 0;
    tg_tensor *x = tg_requires_grad_(tg_full(TG_SHAPE(1), 1.0, (tg_opts){0}), true);
    tg_tensor *scale = tg_full(TG_SHAPE(1), 1.0001, (tg_opts){0});
    tg_tensor *shift = tg_full(TG_SHAPE(1), 0.001, (tg_opts){0});
    for (int r = 0; r < REPS; r++) {
        double start = bench_now();
        TG_SCOPE {
            tg_tensor *y = x;
            for (int i = 0; i < CHAIN; i += 2) y = tg_add(tg_mul(y, scale), shift);
            tg_backward(y);
        }
        times[r] = bench_now() - start;
        final_grad = tg_item(tg_grad(x));
        tg_zero_grad(x);
    }
    double median = bench_median(times, REPS);
    printf("RESULT {\"bench\": \"overhead\", \"impl\": \"tapegrad\", \"seconds\": %.6g, "
           "\"unit_value\": %.4g, \"unit\": \"us/op\", \"check\": %.6f, \"peak_rss_mib\": %.1f}\n",
           median, median / CHAIN * 1e6, final_grad, bench_peak_rss_mib());
    tg_release(x);
    tg_release(scale);
    tg_release(shift);
    return 0;
}
