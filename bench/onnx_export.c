/* The C half of bench/onnx_runtime.py: lesson 02's MLP, lesson 03's LeNet and the MLP
 * quantised to int8 (tg_quantize_dynamic), each exported with tg_onnx_export and timed
 * in tapegrad's own eval-mode inference (bench/inference.h: no grad, median of the
 * timed forwards) at batch 1 and 64; and, for the agreement check only (not timed), the
 * other tutorials' exported models: lesson 13's ResNet-20, lesson 08's DCGAN generator,
 * lesson 09's LSTM language model and lesson 12's static int8 LeNet (with the lesson's
 * qconfig "onednn", and with "x86", 7-bit activations). Not lesson 10's GPT: its model
 * library, //tutorials/10_gpt:model, is visible to //tests only.
 *
 *     bazel-bin/bench/onnx_export OUT_DIR [REPS]
 *
 * Writes into OUT_DIR, for each timed model NAME (mlp, lenet, mlp_int8): NAME.onnx (or
 * NAME.error holding the exporter's message when it cannot export the model yet),
 * NAME_x.bin (the 64 inputs), NAME_y.bin (tapegrad's outputs on them) and NAME_y1.bin
 * (its output on the first alone), raw float32 little-endian; and prints one RESULT line per model and batch ("NAME_tapegrad_bB",
 * images/s). The weights are those of tg_manual_seed(1), which PyTorch's twins
 * (bench/mlp_torch.py, bench/lenet_torch.py) draw from torch.manual_seed(1); the inputs
 * are tg_randn after tg_manual_seed(0). REPS (default 200) timed forwards at batch 1, a
 * quarter of them at batch 64.
 *
 * For each checked model NAME (resnet20, dcgan_g, lstm_lm, lenet_int8_static,
 * lenet_int8_static_x86), exported at batch 1: NAME.onnx (or NAME.error), NAME_x.bin (7 inputs, float32 or int64 as
 * NAME.meta says), NAME_y.bin (tapegrad's eval outputs on them, float32), NAME_y1.bin (on
 * the first alone) and NAME.meta, one line "dtype SHAPE STEP": the input's dtype
 * (float32, int64), its shape at batch 7 (comma-separated) and the output's quantisation
 * step (0 for a float model; the int8 LeNet's DeQuantize scale). The LSTM's input is
 * [T, B] (time first, as lesson 09): its free dim 0, "batch" here, is the sequence length. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/inference.h"
#include "tapegrad.h"
#include "tutorials/10_gpt/gpt.h"
#include "tutorials/13_resnet/resnet.h"

static tg_module *make_mlp(void) {
    return TG_NN_SEQUENTIAL(
        tg_nn_linear(784, 1024, (tg_linear_opts){0}), tg_nn_relu(), tg_nn_linear(1024, 512, (tg_linear_opts){0}),
        tg_nn_relu(), tg_nn_linear(512, 256, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(256, 128, (tg_linear_opts){0}), tg_nn_relu(), tg_nn_linear(128, 10, (tg_linear_opts){0}));
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

/* ---- the models checked for agreement only (tests/onnx/models_test.cc and
 * recurrent_quant_test.cc build them the same way) ---- */

/* Running statistics other than 0 and 1: two training-mode forwards on shifted inputs. */
static void warm_batch_norm(tg_module *m, tg_tensor *x) {
    tg_train(m, true);
    for (int i = 0; i < 2; i++) TG_SCOPE {
            tg_forward(m, tg_add_scalar(tg_mul_scalar(x, 1.5), 0.3));
        }
}

static tg_module *make_dcgan_generator(void) { /* tutorials/08_dcgan/main.c's netG */
    tg_conv_transpose_opts first = {.no_bias = true}, up = {.no_bias = true, .stride = 2, .padding = 1};
    return TG_NN_SEQUENTIAL(tg_nn_conv_transpose2d(100, 128, 7, first),
                            tg_nn_batch_norm2d(128, (tg_batch_norm_opts){0}), tg_nn_relu(),
                            tg_nn_conv_transpose2d(128, 64, 4, up), tg_nn_batch_norm2d(64, (tg_batch_norm_opts){0}),
                            tg_nn_relu(), tg_nn_conv_transpose2d(64, 1, 4, up), tg_nn_tanh());
}

/* Lesson 09's RNNModel: Embedding(V, 200) -> 2-layer LSTM(200, 200) -> Linear(200, V) over
 * [T, B] character ids, the state starting at zeros; V = 96 (the lesson's is the corpus's). */
enum { LM_VOCAB = 96, LM_EMBED = 200, LM_HIDDEN = 200 };

static tg_tensor *lm_forward(tg_module *self, tg_tensor *x) {
    tg_tensor *embedded = tg_forward(tg_module_child(self, "encoder"), x);
    tg_rnn_result r;
    if (tg_rnn_forward(tg_module_child(self, "rnn"), embedded, NULL, NULL, &r)) return NULL;
    tg_tensor *flat = tg_reshape(r.output, TG_SHAPE(tg_size(x, 0) * tg_size(x, 1), LM_HIDDEN));
    return tg_forward(tg_module_child(self, "decoder"), flat);
}

static const tg_module_type lm_type = {.name = "RNNModel", .forward = lm_forward};

static tg_module *make_lstm_lm(void) {
    tg_module *m = tg_module_new(&lm_type, 0);
    tg_register_module(m, "encoder", tg_nn_embedding(LM_VOCAB, LM_EMBED, (tg_embedding_opts){0}));
    tg_register_module(m, "rnn", tg_nn_lstm(LM_EMBED, LM_HIDDEN, (tg_rnn_opts){.num_layers = 2}));
    tg_register_module(m, "decoder", tg_nn_linear(LM_HIDDEN, LM_VOCAB, (tg_linear_opts){0}));
    return m;
}

