/* Lesson 08: a DCGAN on Fashion-MNIST (pytorch/examples' dcgan, sized for 28 x 28).
 *
 * Generator: z [B, 100, 1, 1] -> ConvTranspose2d(100, 128, 7) -> [128, 7, 7]
 * -> ConvTranspose2d(128, 64, 4, 2, 1) -> [64, 14, 14] -> ConvTranspose2d(64, 1, 4, 2, 1)
 * -> tanh [1, 28, 28], BatchNorm + ReLU between. Discriminator: Conv2d(1, 64, 4, 2, 1)
 * -> LeakyReLU(0.2) -> Conv2d(64, 128, 4, 2, 1) -> BatchNorm -> LeakyReLU(0.2)
 * -> Conv2d(128, 1, 7) -> sigmoid. No biases, weights N(0, 0.02), BatchNorm weights
 * N(1, 0.02) (the example's weights_init); BCE losses; Adam lr 2e-4, betas 0.5/0.999.
 * Writes a grid of 64 generated images as a PNG (libpng). README.md walks through
 * this file. */
#include <png.h>
#include <stdio.h>
#include <stdlib.h>

#include "tapegrad.h"
#include "tutorials/common/common.h"

enum { NZ = 100, NGF = 64, NDF = 64, GRID = 8 };

static tg_module *make_generator(void) {
    return TG_NN_SEQUENTIAL(
        tg_nn_conv_transpose2d(NZ, NGF * 2, 7, (tg_conv_transpose_opts){.no_bias = true}), /* [B, 128, 7, 7] */
        tg_nn_batch_norm2d(NGF * 2, (tg_batch_norm_opts){0}), tg_nn_relu(),
        tg_nn_conv_transpose2d(NGF * 2, NGF, 4, (tg_conv_transpose_opts){.stride = 2, .padding = 1, .no_bias = true}),
        tg_nn_batch_norm2d(NGF, (tg_batch_norm_opts){0}), tg_nn_relu(), /* [B, 64, 14, 14] */
        tg_nn_conv_transpose2d(NGF, 1, 4, (tg_conv_transpose_opts){.stride = 2, .padding = 1, .no_bias = true}),
        tg_nn_tanh()); /* [B, 1, 28, 28] */
}

static tg_module *make_discriminator(void) {
    return TG_NN_SEQUENTIAL(
        tg_nn_conv2d(1, NDF, 4, (tg_conv_opts){.stride = 2, .padding = 1, .no_bias = true}), /* [B, 64, 14, 14] */
        tg_nn_leaky_relu(0.2),
        tg_nn_conv2d(NDF, NDF * 2, 4, (tg_conv_opts){.stride = 2, .padding = 1, .no_bias = true}), /* [B, 128, 7, 7] */
        tg_nn_batch_norm2d(NDF * 2, (tg_batch_norm_opts){0}), tg_nn_leaky_relu(0.2),
        tg_nn_conv2d(NDF * 2, 1, 7, (tg_conv_opts){.no_bias = true}), /* [B, 1, 1, 1] */
        tg_nn_sigmoid());
}

/* The example's weights_init, applied layer by layer in order (as Module.apply):
 * convolution weights N(0, 0.02); BatchNorm weight N(1, 0.02), bias 0. A BatchNorm
 * is the layer with a running_mean buffer. */
static void weights_init(tg_module *net) {
    for (int i = 0;; i++) {
        tg_module *layer = tg_module_child_at(net, i, NULL);
        if (!layer) break;
        tg_tensor *weight = tg_module_param(layer, "weight");
        if (!weight) continue; /* activations */
        TG_NO_GRAD {
            if (tg_module_buffer(layer, "running_mean")) {
                tg_normal_(weight, 1.0, 0.02);
                tg_fill_(tg_module_param(layer, "bias"), 0.0);
            } else {
                tg_normal_(weight, 0.0, 0.02);
            }
        }
    }
}

/* images [64, 1, 28, 28] in [-1, 1] -> an 8 x 8 grid PNG (2-pixel black borders, as
 * torchvision's save_image(normalize=True) lays them out), through libpng. */
