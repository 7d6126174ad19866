/* Lesson 12: smaller, faster models from the trained ones.
 *
 * Part 1 trains lesson 02's MLP (784-1024-512-256-128-10, Adam), prunes 90% of its
 * Linear weights (global L1, torch.nn.utils.prune.global_unstructured), fine-tunes it
 * with the masks applied, makes the pruning permanent, then quantises it dynamically
 * (int8 weights, torch.ao.quantization.quantize_dynamic). Part 2 does the same
 * pruning to lesson 03's LeNet, then quantises it statically (fused conv+relu and
 * linear+relu, observers calibrated on a few training batches, int8 Conv2d / Linear:
 * torch.ao.quantization's prepare / convert). After each stage it prints the test
 * accuracy, the state dict's file size and the inference throughput at batch 1 and
 * 64; each int8 model is saved, reloaded and checked. README.md walks through this
 * file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tapegrad.h"
#include "tutorials/common/common.h"

static tg_module *make_mlp(void) {
    return TG_NN_SEQUENTIAL(
        tg_nn_linear(784, 1024, (tg_linear_opts){0}), tg_nn_relu(), tg_nn_linear(1024, 512, (tg_linear_opts){0}),
        tg_nn_relu(), tg_nn_linear(512, 256, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(256, 128, (tg_linear_opts){0}), tg_nn_relu(), tg_nn_linear(128, 10, (tg_linear_opts){0}));
}

static tg_module *make_lenet(void) {
    tg_pool_opts pool2 = {.kernel_size = 2};
    return TG_NN_SEQUENTIAL(tg_nn_conv2d(1, 20, 5, (tg_conv_opts){0}), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                            tg_nn_conv2d(20, 50, 5, (tg_conv_opts){0}), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                            tg_nn_flatten(1, -1), tg_nn_linear(800, 500, (tg_linear_opts){0}), tg_nn_relu(),
                            tg_nn_linear(500, 10, (tg_linear_opts){0}));
}

static const char *const LINEARS[] = {"0", "2", "4", "6", "8"};
static const char *const LENET_LAYERS[] = {"0", "3", "7", "9"}; /* conv1, conv2, fc1, fc2 */

/* Adam on cross-entropy for up to max_steps batches (0: one epoch). */
static void train(tg_module *model, tg_loader *loader, double lr, int64_t max_steps, const char *what) {
    tg_optim *opt = tg_adam(model, (tg_adam_opts){.lr = lr});
    tg_train(model, true);
    int64_t step = 0;
    double start = tut_now(), loss_sum = 0;
    tg_tensor *x, *y;
    TG_FOR_EACH_BATCH(loader, x, y) {
        if (max_steps && step >= max_steps) break;
        tg_tensor *loss = tg_cross_entropy(tg_forward(model, x), y);
        tg_backward(loss);
        tg_optim_step(opt);
        tg_optim_zero_grad(opt);
        loss_sum += tg_item(loss);
        step++;
    }
    printf("%s: %lld steps, mean loss %.4f, %.1f s\n", what, (long long)step, loss_sum / (double)(step ? step : 1),
           tut_now() - start);
    tg_optim_free(opt);
    tg_eval(model);
}

