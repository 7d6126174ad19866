/* Lesson 04: LeNet with batch normalisation, on the GPU when there is one.
 *
 * The LeNet of lesson 03 with a BatchNorm2d after each convolution, trained with
 * SGD + momentum and a StepLR learning-rate schedule. Shows train/eval modes (batch
 * statistics vs running statistics), moving a model and its batches to the GPU,
 * and times training steps on the CPU and the GPU. --amp bf16 (or fp16 on CUDA) runs
 * the forward pass and the loss under autocast. README.md walks through it. */
#include <stdio.h>
#include <stdlib.h>

#include "tapegrad.h"
#include "tutorials/common/common.h"

static tg_module *make_lenet_bn(void) {
    tg_pool_opts pool2 = {.kernel_size = 2};
    return TG_NN_SEQUENTIAL(
        tg_nn_conv2d(1, 20, 5, (tg_conv_opts){0}),       /* [B, 20, 24, 24] */
        tg_nn_batch_norm2d(20, (tg_batch_norm_opts){0}), /* per-channel mean 0, variance 1, then scale + shift */
        tg_nn_relu(), tg_nn_max_pool2d(pool2),           /* [B, 20, 12, 12] */
        tg_nn_conv2d(20, 50, 5, (tg_conv_opts){0}),      /* [B, 50, 8, 8] */
        tg_nn_batch_norm2d(50, (tg_batch_norm_opts){0}), tg_nn_relu(), tg_nn_max_pool2d(pool2), /* [B, 50, 4, 4] */
        tg_nn_flatten(1, -1), tg_nn_linear(800, 500, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(500, 10, (tg_linear_opts){0}));
}

/* One SGD step on (x, y); returns the loss. With `args` (NULL: float32) and args->amp,
 * forward and loss run under autocast (convolutions and linears in bfloat16 / float16,
 * batch norm's statistics and the loss in float32) and `scaler` scales the loss (a
 * disabled scaler, for bf16, passes it through). The weights stay float32. */
static double train_step(tg_module *model, tg_optim *opt, const tut_args *args, tg_grad_scaler *scaler, tg_tensor *x,
                         tg_tensor *y) {
    double value = 0;
    bool amp = args && args->amp;
    TG_SCOPE {
        tg_tensor *loss = NULL;
        TG_AUTOCAST_IF(amp ? args->device.kind : TG_DEVICE_CPU, amp ? args->amp_dtype : TG_BFLOAT16, amp) {
            loss = tg_cross_entropy(tg_forward(model, x), y);
        }
        tut_step_memory_forward_end();
        if (scaler) {
            tg_backward(tg_grad_scaler_scale(scaler, loss));
            tg_grad_scaler_step(scaler, opt, NULL); /* skipped if a scaled gradient overflowed */
            tg_grad_scaler_update(scaler);
        } else {
            tg_backward(loss);
            tg_optim_step(opt);
        }
        tg_optim_zero_grad(opt);
        value = tg_item(loss);
    }
    return value;
}

/* Milliseconds per training step on `device`, over `steps` steps of one fixed batch
 * (after two warm-up steps that let the CUDA caching allocator fill up). */
static double time_steps(tg_device device, tg_tensor *x, tg_tensor *y, int steps) {
    tg_manual_seed(0);
    tg_module *model = make_lenet_bn();
    tg_to(model, device);
    tg_optim *opt = tg_sgd(model, (tg_sgd_opts){.lr = 0.01, .momentum = 0.9});
    double ms = 0;
    TG_SCOPE {
        tg_tensor *dx = tg_to(x, device), *dy = tg_to(y, device);
        for (int i = 0; i < 2; i++) train_step(model, opt, NULL, NULL, dx, dy);
        tg_cuda_synchronize();
        double start = tut_now();
        for (int i = 0; i < steps; i++) train_step(model, opt, NULL, NULL, dx, dy);
        tg_cuda_synchronize(); /* tg_item already waited; kept for the habit */
        ms = 1000 * (tut_now() - start) / steps;
    }
    tg_optim_free(opt);
    tg_module_free(model);
    return ms;
}

int main(int argc, char **argv) {
    const char *compare_text = "20";
    tut_option extra[] = {{.name = "--compare-steps",
                           .metavar = "N",
                           .value = &compare_text,
                           .help = "time N steps on the CPU and the GPU at the end (default 20, 0: skip)"}};
    tut_args args = {.options = TUT_OPT_TRAINING | TUT_OPT_LOG | TUT_OPT_PLOT | TUT_OPT_RESULT_LINE |
                                TUT_OPT_SHOW_ORDER | TUT_OPT_SAVE_INIT | TUT_OPT_AMP,
                     .device_name = "auto",
                     .epochs = 1,
                     .batch_size = 64,
                     .lr = 0.01,
                     .seed = 1};
    tut_parse_args(argc, argv, "Lesson 04: LeNet + BatchNorm2d on the GPU (or the CPU), with an LR schedule.", &args,
                   extra, 1);
    int compare_steps = atoi(compare_text);
    char device_text[16];
    tg_device_str(args.device, device_text);
    if (args.device.kind == TG_DEVICE_CUDA)
        printf("device: %s (%d CUDA device(s); %s)\n", device_text, tg_cuda_device_count(), tg_build_info());
    else
        printf("device: cpu (%s)\n",
               tg_cuda_available() ? "asked for with --device cpu" : "no CUDA device here; running on the CPU");

    tut_data data = tut_load_data(&args, true);
    printf("data: %s, %lld training and %lld test images\n", data.name, (long long)tg_size(data.train_x, 0),
           (long long)tg_size(data.test_x, 0));

    tg_manual_seed(args.seed);
    tg_module *model = make_lenet_bn();
    tut_save_init(model, &args);
    tg_module_print(model, TG_SHAPE(args.batch_size, 1, 28, 28), stdout);
    tg_to(model, args.device); /* parameters and buffers (running stats) move in place */
    tg_optim *opt = tg_sgd(model, (tg_sgd_opts){.lr = args.lr, .momentum = 0.9});
    tg_lr_scheduler *schedule = tg_step_lr(opt, 1, 0.7); /* lr *= 0.7 after every epoch */
    /* Loss scaling for --amp fp16 only (bfloat16 has float32's range, as in PyTorch). */
    tg_grad_scaler *scaler =
        tg_grad_scaler_new(opt, (tg_grad_scaler_opts){.disabled = !(args.amp && args.amp_dtype == TG_FLOAT16)});

    /* The data set stays on the CPU; the loader copies one batch at a time to the device. */
    tg_loader *loader = tg_loader_new(
        data.train_x, data.train_y,
        (tg_loader_opts){.batch_size = args.batch_size, .shuffle = true, .seed = args.seed, .device = args.device});
    if (args.show_order) {
        int64_t n = tg_loader_num_samples(loader), *perm = malloc((size_t)n * sizeof *perm);
        tg_random_permutation(perm, n, args.seed, 0);
        printf("order:");
        for (int i = 0; i < 10 && i < n; i++) printf(" %lld", (long long)perm[i]);
        printf("\n");
        free(perm);
    }

    FILE *log = tut_log_open(args.log_path);
    int64_t step = 0;
    tut_curve curve = {0}; /* per-step losses for --plot */
    double epoch_seconds = 0, accuracy = 0;
    printf("training on %s: %d epoch(s), batch %lld, SGD lr %g momentum 0.9, StepLR(1, 0.7)%s%s\n", device_text,
           args.epochs, (long long)args.batch_size, args.lr, args.amp ? ", autocast " : "",
           args.amp ? args.amp_name : "");
    /* --max-steps may end the run before --epochs: no epoch starts without a step left */
    for (int epoch = 0; epoch < args.epochs && !(args.max_steps && step >= args.max_steps); epoch++) {
        tg_train(model, true); /* batch norm uses the batch's statistics and updates the running ones */
        tut_progress bar;
        tut_progress_begin(&bar, epoch, args.epochs, tg_loader_num_batches(loader), args.batch_size);
        double start = tut_now();
        tg_tensor *x, *y;
        TG_FOR_EACH_BATCH(loader, x, y) {
            if (args.max_steps && step >= args.max_steps) break; /* the batch's scope ends on the way out */
            tut_step_memory_begin();                             /* the step's activation peak, for --result-line */
            double value = train_step(model, opt, &args, scaler, x, y);
            tut_step_memory_end();
            tut_progress_update(&bar, value);
            tut_curve_add(&curve, value);
            step++;
        }
        epoch_seconds = tut_now() - start;
        tut_profile_section("the epoch's training steps", bar.loss_count, epoch_seconds);
        double train_loss = tut_progress_end(&bar);
        double lr = tg_optim_get_lr(opt);
        /* tut_evaluate switches to eval mode: batch norm then uses the running statistics. */
        tut_eval test = tut_evaluate(model, data.test_x, data.test_y, 1000, args.device);
        accuracy = test.accuracy;
        printf("epoch %d: train loss %.4f, test loss %.4f, test accuracy %.2f%%, lr %g, %.1f s\n", epoch + 1,
               train_loss, test.loss, test.accuracy, lr, epoch_seconds);
        tut_log_row(log, epoch + 1, step, train_loss, test.loss, test.accuracy, lr, epoch_seconds);
        tg_scheduler_step(schedule); /* after the epoch's optimizer steps, as in PyTorch */
    }
    tut_log_close(log);
    if (args.plot_path &&
        tut_plot_svg(args.plot_path, "04_batchnorm_gpu: training loss", &curve, tg_loader_num_batches(loader), 50) == 0)
        printf("loss curve: %s\n", tut_output_path(args.plot_path));
    tut_curve_free(&curve);

    /* ---- train vs eval: what batch norm does differently ---- */
    TG_SCOPE {
        tg_tensor *mean = tg_module_get(model, "1.running_mean"), *seen = tg_module_get(model, "1.num_batches_tracked");
        tg_tensor *first = tg_narrow(tg_to(mean, TG_CPU), 0, 0, 4);
        printf("first batch norm: %lld batches tracked, running_mean[:4] = ", (long long)tg_item(tg_to(seen, TG_CPU)));
        tg_print(first);
        tg_tensor *x = tg_narrow(data.test_x, 0, 0, 8), *dx = tg_to(x, args.device);
        tg_eval(model);
        tg_tensor *a, *b;
        TG_NO_GRAD {
            a = tg_forward(model, dx);
            b = tg_forward(model, tg_narrow(dx, 0, 0, 1)); /* one image alone gives the same answer in eval mode */
        }
        double diff = tg_item(tg_max(tg_abs(tg_sub(tg_narrow(a, 0, 0, 1), b))));
        printf("eval mode: image 0 alone vs in a batch of 8: max difference %.2g\n", diff);
        tg_train(model, true);
    }

    /* ---- CPU vs GPU step time ---- */
    if (compare_steps > 0) {
        TG_SCOPE {
            tg_tensor *x = tg_narrow(data.train_x, 0, 0, args.batch_size);
            tg_tensor *y = tg_narrow(data.train_y, 0, 0, args.batch_size);
            double cpu = time_steps(TG_CPU, x, y, compare_steps);
            printf("step time, batch %lld: cpu %.2f ms", (long long)args.batch_size, cpu);
            if (tg_cuda_available()) {
                double gpu = time_steps(tg_cuda(0), x, y, compare_steps);
                printf(", cuda:0 %.2f ms (%.1fx)\n", gpu, cpu / gpu);
            } else {
                printf(", no GPU here (%s)\n", tg_build_info());
            }
        }
    }
    if (args.result_line) tut_print_result(args.amp ? "lenet_bn_amp_epoch" : "lenet_bn_epoch", epoch_seconds, accuracy);
    /* --export-onnx: batch norm is written with its running statistics (eval mode) */
    int exported = tut_export_onnx(model, TG_SHAPE(1, 1, 28, 28), TG_FLOAT32, &args, NULL);

    tg_scheduler_free(schedule);
    tg_grad_scaler_free(scaler);
    tg_loader_free(loader);
    tg_optim_free(opt);
    tg_module_free(model);
    tut_data_free(&data);
    printf("live tensors at exit: %ld\n", tg_live_tensors());
    return exported;
}