static int write_grid_png(const char *path, tg_tensor *images) {
    enum { SIDE = 28, PAD = 2, CELL = SIDE + PAD, WIDTH = GRID * CELL + PAD };
    unsigned char *pixels = calloc(WIDTH * WIDTH, 1);
    TG_SCOPE {
        tg_tensor *cpu = tg_contiguous(tg_tensor_to(images, TG_CPU));
        const float *v = tg_data_ptr(cpu);
        for (int k = 0; k < GRID * GRID; k++)
            for (int y = 0; y < SIDE; y++)
                for (int x = 0; x < SIDE; x++) {
                    float value = (v[(k * SIDE + y) * SIDE + x] + 1.0f) * 0.5f; /* [-1, 1] -> [0, 1] */
                    value = value < 0 ? 0 : value > 1 ? 1 : value;
                    pixels[(PAD + (k / GRID) * CELL + y) * WIDTH + PAD + (k % GRID) * CELL + x] =
                        (unsigned char)(value * 255.0f + 0.5f);
                }
    }
    FILE *f = fopen(path, "wb");
    png_structp png = f ? png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL) : NULL;
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info || setjmp(png_jmpbuf(png))) {
        fprintf(stderr, "cannot write %s\n", path);
        if (png) png_destroy_write_struct(&png, info ? &info : NULL);
        if (f) fclose(f);
        free(pixels);
        return -1;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, WIDTH, WIDTH, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < WIDTH; y++) png_write_row(png, pixels + y * WIDTH);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    fclose(f);
    free(pixels);
    return 0;
}

/* binary_cross_entropy(output, label) with the label a constant 1 or 0, as the example. */
static tg_tensor *bce_against(tg_tensor *output, double label) {
    return tg_binary_cross_entropy(output, tg_full_like(output, label));
}

