/* LeNet's second convolution at batch 64: x [64, 20, 12, 12] * w [50, 20, 5, 5] + b,
 * forward + backward (grads of x, w, b). Twin: bench/conv_torch.py. */
#include "bench/bench_util.h"
#include "tapegrad.h"

#define REPS 30

int main(void) {
    double times[REPS];
    tg_manual_seed(0);
    tg_tensor *x = tg_requires_grad(tg_randn(TG_SHAPE(64, 20, 12, 12), (tg_opts){0}), true);
    tg_tensor *w = tg_requires_grad(tg_randn(TG_SHAPE(50, 20, 5, 5), (tg_opts){0}), true);
    tg_tensor *b = tg_requires_grad(tg_randn(TG_SHAPE(50), (tg_opts){0}), true);
    double check = 0;
    for (int r = 0; r < REPS + 1; r++) {
        double start = bench_now();
        TG_SCOPE {
            tg_tensor *y = tg_conv2d(x, w, b, (tg_conv_opts){0});
            tg_backward(tg_sum(y));
        }
        if (r > 0) times[r - 1] = bench_now() - start;
        TG_SCOPE { check = tg_item(tg_sum(tg_grad(b))); }
        tg_zero_grad(x);
        tg_zero_grad(w);
        tg_zero_grad(b);
    }
    double median = bench_median(times, REPS);
    printf("RESULT {\"bench\": \"conv_lenet2_fwd_bwd\", \"impl\": \"tapegrad\", \"seconds\": %.6g, \"unit_value\": %.4g, "
           "\"unit\": \"ms\", \"check\": %.1f, \"peak_rss_mib\": %.1f}\n",
           median, median * 1e3, check, bench_peak_rss_mib());
    tg_release(x);
    tg_release(w);
    tg_release(b);
    return 0;
}
