/* Lesson 07: a variational autoencoder on Fashion-MNIST (pytorch/examples' vae).
 *
 * Encoder 784-400 (ReLU) -> mu [20] and logvar [20]; z = mu + exp(logvar / 2) * eps
 * with eps ~ N(0, 1) (the reparameterisation trick); decoder 20-400 (ReLU) -784
 * (sigmoid). Loss per batch: binary_cross_entropy(recon, x, sum) + KL divergence of
 * N(mu, exp(logvar)) from N(0, 1). Adam lr 1e-3, batch 128, pixels in [0, 1].
 * README.md walks through this file. */
#include <stdio.h>
#include <stdlib.h>

#include "tapegrad.h"
#include "tutorials/common/common.h"

/* ---- the model: PyTorch's VAE class, children fc1, fc21, fc22, fc3, fc4 ---- */

/* Runs the whole model on x [B, 784]: returns the reconstruction [B, 784] in (0, 1)
 * and sets *mu and *logvar [B, 20] (references owned by the current scope). */
static tg_tensor *vae_run(tg_module *vae, tg_tensor *x, tg_tensor **mu, tg_tensor **logvar) {
    tg_tensor *h1 = tg_relu(tg_forward(tg_module_child(vae, "fc1"), x));
    *mu = tg_forward(tg_module_child(vae, "fc21"), h1);
    *logvar = tg_forward(tg_module_child(vae, "fc22"), h1);
    tg_tensor *std = tg_exp(tg_mul_scalar(*logvar, 0.5));
    tg_tensor *eps = tg_randn_like(std); /* the default generator: PyTorch's numbers on the CPU */
    tg_tensor *z = tg_add(*mu, tg_mul(eps, std));
    tg_tensor *h3 = tg_relu(tg_forward(tg_module_child(vae, "fc3"), z));
    return tg_sigmoid(tg_forward(tg_module_child(vae, "fc4"), h3));
}

/* tg_forward gives the reconstruction only (what tg_module_print shows). */
static tg_tensor *vae_forward(tg_module *self, tg_tensor *x) {
    tg_tensor *mu, *logvar;
    return vae_run(self, x, &mu, &logvar);
}

static const tg_module_type vae_type = {.name = "VAE", .forward = vae_forward};

static tg_module *make_vae(void) {
    tg_module *m = tg_module_new(&vae_type, 0);
    /* created in the order of PyTorch's __init__, so the same seed gives the same weights */
    tg_register_module(m, "fc1", tg_nn_linear(784, 400, (tg_linear_opts){0}));
    tg_register_module(m, "fc21", tg_nn_linear(400, 20, (tg_linear_opts){0}));
    tg_register_module(m, "fc22", tg_nn_linear(400, 20, (tg_linear_opts){0}));
    tg_register_module(m, "fc3", tg_nn_linear(20, 400, (tg_linear_opts){0}));
    tg_register_module(m, "fc4", tg_nn_linear(400, 784, (tg_linear_opts){0}));
    return m;
}

/* Reconstruction + KL divergence, summed over the batch (the example's loss_function):
 * BCE(recon, x, sum) - 0.5 * sum(1 + logvar - mu^2 - exp(logvar)). */
static tg_tensor *vae_loss(tg_tensor *recon, tg_tensor *x, tg_tensor *mu, tg_tensor *logvar) {
    tg_tensor *bce = tg_binary_cross_entropy_opts(recon, x, (tg_bce_opts){.reduction = TG_REDUCTION_SUM});
    tg_tensor *terms = tg_sub(tg_sub(tg_add_scalar(logvar, 1.0), tg_square(mu)), tg_exp(logvar));
    tg_tensor *kld = tg_mul_scalar(tg_sum(terms), -0.5);
    return tg_add(bce, kld);
}

/* ---- data: pixels in [0, 1] (torchvision's ToTensor), not normalised ---- */

static void load_pixels(const tut_args *args, tg_tensor **train_x, tg_tensor **test_x) {
    if (args->synthetic) { /* the shared generated images, squashed into (0, 1) */
        tut_data d = tut_load_data(args, false);
        TG_SCOPE {
            *train_x = tg_retain(tg_sigmoid(d.train_x));
            *test_x = tg_retain(tg_sigmoid(d.test_x));
        }
        tut_data_free(&d);
        return;
    }
    tg_tensor **out[2] = {train_x, test_x};
    for (int split = 0; split < 2; split++) {
        TG_SCOPE {
            tg_mnist m = tg_mnist_load(args->data_dir, split == 0 ? TG_MNIST_TRAIN : TG_MNIST_TEST);
            tg_tensor *pixels = tg_mnist_to_float(m.images); /* [N, 28, 28] / 255 */
            *out[split] = tg_retain(tg_reshape(pixels, TG_SHAPE(tg_size(pixels, 0), 784)));
        }
    }
}

/* The example's test(): the summed loss over the test set (batches of 128, in order,
 * eval mode, no grad; z is still sampled) divided by its size. */