/* Lesson 12's static int8 LeNet: fused conv+relu and linear+relu, calibrated on 4 batches
 * of 8 random images, converted with `backend`'s qconfig ("onednn" as the lesson; "x86":
 * activations in 7 bits, reduce_range); *step = its output's quantisation step
 * (DeQuantize's scale). */
static tg_module *make_lenet_int8_static(const char *backend, float *step) {
    tg_module *q = tg_quant_wrapper(make_lenet());
    tg_fuse_modules(q, "module.0", "module.1");
    tg_fuse_modules(q, "module.3", "module.4");
    tg_fuse_modules(q, "module.7", "module.8");
    tg_eval(q);
    tg_qconfig qconfig = tg_get_default_qconfig(backend);
    tg_quant_prepare(q, qconfig);
    for (int i = 0; i < 4; i++) TG_SCOPE {
            TG_NO_GRAD { tg_forward(q, tg_randn(TG_SHAPE(8, 1, 28, 28), (tg_opts){0})); }
        }
    tg_quant_convert(q, qconfig);
    *step = *(const float *)tg_data_ptr(tg_module_buffer(tg_module_child(q, "dequant"), "input_scale"));
    return q;
}

/* Exports `model` (eval mode) at batch 1, writes NAME.meta, the 7 inputs `x` and tapegrad's
 * outputs on them and on the first alone; frees the model and x. Non-zero on an I/O failure. */
static int check(const char *dir, const char *name, tg_module *model, tg_tensor *x, float step) {
    char path[4096];
    int status = 0;
    tg_eval(model);
    TG_SCOPE {
        tg_tensor *x1 = tg_narrow(x, 0, 0, 1);
        snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
        remove(path);
        if (tg_onnx_export(model, x1, path, NULL) != TG_OK) {
            fprintf(stderr, "onnx_export: %s: %s\n", name, tg_last_error());
            snprintf(path, sizeof path, "%s/%s.error", dir, name);
            FILE *f = fopen(path, "w");
            if (f) fprintf(f, "%s\n", tg_last_error()), fclose(f);
            tg_clear_error();
        }
        tg_tensor *y = NULL, *y1 = NULL;
        TG_NO_GRAD {
            y = tg_forward(model, x);
            y1 = tg_forward(model, x1);
        }
        snprintf(path, sizeof path, "%s/%s.meta", dir, name);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%s ", tg_dtype_of(x) == TG_INT64 ? "int64" : "float32");
            for (int d = 0; d < tg_ndim(x); d++) fprintf(f, "%s%lld", d ? "," : "", (long long)tg_size(x, d));
            fprintf(f, " %.9g\n", (double)step);
            status |= fclose(f) != 0;
        } else {
            status = 1;
        }
        if (!y || !y1) {
            fprintf(stderr, "onnx_export: %s: forward failed: %s\n", name, tg_last_error());
            status = 1;
        } else {
            status |= write_raw(dir, name, "_x.bin", x);
            status |= write_raw(dir, name, "_y.bin", y);
            status |= write_raw(dir, name, "_y1.bin", y1);
        }
    }
    tg_release(x);
    tg_module_free(model);
    return status;
}

static int check_tutorial_models(const char *dir) {
    int status = 0;
    tg_opts int64 = {.dtype = TG_INT64};

    tg_manual_seed(13);
    tg_module *resnet = resnet20(3, 10);
    tg_tensor *x = tg_randn(TG_SHAPE(7, 3, 32, 32), (tg_opts){0});
    warm_batch_norm(resnet, x);
    status |= check(dir, "resnet20", resnet, x, 0);

    tg_manual_seed(8);
    tg_module *generator = make_dcgan_generator();
    x = tg_randn(TG_SHAPE(7, 100, 1, 1), (tg_opts){0});
    warm_batch_norm(generator, x);
    status |= check(dir, "dcgan_g", generator, x, 0);

    tg_manual_seed(9);
    tg_module *lm = make_lstm_lm();
    status |= check(dir, "lstm_lm", lm, tg_randint(0, LM_VOCAB, TG_SHAPE(7, 1), int64), 0); /* [T, B] */

    tg_manual_seed(10); /* lesson 10's GPT, small: int64 ids [B, T] */
    tg_module *gpt = gpt_new((gpt_config){.vocab = 96, .n_layer = 2, .n_head = 4, .n_embd = 32, .block_size = 16});
    status |= check(dir, "gpt", gpt, tg_randint(0, 96, TG_SHAPE(7, 8), int64), 0);

    for (int reduce_range = 0; reduce_range < 2; reduce_range++) {
        tg_manual_seed(12);
        float step = 0;
        tg_module *qlenet = make_lenet_int8_static(reduce_range ? "x86" : "onednn", &step);
        status |= check(dir, reduce_range ? "lenet_int8_static_x86" : "lenet_int8_static", qlenet,
                        tg_randn(TG_SHAPE(7, 1, 28, 28), (tg_opts){0}), step);
    }
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
    status |= check_tutorial_models(dir);
    if (tg_has_error()) /* reported, not fatal: onnx_runtime.py compares the outputs anyway */
        fprintf(stderr, "onnx_export: an error was recorded: %s\n", tg_last_error());
    tg_release(x_mlp);
    tg_release(x_lenet);
    tg_module_free(mlp);
    tg_module_free(lenet);
    return status;
}
