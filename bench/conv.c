/* LeNet's second convolution at batch 64: x [64, 20, 12, 12] * w [50, 20, 5, 5] + b,
 * forward + backward (grads of x, w, b), in float32 ("conv_lenet2_fwd_bwd") and on
 * bfloat16 tensors ("conv_bf16_lenet2_fwd_bwd": the AVX512-BF16 kernels where the CPU has
 * them, ops/conv.c); and a MobileNet-like depthwise 3x3 layer in float32
 * ("conv_dw_mobilenet_fwd_bwd": x [64, 128, 28, 28] * w [128, 1, 3, 3] + b, stride 1,
 * padding 1, groups 128: ops/cpu/depthwise_conv.c, issue 32). The cases alternate rep by
 * rep so a busy machine slows all alike. Twin: bench/conv_torch.py (PyTorch's bfloat16
 * conv is oneDNN's). */
#include "bench/bench_util.h"
#include "tapegrad.h"

#define REPS 30
#define CASES 3

static void report(const char *bench, double median, double check) {
    printf("RESULT {\"bench\": \"%s\", \"impl\": \"tapegrad\", \"seconds\": %.6g, \"unit_value\": %.4g, "
           "\"unit\": \"ms\", \"check\": %.1f, \"peak_rss_mib\": %.1f}\n",
           bench, median, median * 1e3, check, bench_peak_rss_mib());
}

int main(void) {
    static const char *names[CASES] = {"conv_lenet2_fwd_bwd", "conv_bf16_lenet2_fwd_bwd", "conv_dw_mobilenet_fwd_bwd"};
    const tg_conv_opts opts[CASES] = {{0}, {0}, {.padding = 1, .groups = 128}};
    double times[CASES][REPS], check[CASES] = {0, 0, 0};
    tg_manual_seed(0);
    tg_tensor *x = tg_randn(TG_SHAPE(64, 20, 12, 12), (tg_opts){0});
    tg_tensor *w = tg_randn(TG_SHAPE(50, 20, 5, 5), (tg_opts){0});
    tg_tensor *b = tg_randn(TG_SHAPE(50), (tg_opts){0});
    tg_tensor *leaves[CASES][3] = {{x, w, b},
                                   {tg_cast(x, TG_BFLOAT16), tg_cast(w, TG_BFLOAT16), tg_cast(b, TG_BFLOAT16)},
                                   {tg_randn(TG_SHAPE(64, 128, 28, 28), (tg_opts){0}),
                                    tg_randn(TG_SHAPE(128, 1, 3, 3), (tg_opts){0}),
                                    tg_randn(TG_SHAPE(128), (tg_opts){0})}};
    for (int c = 0; c < CASES; c++)
        for (int i = 0; i < 3; i++) tg_requires_grad_(leaves[c][i], true);
    for (int r = 0; r < REPS + 1; r++)
        for (int c = 0; c < CASES; c++) {
            tg_tensor **l = leaves[c];
            double start = bench_now();
            TG_SCOPE {
                tg_tensor *y = tg_conv2d(l[0], l[1], l[2], opts[c]);
                tg_backward(tg_sum(y));
            }
            if (r > 0) times[c][r - 1] = bench_now() - start; /* the first run warms up */
            TG_SCOPE { check[c] = tg_item(tg_sum(tg_cast(tg_grad(l[2]), TG_FLOAT32))); }
            for (int i = 0; i < 3; i++) tg_zero_grad(l[i]);
        }
    for (int c = 0; c < CASES; c++) report(names[c], bench_median(times[c], REPS), check[c]);
    for (int c = 0; c < CASES; c++)
        for (int i = 0; i < 3; i++) tg_release(leaves[c][i]);
    return 0;
}
