/* Lesson 02: a multi-layer perceptron on Fashion-MNIST.
 *
 * Trains 784-1024-512-256-128-10 with ReLU and Adam, evaluates it after every
 * epoch, saves a checkpoint, reloads it into a fresh model and checks that the
 * reloaded model scores exactly the same. With --amp bf16 (or fp16 on CUDA) the
 * forward pass and the loss run under autocast, as PyTorch's mixed-precision recipe.
 * README.md walks through this file. */
#include <stdio.h>
#include <stdlib.h>

#include "tapegrad.h"
#include "tutorials/common/common.h"

/* ---- the model ---- */

static tg_module *make_mlp(void) {
    return TG_NN_SEQUENTIAL(
        tg_nn_linear(784, 1024, (tg_linear_opts){0}), tg_nn_relu(), tg_nn_linear(1024, 512, (tg_linear_opts){0}),
        tg_nn_relu(), tg_nn_linear(512, 256, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(256, 128, (tg_linear_opts){0}), tg_nn_relu(), tg_nn_linear(128, 10, (tg_linear_opts){0}));
}

/* ---- checkpoints: the state dict as a safetensors file ---- */

static void save_checkpoint(tg_module *model, const char *path) {
    tg_tensor_map *map = tg_tensor_map_new();
    int count;
    const tg_named_tensor *state = tg_state_dict(model, &count); /* "0.weight", "0.bias", "2.weight", ... */
    for (int i = 0; i < count; i++) tg_tensor_map_set(map, state[i].name, state[i].tensor);
    tg_tensor_map_set_metadata(map, "model", "02_mlp 784-1024-512-256-128-10");
    tg_safetensors_save(map, path);
    tg_tensor_map_free(map);
}

static void load_checkpoint(tg_module *model, const char *path) {
    tg_tensor_map *map = tg_safetensors_load(path); /* CPU tensors */
    int count;
    const tg_named_tensor *state = tg_state_dict(model, &count);
    for (int i = 0; i < count; i++) {
        tg_tensor *saved = tg_tensor_map_get(map, state[i].name);
        if (!saved) {
            fprintf(stderr, "%s: no tensor called %s\n", path, state[i].name);
            exit(1);
        }
        TG_NO_GRAD { tg_copy_(state[i].tensor, saved); } /* into the model's own tensor, any device */
    }
    tg_tensor_map_free(map);
}

int main(int argc, char **argv) {
    const char *checkpoint = "mlp_02.safetensors";
    tut_option extra[] = {{.name = "--checkpoint",
                           .metavar = "FILE",
                           .value = &checkpoint,
                           .help = "where to save the model (default mlp_02.safetensors)"}};
    tut_args args = {.options = TUT_OPT_TRAINING | TUT_OPT_LOG | TUT_OPT_PLOT | TUT_OPT_RESULT_LINE |
                                TUT_OPT_SHOW_ORDER | TUT_OPT_SAVE_INIT | TUT_OPT_AMP,
                     .epochs = 1,
                     .batch_size = 64,
                     .lr = 1e-3,
                     .seed = 1,
                     .plot_path = "loss_02_mlp.svg"};
    tut_parse_args(argc, argv, "Lesson 02: an MLP on Fashion-MNIST with Adam, and a checkpoint.", &args, extra, 1);

    /* ---- data ---- */
    tut_data data = tut_load_data(&args, false); /* x [N, 784] float32 normalised, y [N] int64 */
    printf("data: %s, %lld training and %lld test images\n", data.name, (long long)tg_size(data.train_x, 0),
           (long long)tg_size(data.test_x, 0));

    /* ---- model and optimizer ---- */
    tg_manual_seed(args.seed); /* the initial weights depend only on --seed */
    tg_module *model = make_mlp();
    tut_save_init(model, &args);
    tg_to(model, args.device);
    tg_module_print(model, TG_SHAPE(args.batch_size, 784), stdout);
    tg_optim *opt = tg_adam(model, (tg_adam_opts){.lr = args.lr});
    /* --amp: the parameters stay float32 (the master weights); autocast casts them to
     * bfloat16 / float16 for each matmul. float16 gradients can underflow, so fp16 scales
     * the loss (GradScaler); bf16 has float32's range and needs none, as in PyTorch. A
     * disabled scaler passes the loss through and steps the optimizer unchanged. */
    tg_grad_scaler *scaler =
        tg_grad_scaler_new(opt, (tg_grad_scaler_opts){.disabled = !(args.amp && args.amp_dtype == TG_FLOAT16)});

    tg_loader *loader = tg_loader_new(
        data.train_x, data.train_y,
        (tg_loader_opts){.batch_size = args.batch_size, .shuffle = true, .seed = args.seed, .device = args.device});
    if (args.show_order) {
        int64_t n = tg_loader_num_samples(loader), *perm = malloc((size_t)n * sizeof *perm);
        tg_random_permutation(perm, n, args.seed, 0); /* what the loader draws for epoch 0 */
        printf("order:");
        for (int i = 0; i < 10 && i < n; i++) printf(" %lld", (long long)perm[i]);
        printf("\n");
        free(perm);
    }

    /* ---- training ---- */
    FILE *log = tut_log_open(args.log_path);
    tut_curve curve = {0};
    int64_t step = 0;
    double epoch_seconds = 0, accuracy = 0;
    char device_text[16];
    printf("training on %s: %d epoch(s), batch %lld, Adam lr %g%s%s\n", tg_device_str(args.device, device_text),
           args.epochs, (long long)args.batch_size, args.lr, args.amp ? ", autocast " : "",
           args.amp ? args.amp_name : "");
    /* --max-steps may end the run before --epochs: no epoch starts without a step left */
    for (int epoch = 0; epoch < args.epochs && !(args.max_steps && step >= args.max_steps); epoch++) {
        tut_progress bar;
        tut_progress_begin(&bar, epoch, args.epochs, tg_loader_num_batches(loader), args.batch_size);
        double start = tut_now();
        tg_tensor *x, *y;
        /* each pass over the loader is the next epoch, reshuffled, as with a DataLoader */
        TG_FOR_EACH_BATCH(loader, x, y) { /* a scope per batch: the step's temporaries die here */
            if (args.max_steps && step >= args.max_steps) break; /* the batch's scope ends on the way out */
            tut_step_memory_begin();                             /* the step's activation peak, for --result-line */
            tg_tensor *loss = NULL;
            TG_AUTOCAST_IF(args.device.kind, args.amp_dtype, args.amp) {
                tg_tensor *logits = tg_forward(model, x); /* [B, 10]; bfloat16 under --amp bf16 */
                loss = tg_cross_entropy(logits, y);       /* float32 (autocast's float32 list) */
            }
            tut_step_memory_forward_end();
            tg_backward(tg_grad_scaler_scale(scaler, loss)); /* float32 gradients for the float32 weights */
            tg_grad_scaler_step(scaler, opt, NULL);          /* skipped if a scaled gradient overflowed */
            tg_grad_scaler_update(scaler);
            tg_optim_zero_grad(opt);
            tut_step_memory_end();
            double value = tg_item(loss); /* waits for the GPU, if any */
            tut_progress_update(&bar, value);
            tut_curve_add(&curve, value);
            step++;
        }
        epoch_seconds = tut_now() - start;
        tut_profile_section("the epoch's training steps", bar.loss_count, epoch_seconds);
        double train_loss = tut_progress_end(&bar);
        tut_eval test = tut_evaluate(model, data.test_x, data.test_y, 1000, args.device);
        accuracy = test.accuracy;
        printf("epoch %d: train loss %.4f, test loss %.4f, test accuracy %.2f%%, %.1f s\n", epoch + 1, train_loss,
               test.loss, test.accuracy, epoch_seconds);
        tut_log_row(log, epoch + 1, step, train_loss, test.loss, test.accuracy, tg_optim_get_lr(opt), epoch_seconds);
    }
    tut_log_close(log);
    if (args.plot_path &&
        tut_plot_svg(args.plot_path, "02_mlp: training loss", &curve, tg_loader_num_batches(loader), 50) == 0)
        printf("loss curve: %s\n", tut_output_path(args.plot_path));

    /* ---- checkpoint: save, reload into a fresh model, compare ---- */
    const char *path = tut_output_path(checkpoint);
    save_checkpoint(model, path);
    tg_manual_seed(args.seed + 1); /* different initial weights, to show the load replaces them */
    tg_module *fresh = make_mlp();
    tg_to(fresh, args.device);
    load_checkpoint(fresh, path);
    tut_eval reloaded = tut_evaluate(fresh, data.test_x, data.test_y, 1000, args.device);
    printf("checkpoint: %s, reloaded model's test accuracy %.2f%% (%s)\n", path, reloaded.accuracy,
           reloaded.accuracy == accuracy ? "identical" : "DIFFERENT");

    if (args.result_line) tut_print_result(args.amp ? "mlp_amp_epoch" : "mlp_epoch", epoch_seconds, accuracy);
    /* --export-onnx FILE: the trained model for ONNX Runtime and co. (an example input of one image) */
    int exported = tut_export_onnx(model, TG_SHAPE(1, 784), TG_FLOAT32, &args, NULL);

    /* ---- cleanup: every tensor is accounted for ---- */
    tg_module_free(fresh);
    tg_loader_free(loader);
    tg_grad_scaler_free(scaler);
    tg_optim_free(opt);
    tg_module_free(model);
    tut_data_free(&data);
    tut_curve_free(&curve);
    printf("live tensors at exit: %ld\n", tg_live_tensors());
    return reloaded.accuracy == accuracy && exported == 0 ? 0 : 1;
}