static double test_loss(tg_module *vae, tg_tensor *test_x, int64_t batch_size, tg_device device) {
    tg_eval(vae);
    tg_loader *ld = tg_loader_new(test_x, NULL, (tg_loader_opts){.batch_size = batch_size, .device = device});
    double sum = 0;
    tg_tensor *x, *unused;
    TG_NO_GRAD {
        TG_FOR_EACH_BATCH(ld, x, unused) {
            tg_tensor *mu, *logvar;
            tg_tensor *recon = vae_run(vae, x, &mu, &logvar);
            sum += tg_item(vae_loss(recon, x, mu, logvar));
        }
    }
    tg_loader_free(ld);
    tg_train(vae, true);
    return sum / (double)tg_size(test_x, 0);
}

int main(int argc, char **argv) {
    tut_args args = {.options = TUT_OPT_TRAINING | TUT_OPT_LOG | TUT_OPT_PLOT | TUT_OPT_RESULT_LINE | TUT_OPT_SAVE_INIT,
                     .epochs = 1,
                     .batch_size = 128,
                     .lr = 1e-3,
                     .seed = 1,
                     .plot_path = "loss_07_vae.svg"};
    tut_parse_args(argc, argv, "Lesson 07: a variational autoencoder on Fashion-MNIST (pytorch/examples vae).", &args,
                   NULL, 0);

    tg_tensor *train_x, *test_x;
    load_pixels(&args, &train_x, &test_x);
    printf("data: %s, %lld training and %lld test images, pixels in [0, 1]\n",
           args.synthetic ? "generated data (--synthetic)" : args.data_dir, (long long)tg_size(train_x, 0),
           (long long)tg_size(test_x, 0));

    tg_manual_seed(args.seed); /* the initial weights and then every eps depend only on --seed */
    tg_module *vae = make_vae();
    tut_save_init(vae, &args);
    tg_to(vae, args.device);
    tg_module_print(vae, TG_SHAPE(args.batch_size, 784), stdout);
    tg_manual_seed(args.seed); /* tg_module_print drew eps for its dummy batch: start the eps afresh */
    tg_optim *opt = tg_adam(vae, (tg_adam_opts){.lr = args.lr});
    tg_loader *loader = tg_loader_new(
        train_x, NULL,
        (tg_loader_opts){.batch_size = args.batch_size, .shuffle = true, .seed = args.seed, .device = args.device});

    FILE *log = tut_log_open(args.log_path);
    tut_curve curve = {0};
    int64_t step = 0;
    double epoch_seconds = 0, test = 0;
    char device_text[16];
    printf("training on %s: %d epoch(s), batch %lld, Adam lr %g\n", tg_device_str(args.device, device_text),
           args.epochs, (long long)args.batch_size, args.lr);
    for (int epoch = 0; epoch < args.epochs && !(args.max_steps && step >= args.max_steps); epoch++) {
        tut_progress bar;
        tut_progress_begin(&bar, epoch, args.epochs, tg_loader_num_batches(loader), args.batch_size);
        double start = tut_now(), loss_sum = 0;
        int64_t images = 0;
        tg_tensor *x, *unused;
        TG_FOR_EACH_BATCH(loader, x, unused) {
            if (args.max_steps && step >= args.max_steps) break;
            tg_tensor *mu, *logvar;
            tg_tensor *recon = vae_run(vae, x, &mu, &logvar);
            tg_tensor *loss = vae_loss(recon, x, mu, logvar); /* summed over the batch */
            tg_optim_zero_grad(opt);
            tg_backward(loss);
            tg_optim_step(opt);
            double value = tg_item(loss);
            int64_t b = tg_size(x, 0);
            loss_sum += value;
            images += b;
            tut_progress_update(&bar, value / (double)b); /* per image, as the example logs it */
            tut_curve_add(&curve, value / (double)b);
            step++;
        }
        epoch_seconds = tut_now() - start;
        tut_progress_end(&bar);
        /* the example divides by the whole data set; with --max-steps, by the images seen */
        double train_loss = loss_sum / (double)(images ? images : 1);
        test = test_loss(vae, test_x, args.batch_size, args.device);
        printf("epoch %d: train loss %.4f, test loss %.4f, %.1f s\n", epoch + 1, train_loss, test, epoch_seconds);
        tut_log_row(log, epoch + 1, step, train_loss, test, 0, tg_optim_get_lr(opt), epoch_seconds);
    }
    tut_log_close(log);
    if (args.plot_path &&
        tut_plot_svg(args.plot_path, "07_vae: training loss per image", &curve, tg_loader_num_batches(loader), 50) == 0)
        printf("loss curve: %s\n", tut_output_path(args.plot_path));
    if (args.result_line) tut_print_result("vae_epoch", epoch_seconds, test); /* "check": the test loss */
    /* --export-onnx: what tg_forward gives, x [B, 784] -> the reconstruction [B, 784] */
    int exported = tut_export_onnx(vae, TG_SHAPE(1, 784), TG_FLOAT32, &args, NULL);

    tg_loader_free(loader);
    tg_optim_free(opt);
    tg_module_free(vae);
    tg_release(train_x);
    tg_release(test_x);
    tut_curve_free(&curve);
    printf("live tensors at exit: %ld\n", tg_live_tensors());
    return exported;
}
