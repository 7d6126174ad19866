/* Inference of lesson 02's MLP (784-1024-512-256-128-10) in float32 and after dynamic
 * int8 quantisation (nn/quantize.h), at batch 1 and 64, no grad, images/s.
 * Twin: bench/qmlp_torch.py (torch.ao.quantization.quantize_dynamic). The seeds give
 * both the same weights and inputs, so the float32 check (out[0, 0]) agrees to float32
 * rounding and the int8 one to a quantisation step. */
#include "bench/bench_util.h"
#include "tapegrad.h"

static tg_module *make_mlp(void) {
    return TG_NN_SEQUENTIAL(
        tg_nn_linear(784, 1024, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(1024, 512, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(512, 256, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(256, 128, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(128, 10, (tg_linear_opts){0}));
}

static void run(tg_module *model, tg_tensor *inputs, const char *kind, int batch) {
    int reps = batch == 1 ? 400 : 100;
    double *times = malloc((size_t)reps * sizeof *times), check = 0;
    tg_set_grad_enabled(false);
    TG_SCOPE {
        tg_tensor *x = tg_narrow(inputs, 0, 0, batch);
        for (int r = 0; r < reps + 1; r++) {
            double start = bench_now();
            TG_SCOPE {
                tg_tensor *y = tg_forward(model, x);
                if (r == 0) check = tg_item(tg_narrow(tg_flatten(y, 0, -1), 0, 0, 1));
            }
            if (r > 0) times[r - 1] = bench_now() - start; /* the first run warms up */
        }
    }
    double median = bench_median(times, reps);
    printf("RESULT {\"bench\": \"qmlp_%s_b%d\", \"impl\": \"tapegrad\", \"seconds\": %.6g, \"unit_value\": %.4g, "
           "\"unit\": \"images/s\", \"check\": %.4f, \"peak_rss_mib\": %.1f}\n",
           kind, batch, median, batch / median, check, bench_peak_rss_mib());
    free(times);
}

int main(void) {
    tg_manual_seed(1);
    tg_module *model = make_mlp();
    tg_manual_seed(0);
    tg_tensor *inputs = tg_randn(TG_SHAPE(64, 784), (tg_opts){0});
    run(model, inputs, "f32", 1);
    run(model, inputs, "f32", 64);
    model = tg_quantize_dynamic(model, (tg_quantize_opts){0});
    run(model, inputs, "int8", 1);
    run(model, inputs, "int8", 64);
    tg_release(inputs);
    tg_module_free(model);
    return 0;
}
