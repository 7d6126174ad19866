/* Lesson 12: a smaller, faster MLP from the trained one.
 *
 * Trains lesson 02's MLP (784-1024-512-256-128-10, Adam), prunes 90% of its Linear
 * weights (global L1, torch.nn.utils.prune.global_unstructured), fine-tunes it with
 * the masks applied, makes the pruning permanent, then quantises it dynamically
 * (int8 weights, torch.ao.quantization.quantize_dynamic). After each stage it prints
 * the test accuracy, the state dict's file size and the inference throughput at
 * batch 1 and 64; the int8 model is saved, reloaded and checked. README.md walks
 * through this file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tapegrad.h"
#include "tutorials/common/common.h"

static tg_module *make_mlp(void) {
    return TG_NN_SEQUENTIAL(
        tg_nn_linear(784, 1024, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(1024, 512, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(512, 256, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(256, 128, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(128, 10, (tg_linear_opts){0}));
}

static const char *const LINEARS[] = {"0", "2", "4", "6", "8"};

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

/* The zeros among the Linear weights: tg_prune_sparsity's, or the int8 values'. */
static double sparsity(tg_module *model) {
    int64_t zeros = 0, total = 0;
    for (int i = 0; i < 5; i++) {
        tg_module *layer = tg_module_child(model, LINEARS[i]);
        if (strcmp(tg_module_type_of(layer)->name, "DynamicQuantizedLinear")) return tg_prune_sparsity(model);
        TG_SCOPE {
            tg_tensor *q = tg_quantized_linear_weight(layer);
            tg_tensor *nz = tg_sum(tg_eq_scalar(q, 0));
            zeros += (int64_t)tg_item(nz);
            total += tg_numel(q);
        }
    }
    return (double)zeros / (double)total;
}

static stage report(const char *name, tg_module *model, const tut_data *data, const char *path) {
    stage s = {0};
    s.accuracy = tut_evaluate(model, data->test_x, data->test_y, 1000, TG_CPU).accuracy;
    tg_save_state_dict(model, path);
    s.bytes = file_size(path);
    s.per_s_1 = throughput(model, data->test_x, 1);
    s.per_s_64 = throughput(model, data->test_x, 64);
    printf("%-22s accuracy %6.2f%%  file %9ld bytes  batch 1: %8.0f images/s  batch 64: %8.0f images/s  "
           "sparsity %.3f\n",
           name, s.accuracy, s.bytes, s.per_s_1, s.per_s_64, sparsity(model));
    return s;
}

int main(int argc, char **argv) {
    const char *finetune = "300", *amount = "0.9";
    tut_option extra[] = {
        {.name = "--finetune-steps", .metavar = "N", .value = &finetune, .help = "fine-tuning steps after pruning (300)"},
        {.name = "--amount", .metavar = "F", .value = &amount, .help = "share of the weights to prune (0.9)"}};
    tut_args args = {.options = TUT_OPT_EPOCHS | TUT_OPT_BATCH_SIZE | TUT_OPT_LR | TUT_OPT_SEED | TUT_OPT_DATA |
                                TUT_OPT_MAX_STEPS,
                     .epochs = 1, .batch_size = 64, .lr = 1e-3, .seed = 1};
    tut_parse_args(argc, argv, "Lesson 12: prune the MLP to 90%, fine-tune, quantise it to int8.", &args, extra, 2);

    tut_data data = tut_load_data(&args, false);
    printf("data: %s, %lld training and %lld test images\n", data.name, (long long)tg_size(data.train_x, 0),
           (long long)tg_size(data.test_x, 0));
    tg_loader *loader = tg_loader_new(data.train_x, data.train_y,
                                      (tg_loader_opts){.batch_size = args.batch_size, .shuffle = true, .seed = args.seed});
    printf("int8 GEMM kernel: %s\n", tg_quantize_uses_vnni() ? "AVX512-VNNI" : "portable C");

    /* ---- 1. the float32 model ---- */
    tg_manual_seed(args.seed);
    tg_module *model = make_mlp();
    for (int epoch = 0; epoch < args.epochs; epoch++) train(model, loader, args.lr, args.max_steps, "training");
    stage before = report("float32", model, &data, tut_output_path("mlp_12_float32.safetensors"));

    /* ---- 2. prune 90% of all Linear weights at once, smallest |w| first ---- */
    tg_module *linears[5];
    const char *names[5];
    for (int i = 0; i < 5; i++) {
        linears[i] = tg_module_child(model, LINEARS[i]);
        names[i] = "weight";
    }
    tg_prune_global_unstructured(linears, names, 5, TG_PRUNE_L1_UNSTRUCTURED, tg_prune_fraction(atof(amount)));
    report("pruned", model, &data, tut_output_path("mlp_12_pruned.safetensors"));
    /* the masks stay applied while fine-tuning: pruned weights stay zero */
    train(model, loader, args.lr / 10, atoll(finetune), "fine-tuning");
    report("pruned + fine-tuned", model, &data, tut_output_path("mlp_12_pruned.safetensors"));
    for (int i = 0; i < 5; i++) tg_prune_remove(linears[i], "weight"); /* weight = weight_orig * weight_mask */

    /* ---- 3. dynamic int8 quantisation ---- */
    model = tg_quantize_dynamic(model, (tg_quantize_opts){0});
    const char *int8_path = tut_output_path("mlp_12_int8.safetensors");
    stage after = report("pruned + int8", model, &data, int8_path);

    /* ---- 4. reload the int8 file into a freshly quantised model ---- */
    tg_manual_seed(args.seed + 1);
    tg_module *fresh = tg_quantize_dynamic(make_mlp(), (tg_quantize_opts){0});
    tg_status loaded = tg_load_state_dict(fresh, int8_path, true);
    double reloaded = loaded ? -1 : tut_evaluate(fresh, data.test_x, data.test_y, 1000, TG_CPU).accuracy;
    printf("int8 file: %s, reloaded accuracy %.2f%% (%s)\n", int8_path, reloaded,
           reloaded == after.accuracy ? "identical" : "DIFFERENT");
    printf("float32 -> pruned int8: accuracy %+.2f points, file %.2fx smaller, batch 1 %.2fx, batch 64 %.2fx faster\n",
           after.accuracy - before.accuracy, (double)before.bytes / (double)after.bytes,
           after.per_s_1 / before.per_s_1, after.per_s_64 / before.per_s_64);

    tg_module_free(fresh);
    tg_module_free(model);
    tg_loader_free(loader);
    tut_data_free(&data);
    printf("live tensors at exit: %ld\n", tg_live_tensors());
    return reloaded == after.accuracy ? 0 : 1;
}