int main(int argc, char **argv) {
    const char *png_path = "dcgan_08.png";
    tut_option extra[] = {{.name = "--png",
                           .metavar = "FILE",
                           .value = &png_path,
                           .help = "where to write the grid of generated images (default dcgan_08.png)"}};
    tut_args args = {
        .options = TUT_OPT_TRAINING | TUT_OPT_RESULT_LINE, .epochs = 1, .batch_size = 128, .lr = 2e-4, .seed = 1};
    tut_parse_args(argc, argv, "Lesson 08: a DCGAN on Fashion-MNIST (pytorch/examples dcgan), a PNG of samples.", &args,
                   extra, 1);

    /* ---- data: pixels scaled to [-1, 1] (the generator ends in tanh) ---- */
    tg_tensor *train_x = NULL;
    if (args.synthetic) {
        tut_data d = tut_load_data(&args, true);
        TG_SCOPE { train_x = tg_retain(tg_tanh(d.train_x)); }
        tut_data_free(&d);
    } else {
        TG_SCOPE {
            tg_mnist m = tg_mnist_load(args.data_dir, TG_MNIST_TRAIN);
            tg_tensor *x = tg_mnist_to_normalized(m.images, 0.5, 0.5); /* (bytes / 255 - 0.5) / 0.5 */
            train_x = tg_retain(tg_reshape(x, TG_SHAPE(tg_size(x, 0), 1, 28, 28)));
        }
    }
    printf("data: %s, %lld training images in [-1, 1]\n", args.synthetic ? "generated (--synthetic)" : args.data_dir,
           (long long)tg_size(train_x, 0));

    /* ---- models, in the example's order: G, its init, D, its init, the fixed noise ---- */
    tg_manual_seed(args.seed);
    tg_module *netG = make_generator();
    weights_init(netG);
    tg_module *netD = make_discriminator();
    weights_init(netD);
    tg_tensor *fixed_noise = tg_randn(TG_SHAPE(GRID * GRID, NZ, 1, 1), (tg_opts){.device = TG_CPU});
    tg_to(netG, args.device);
    tg_to(netD, args.device);
    TG_SCOPE {
        tg_tensor *moved = tg_tensor_to(fixed_noise, args.device);
        tg_release(fixed_noise);
        fixed_noise = tg_retain(moved);
    }
    tg_optim *optD = tg_adam(netD, (tg_adam_opts){.lr = args.lr, .betas = {0.5, 0.999}});
    tg_optim *optG = tg_adam(netG, (tg_adam_opts){.lr = args.lr, .betas = {0.5, 0.999}});
    tg_loader *loader = tg_loader_new(
        train_x, NULL,
        (tg_loader_opts){.batch_size = args.batch_size, .shuffle = true, .seed = args.seed, .device = args.device});

    int64_t step = 0;
    double epoch_seconds = 0, loss_d = 0, loss_g = 0, d_x = 0, d_g_z1 = 0, d_g_z2 = 0;
    char device_text[16];
    printf("training on %s: %d epoch(s), batch %lld, Adam lr %g betas 0.5/0.999\n",
           tg_device_str(args.device, device_text), args.epochs, (long long)args.batch_size, args.lr);
    for (int epoch = 0; epoch < args.epochs && !(args.max_steps && step >= args.max_steps); epoch++) {
        double start = tut_now();
        int64_t batches = tg_loader_num_batches(loader), in_epoch = 0;
        tg_tensor *real, *unused;
        TG_FOR_EACH_BATCH(loader, real, unused) {
            if (args.max_steps && step >= args.max_steps) break;
            int64_t b = tg_size(real, 0);
            /* (1) D: maximise log D(x) + log(1 - D(G(z))) */
            tg_optim_zero_grad(optD);
            tg_tensor *out_real = tg_view(tg_forward(netD, real), TG_SHAPE(-1));
            tg_tensor *err_real = bce_against(out_real, 1.0);
            tg_backward(err_real);
            tg_tensor *noise = tg_randn(TG_SHAPE(b, NZ, 1, 1), (tg_opts){.device = args.device});
            tg_tensor *fake = tg_forward(netG, noise);
            tg_tensor *out_fake = tg_view(tg_forward(netD, tg_detach(fake)), TG_SHAPE(-1));
            tg_tensor *err_fake = bce_against(out_fake, 0.0);
            tg_backward(err_fake);
            tg_optim_step(optD);
            /* (2) G: maximise log D(G(z)) (the labels flipped to real) */
            tg_optim_zero_grad(optG);
            tg_tensor *out_g = tg_view(tg_forward(netD, fake), TG_SHAPE(-1));
            tg_tensor *err_g = bce_against(out_g, 1.0);
            tg_backward(err_g);
            tg_optim_step(optG);

            loss_d = tg_item(err_real) + tg_item(err_fake);
            loss_g = tg_item(err_g);
            d_x = tg_item(tg_mean(out_real));
            d_g_z1 = tg_item(tg_mean(out_fake));
            d_g_z2 = tg_item(tg_mean(out_g));
            if (in_epoch % 50 == 0 || in_epoch == batches - 1 || (args.max_steps && step == args.max_steps - 1))
                printf("[%d/%d][%lld/%lld] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f\n", epoch + 1,
                       args.epochs, (long long)in_epoch, (long long)batches, loss_d, loss_g, d_x, d_g_z1, d_g_z2);
            in_epoch++;
            step++;
        }
        epoch_seconds = tut_now() - start;
        printf("epoch %d: Loss_D %.4f, Loss_G %.4f, %lld steps, %.1f s\n", epoch + 1, loss_d, loss_g,
               (long long)in_epoch, epoch_seconds);
    }

    /* ---- samples from the fixed noise, in train mode as the example's (BatchNorm on
     * the batch's statistics), without grad ---- */
    TG_NO_GRAD {
        TG_SCOPE {
            if (write_grid_png(tut_output_path(png_path), tg_forward(netG, fixed_noise)) == 0)
                printf("samples: %s\n", tut_output_path(png_path));
        }
    }
    if (args.result_line) tut_print_result("dcgan_epoch", epoch_seconds, loss_g); /* "check": the last Loss_G */
    /* --export-onnx: the generator, noise [B, NZ, 1, 1] -> images [B, 1, 28, 28] (eval mode:
     * batch norm on its running statistics, as torch.onnx.export writes it) */
    int exported = tut_export_onnx(netG, TG_SHAPE(1, NZ, 1, 1), TG_FLOAT32, &args, NULL);

    tg_loader_free(loader);
    tg_optim_free(optD);
    tg_optim_free(optG);
    tg_module_free(netD);
    tg_module_free(netG);
    tg_release(fixed_noise);
    tg_release(train_x);
    printf("live tensors at exit: %ld\n", tg_live_tensors());
    return exported;
}
