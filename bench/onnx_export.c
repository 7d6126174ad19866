/* The C half of bench/onnx_runtime.py: lesson 02's MLP, lesson 03's LeNet and the MLP
 * quantised to int8 (tg_quantize_dynamic), each exported with tg_onnx_export and timed
 * in tapegrad's own eval-mode inference (bench/inference.h: no grad, median of the
 * timed forwards) at batch 1 and 64.
 *
 *     bazel-bin/bench/onnx_export OUT_DIR [REPS]
 *
 * Writes into OUT_DIR, for each model NAME (mlp, lenet, mlp_int8): NAME.onnx (or
 * NAME.error holding the exporter's message when it cannot export the model yet),
 * NAME_x.bin (the 64 inputs), NAME_y.bin (tapegrad's outputs on them) and NAME_y1.bin
 * (its output on the first alone), raw float32 little-endian; and prints one RESULT line per model and batch ("NAME_tapegrad_bB",
 * images/s). The weights are those of tg_manual_seed(1), which PyTorch's twins
 * (bench/mlp_torch.py, bench/lenet_torch.py) draw from torch.manual_seed(1); the inputs
 * are tg_randn after tg_manual_seed(0). REPS (default 200) timed forwards at batch 1, a
 * quarter of them at batch 64. */
#include <stdio.h>
#include <string.h>

#include "bench/inference.h"
#include "tapegrad.h"

static tg_module *make_mlp(void) {
    return TG_NN_SEQUENTIAL(
        tg_nn_linear(784, 1024, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(1024, 512, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(512, 256, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(256, 128, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(128, 10, (tg_linear_opts){0}));
}

static tg_module *make_lenet(void) { /* bench/lenet_torch.py's make_lenet */
    tg_pool_opts pool2 = {.kernel_size = 2};
    return TG_NN_SEQUENTIAL(tg_nn_conv2d(1, 20, 5, (tg_conv_opts){0}), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                            tg_nn_conv2d(20, 50, 5, (tg_conv_opts){0}), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                            tg_nn_flatten(1, -1), tg_nn_linear(800, 500, (tg_linear_opts){0}), tg_nn_relu(),
                            tg_nn_linear(500, 10, (tg_linear_opts){0}));
}

static int write_raw(const char *dir, const char *name, const char *suffix, tg_tensor *t) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, suffix);
    int status = 1;
    TG_SCOPE {
        tg_tensor *c = tg_contiguous(t);
        FILE *f = fopen(path, "wb");
        if (f) {
            size_t bytes = (size_t)tg_numel(c) * tg_dtype_size(tg_dtype_of(c));
            status = fwrite(tg_data_ptr(c), 1, bytes, f) != bytes;
            status |= fclose(f) != 0;
        }
    }
    if (status) fprintf(stderr, "onnx_export: cannot write %s\n", path);
    return status;
}

/* Exports, writes the inputs and outputs, times; returns non-zero on an I/O failure only
 * (a model the exporter refuses is reported in NAME.error and on stderr). */
static int run(const char *dir, const char *name, tg_module *model, tg_tensor *inputs, int reps) {
    char path[4096];
    int status = 0;
    tg_eval(model);
    TG_SCOPE {
        snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
        remove(path);
        if (tg_onnx_export(model, tg_narrow(inputs, 0, 0, 1), path, NULL) != TG_OK) {
            fprintf(stderr, "onnx_export: %s: %s\n", name, tg_last_error());
            snprintf(path, sizeof path, "%s/%s.error", dir, name);
            FILE *f = fopen(path, "w");
            if (f) fprintf(f, "%s\n", tg_last_error()), fclose(f);
            tg_clear_error();
        }
        tg_tensor *y, *y1; /* at batch 64 and 1 (the int8 model's activation scales are the batch's) */
        TG_NO_GRAD {
            y = tg_forward(model, inputs);
            y1 = tg_forward(model, tg_narrow(inputs, 0, 0, 1));
        }
        status |= write_raw(dir, name, "_x.bin", inputs);
        status |= write_raw(dir, name, "_y.bin", y);
        status |= write_raw(dir, name, "_y1.bin", y1);
    }
    bench_inference(name, model, inputs, "tapegrad", 1, reps);
    bench_inference(name, model, inputs, "tapegrad", 64, reps / 4 > 0 ? reps / 4 : 1);
    tg_set_grad_enabled(true); /* bench_inference turned it off */
    return status;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s OUT_DIR [REPS]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int reps = argc == 3 ? atoi(argv[2]) : 200;
    if (reps < 1) reps = 1;
    tg_set_error_mode(TG_ERRORS_SILENT); /* the exporter's refusals are reported above */
    int status = 0;

    tg_manual_seed(1);
    tg_module *mlp = make_mlp();
    tg_manual_seed(1);
    tg_module *lenet = make_lenet();
    tg_manual_seed(0);
    tg_tensor *x_mlp = tg_randn(TG_SHAPE(64, 784), (tg_opts){0});
    tg_tensor *x_lenet = tg_randn(TG_SHAPE(64, 1, 28, 28), (tg_opts){0});

    status |= run(dir, "mlp", mlp, x_mlp, reps);
    status |= run(dir, "lenet", lenet, x_lenet, reps);
    mlp = tg_quantize_dynamic(mlp, (tg_quantize_opts){0}); /* int8 weights, per-batch activation scales */
    status |= run(dir, "mlp_int8", mlp, x_mlp, reps);
    if (tg_has_error()) /* reported, not fatal: onnx_runtime.py compares the outputs anyway */
        fprintf(stderr, "onnx_export: an error was recorded: %s\n", tg_last_error());
    tg_release(x_mlp);
    tg_release(x_lenet);
    tg_module_free(mlp);
    tg_module_free(lenet);
    return status;
}