/* Images per second of no-grad forwards at this batch size (about 0.5 s of them). */
static double throughput(tg_module *model, tg_tensor *test_x, int64_t batch) {
    int64_t done = 0;
    double start = tut_now();
    TG_NO_GRAD {
        TG_SCOPE {
            tg_tensor *x = tg_narrow(test_x, 0, 0, batch);
            while (tut_now() - start < 0.5) {
                TG_SCOPE { tg_forward(model, x); }
                done += batch;
            }
        }
    }
    return (double)done / (tut_now() - start);
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

typedef struct {
    double accuracy, per_s_1, per_s_64;
    long bytes;
} stage;

/* The zeros among the weights: tg_prune_sparsity's, or the int8 values' (a dynamic
 * Linear's, or a static int8 layer's "weight" buffer, which holds q + 128). */
static double sparsity(tg_module *model) {
    int64_t zeros = 0, total = 0;
    bool quantised = false;
    int n = 0;
    const tg_named_tensor *sd = tg_state_dict(model, &n);
    for (int i = 0; i < n; i++) {
        const char *dot = strrchr(sd[i].name, '.');
        if (!dot || strcmp(dot, ".weight") || tg_dtype_of(sd[i].tensor) != TG_UINT8) continue;
        quantised = true;
        TG_SCOPE {
            zeros += (int64_t)tg_item(tg_sum(tg_eq_scalar(sd[i].tensor, 128)));
            total += tg_numel(sd[i].tensor);
        }
    }
    return quantised ? (double)zeros / (double)total : tg_prune_sparsity(model);
}

static stage report(const char *name, tg_module *model, tg_tensor *test_x, tg_tensor *test_y, const char *path) {
    stage s = {0};
    s.accuracy = tut_evaluate(model, test_x, test_y, 1000, TG_CPU).accuracy;
    tg_save_state_dict(model, path);
    s.bytes = file_size(path);
    s.per_s_1 = throughput(model, test_x, 1);
    s.per_s_64 = throughput(model, test_x, 64);
    printf("%-22s accuracy %6.2f%%  file %9ld bytes  batch 1: %8.0f images/s  batch 64: %8.0f images/s  "
           "sparsity %.3f\n",
           name, s.accuracy, s.bytes, s.per_s_1, s.per_s_64, sparsity(model));
    return s;
}

int main(int argc, char **argv) {
    const char *finetune = "300", *amount = "0.9", *calib = "16";
    tut_option extra[] = {
        {.name = "--finetune-steps",
         .metavar = "N",
         .value = &finetune,
         .help = "fine-tuning steps after pruning (300)"},
        {.name = "--amount", .metavar = "F", .value = &amount, .help = "share of the weights to prune (0.9)"},
        {.name = "--calib-batches",
         .metavar = "N",
         .value = &calib,
         .help = "training batches that calibrate LeNet's static quantisation (16)"}};
    tut_args args = {.options = TUT_OPT_EPOCHS | TUT_OPT_BATCH_SIZE | TUT_OPT_LR | TUT_OPT_SEED | TUT_OPT_DATA |
                                TUT_OPT_MAX_STEPS | TUT_OPT_EXPORT_ONNX,
                     .epochs = 1,
                     .batch_size = 64,
                     .lr = 1e-3,
                     .seed = 1};
    tut_parse_args(argc, argv, "Lesson 12: prune the MLP and LeNet to 90%, fine-tune, quantise them to int8.", &args,
                   extra, 3);

    tut_data data = tut_load_data(&args, false);
    printf("data: %s, %lld training and %lld test images\n", data.name, (long long)tg_size(data.train_x, 0),
           (long long)tg_size(data.test_x, 0));
    tg_loader *loader =
        tg_loader_new(data.train_x, data.train_y,
                      (tg_loader_opts){.batch_size = args.batch_size, .shuffle = true, .seed = args.seed});
    printf("int8 GEMM kernel: %s\n", tg_quantize_uses_amx()    ? "AMX (batches), AVX512-VNNI (single rows)"
                                     : tg_quantize_uses_vnni() ? "AVX512-VNNI"
                                                               : "portable C");

    /* ---- 1. the float32 model ---- */
    tg_manual_seed(args.seed);
    tg_module *model = make_mlp();
    for (int epoch = 0; epoch < args.epochs; epoch++) train(model, loader, args.lr, args.max_steps, "training");
    stage before = report("float32", model, data.test_x, data.test_y, tut_output_path("mlp_12_float32.safetensors"));

    /* ---- 2. prune 90% of all Linear weights at once, smallest |w| first ---- */
    tg_module *linears[5];
    const char *names[5];
    for (int i = 0; i < 5; i++) {
        linears[i] = tg_module_child(model, LINEARS[i]);
        names[i] = "weight";
    }
    tg_prune_global_unstructured(linears, names, 5, TG_PRUNE_L1_UNSTRUCTURED, tg_prune_fraction(atof(amount)));
    report("pruned", model, data.test_x, data.test_y, tut_output_path("mlp_12_pruned.safetensors"));
    /* the masks stay applied while fine-tuning: pruned weights stay zero */
    train(model, loader, args.lr / 10, atoll(finetune), "fine-tuning");
    report("pruned + fine-tuned", model, data.test_x, data.test_y, tut_output_path("mlp_12_pruned.safetensors"));
    for (int i = 0; i < 5; i++) tg_prune_remove(linears[i], "weight"); /* weight = weight_orig * weight_mask */

    /* ---- 3. dynamic int8 quantisation ---- */
    model = tg_quantize_dynamic(model, (tg_quantize_opts){0});
    const char *int8_path = tut_output_path("mlp_12_int8.safetensors");
    stage after = report("pruned + int8", model, data.test_x, data.test_y, int8_path);

    /* ---- 4. reload the int8 file into a freshly quantised model ---- */
    tg_manual_seed(args.seed + 1);
    tg_module *fresh = tg_quantize_dynamic(make_mlp(), (tg_quantize_opts){0});
    tg_status loaded = tg_load_state_dict(fresh, int8_path, true);
    double reloaded = loaded ? -1 : tut_evaluate(fresh, data.test_x, data.test_y, 1000, TG_CPU).accuracy;
    printf("int8 file: %s, reloaded accuracy %.2f%% (%s)\n", int8_path, reloaded,
           reloaded == after.accuracy ? "identical" : "DIFFERENT");
    printf("float32 -> pruned int8: accuracy %+.2f points, file %.2fx smaller, batch 1 %.2fx, batch 64 %.2fx faster\n",
           after.accuracy - before.accuracy, (double)before.bytes / (double)after.bytes, after.per_s_1 / before.per_s_1,
           after.per_s_64 / before.per_s_64);

    /* --export-onnx FILE: the int8 MLP as QuantizeLinear / DequantizeLinear around int8 weights */
    int exported = tut_export_onnx(model, TG_SHAPE(1, 784), TG_FLOAT32, &args, NULL);

    tg_module_free(fresh);
    tg_module_free(model);
    tg_loader_free(loader);

    /* ======== Part 2: LeNet, pruned, then quantised statically ======== */
    printf("\nLeNet\n");
    tg_tensor *train_img = tg_reshape(data.train_x, TG_SHAPE(-1, 1, 28, 28));
    tg_tensor *test_img = tg_reshape(data.test_x, TG_SHAPE(-1, 1, 28, 28));
    tg_loader *img_loader = tg_loader_new(
        train_img, data.train_y, (tg_loader_opts){.batch_size = args.batch_size, .shuffle = true, .seed = args.seed});
    tg_manual_seed(args.seed);
    tg_module *lenet = make_lenet();
    for (int epoch = 0; epoch < args.epochs; epoch++) train(lenet, img_loader, args.lr, args.max_steps, "training");
    stage lenet_before =
        report("float32", lenet, test_img, data.test_y, tut_output_path("lenet_12_float32.safetensors"));

    /* ---- 5. prune 90% of the conv and fc weights together, fine-tune, make it permanent ---- */
    tg_module *layers[4];
    for (int i = 0; i < 4; i++) layers[i] = tg_module_child(lenet, LENET_LAYERS[i]);
    tg_prune_global_unstructured(layers, names, 4, TG_PRUNE_L1_UNSTRUCTURED, tg_prune_fraction(atof(amount)));
    report("pruned", lenet, test_img, data.test_y, tut_output_path("lenet_12_pruned.safetensors"));
    train(lenet, img_loader, args.lr / 10, atoll(finetune), "fine-tuning");
    report("pruned + fine-tuned", lenet, test_img, data.test_y, tut_output_path("lenet_12_pruned.safetensors"));
    for (int i = 0; i < 4; i++) tg_prune_remove(layers[i], "weight");

    /* ---- 6. static int8 quantisation: fuse, observe, calibrate, convert ---- */
    tg_module *qlenet = tg_quant_wrapper(lenet);     /* quant stub -> LeNet -> dequant stub */
    tg_fuse_modules(qlenet, "module.0", "module.1"); /* conv1 + ReLU */
    tg_fuse_modules(qlenet, "module.3", "module.4"); /* conv2 + ReLU */
    tg_fuse_modules(qlenet, "module.7", "module.8"); /* fc1 + ReLU */
    tg_eval(qlenet);
    tg_qconfig qconfig = tg_get_default_qconfig("onednn");
    tg_quant_prepare(qlenet, qconfig);
    int64_t calibrated = 0;
    TG_NO_GRAD {
        tg_tensor *x, *y;
        TG_FOR_EACH_BATCH(img_loader, x, y) {
            if (calibrated++ >= atoll(calib)) break;
            tg_forward(qlenet, x);
        }
    }
    if (tg_quant_convert(qlenet, qconfig)) {
        fprintf(stderr, "convert: %s\n", tg_last_error());
        return 1;
    }
    char lenet_int8_path[1024];
    snprintf(lenet_int8_path, sizeof lenet_int8_path, "%s", tut_output_path("lenet_12_int8.safetensors"));
    stage lenet_after = report("pruned + int8", qlenet, test_img, data.test_y, lenet_int8_path);

    /* ---- 7. an int8 model from the file alone: the same structure, then the weights ---- */
    tg_manual_seed(args.seed + 1);
    tg_module *loaded_lenet = tg_quant_wrapper(make_lenet());
    tg_fuse_modules(loaded_lenet, "module.0", "module.1");
    tg_fuse_modules(loaded_lenet, "module.3", "module.4");
    tg_fuse_modules(loaded_lenet, "module.7", "module.8");
    tg_quant_prepare(loaded_lenet, qconfig);
    tg_quant_convert_for_load(loaded_lenet, qconfig); /* no calibration: the file has the qparams */
    loaded = tg_load_state_dict(loaded_lenet, lenet_int8_path, true);
    double lenet_reloaded = loaded ? -1 : tut_evaluate(loaded_lenet, test_img, data.test_y, 1000, TG_CPU).accuracy;
    printf("int8 file: %s, reloaded accuracy %.2f%% (%s)\n", lenet_int8_path, lenet_reloaded,
           lenet_reloaded == lenet_after.accuracy ? "identical" : "DIFFERENT");
    printf("float32 -> pruned int8: accuracy %+.2f points, file %.2fx smaller, batch 1 %.2fx, batch 64 %.2fx faster\n",
           lenet_after.accuracy - lenet_before.accuracy, (double)lenet_before.bytes / (double)lenet_after.bytes,
           lenet_after.per_s_1 / lenet_before.per_s_1, lenet_after.per_s_64 / lenet_before.per_s_64);

    /* and the int8 LeNet beside it: FILE with _lenet before its extension */
    exported |= tut_export_onnx(qlenet, TG_SHAPE(1, 1, 28, 28), TG_FLOAT32, &args, "lenet");

    tg_module_free(loaded_lenet);
    tg_module_free(qlenet);
    tg_loader_free(img_loader);
    tg_release(train_img);
    tg_release(test_img);
    tut_data_free(&data);
    printf("live tensors at exit: %ld\n", tg_live_tensors());
    return reloaded == after.accuracy && lenet_reloaded == lenet_after.accuracy && exported == 0 ? 0 : 1;
}
