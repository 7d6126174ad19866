/* LeNet's second convolution at batch 64: x [64, 20, 12, 12] * w [50, 20, 5, 5] + b,
 * forward + backward (grads of x, w, b), in float32 ("conv_lenet2_fwd_bwd") and on
 * bfloat16 tensors ("conv_bf16_lenet2_fwd_bwd": the AVX512-BF16 kernels where the CPU has
 * them, ops/conv.c), the two alternating rep by rep so a busy machine slows both alike.
 * Twin: bench/conv_torch.py (PyTorch's bfloat16 conv is oneDNN's). */
#include "bench/bench_util.h"
#include "tapegrad.h"

#define REPS 30

static void report(const char *bench, double median, double check) {
    printf("RESULT {\"bench\": \"%s\", \"impl\": \"tapegrad\", \"seconds\": %.6g, \"unit_value\": %.4g, "
           "\"unit\": \"ms\", \"check\": %.1f, \"peak_rss_mib\": %.1f}\n",
           bench, median, median * 1e3, check, bench_peak_rss_mib());
}

int main(void) {
    double times[2][REPS], check[2] = {0, 0};
    tg_manual_seed(0);
    tg_tensor *x = tg_randn(TG_SHAPE(64, 20, 12, 12), (tg_opts){0});
    tg_tensor *w = tg_randn(TG_SHAPE(50, 20, 5, 5), (tg_opts){0});
    tg_tensor *b = tg_randn(TG_SHAPE(50), (tg_opts){0});
    tg_tensor *leaves[2][3] = {{x, w, b}, {tg_cast(x, TG_BFLOAT16), tg_cast(w, TG_BFLOAT16), tg_cast(b, TG_BFLOAT16)}};
    for (int bf = 0; bf < 2; bf++)
        for (int i = 0; i < 3; i++) tg_requires_grad_(leaves[bf][i], true);
    for (int r = 0; r < REPS + 1; r++)
        for (int bf = 0; bf < 2; bf++) {
            tg_tensor **l = leaves[bf];
            double start = bench_now();
            TG_SCOPE {
                tg_tensor *y = tg_conv2d(l[0], l[1], l[2], (tg_conv_opts){0});
                tg_backward(tg_sum(y));
            }
            if (r > 0) times[bf][r - 1] = bench_now() - start; /* the first run warms up */
            TG_SCOPE { check[bf] = tg_item(tg_sum(tg_cast(tg_grad(l[2]), TG_FLOAT32))); }
            for (int i = 0; i < 3; i++) tg_zero_grad(l[i]);
        }
    report("conv_lenet2_fwd_bwd", bench_median(times[0], REPS), check[0]);
    report("conv_bf16_lenet2_fwd_bwd", bench_median(times[1], REPS), check[1]);
    for (int bf = 0; bf < 2; bf++)
        for (int i = 0; i < 3; i++) tg_release(leaves[bf][i]);
    return 0;
}
