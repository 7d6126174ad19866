/* Lesson 03: LeNet, a small convolutional network, on Fashion-MNIST.
 *
 * conv(1->20, 5x5) -> ReLU -> max-pool 2 -> conv(20->50, 5x5) -> ReLU -> max-pool 2
 * -> flatten -> fc 800->500 -> ReLU -> fc 500->10, trained with SGD and momentum 0.9.
 * README.md walks through this file. */
#include <stdio.h>
#include <stdlib.h>

#include "tapegrad.h"
#include "tutorials/common/common.h"

static tg_module *make_lenet(void) {
    tg_pool_opts pool2 = {.kernel_size = 2};                            /* stride defaults to the kernel size */
    return TG_NN_SEQUENTIAL(tg_nn_conv2d(1, 20, 5, (tg_conv_opts){0}),  /* [B, 1, 28, 28] -> [B, 20, 24, 24] */
                            tg_nn_relu(), tg_nn_max_pool2d(pool2),      /* -> [B, 20, 12, 12] */
                            tg_nn_conv2d(20, 50, 5, (tg_conv_opts){0}), /* -> [B, 50, 8, 8] */
                            tg_nn_relu(), tg_nn_max_pool2d(pool2),      /* -> [B, 50, 4, 4] */
                            tg_nn_flatten(1, -1),                       /* -> [B, 800] */
                            tg_nn_linear(800, 500, (tg_linear_opts){0}), tg_nn_relu(),
                            tg_nn_linear(500, 10, (tg_linear_opts){0}));
}

int main(int argc, char **argv) {
    const char *momentum_text = "0.9";
    tut_option extra[] = {
        {.name = "--momentum", .metavar = "X", .value = &momentum_text, .help = "SGD momentum (default 0.9)"}};
    tut_args args = {.options = TUT_OPT_TRAINING | TUT_OPT_LOG | TUT_OPT_PLOT | TUT_OPT_RESULT_LINE |
                                TUT_OPT_SHOW_ORDER | TUT_OPT_SAVE_INIT,
                     .epochs = 1,
                     .batch_size = 64,
                     .lr = 0.01,
                     .seed = 1,
                     .plot_path = "loss_03_lenet.svg"};
    tut_parse_args(argc, argv, "Lesson 03: LeNet on Fashion-MNIST with SGD and momentum.", &args, extra, 1);
    double momentum = atof(momentum_text);

    tut_data data = tut_load_data(&args, true); /* x [N, 1, 28, 28]: conv layers want channels */
    printf("data: %s, %lld training and %lld test images\n", data.name, (long long)tg_size(data.train_x, 0),
           (long long)tg_size(data.test_x, 0));

    tg_manual_seed(args.seed);
    tg_module *model = make_lenet();
    tut_save_init(model, &args);
    tg_to(model, args.device);
    tg_module_print(model, TG_SHAPE(args.batch_size, 1, 28, 28), stdout);
    /* Zero option fields mean PyTorch's defaults; SGD's lr has none, so it is always given. */
    tg_optim *opt = tg_sgd(model, (tg_sgd_opts){.lr = args.lr, .momentum = momentum});

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
    tut_curve curve = {0};
    int64_t step = 0;
    double epoch_seconds = 0, accuracy = 0;
    char device_text[16];
    printf("training on %s: %d epoch(s), batch %lld, SGD lr %g momentum %g\n", tg_device_str(args.device, device_text),
           args.epochs, (long long)args.batch_size, args.lr, momentum);
    /* --max-steps may end the run before --epochs: no epoch starts without a step left */
    for (int epoch = 0; epoch < args.epochs && !(args.max_steps && step >= args.max_steps); epoch++) {
        tut_progress bar;
        tut_progress_begin(&bar, epoch, args.epochs, tg_loader_num_batches(loader), args.batch_size);
        double start = tut_now();
        tg_tensor *x, *y;
        TG_FOR_EACH_BATCH(loader, x, y) {
            if (args.max_steps && step >= args.max_steps) break; /* the batch's scope ends on the way out */
            tg_tensor *loss = tg_cross_entropy(tg_forward(model, x), y);
            tg_backward(loss);
            tg_optim_step(opt);
            tg_optim_zero_grad(opt);
            double value = tg_item(loss);
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
        tut_plot_svg(args.plot_path, "03_lenet: training loss", &curve, tg_loader_num_batches(loader), 50) == 0)
        printf("loss curve: %s\n", tut_output_path(args.plot_path));
    if (args.result_line) tut_print_result("lenet_epoch", epoch_seconds, accuracy);
    int exported = tut_export_onnx(model, TG_SHAPE(1, 1, 28, 28), TG_FLOAT32, &args, NULL); /* --export-onnx */

    tg_loader_free(loader);
    tg_optim_free(opt);
    tg_module_free(model);
    tut_data_free(&data);
    tut_curve_free(&curve);
    printf("live tensors at exit: %ld\n", tg_live_tensors());
    return exported;
}
