/* Data sets and the evaluation loop (see common.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tutorials/common/common.h"

/* Generated data: class k's images are a fixed random pattern P_k plus noise, so
 * a model learns it within a few steps; drawn from tapegrad's generator under the
 * program's seed (the generator is reseeded afterwards by the caller). */
static void make_synthetic(int64_t n, tg_tensor *patterns, tg_tensor **x, tg_tensor **y) {
    TG_SCOPE {
        tg_tensor *labels = tg_randint(0, 10, TG_SHAPE(n), (tg_opts){.dtype = TG_INT64});
        tg_tensor *noise = tg_randn(TG_SHAPE(n, 784), (tg_opts){0});
        tg_tensor *clean = tg_index_select(patterns, 0, labels); /* [n, 784] */
        *x = tg_retain(tg_add(clean, tg_mul_scalar(noise, 0.5)));
        *y = tg_retain(labels);
    }
}

tut_data tut_load_data(const tut_args *args, bool image_shape) {
    tut_data d = {0};
    if (args->synthetic) {
        tg_manual_seed(args->seed + 12345);
        TG_SCOPE {
            tg_tensor *patterns = tg_randn(TG_SHAPE(10, 784), (tg_opts){0});
            make_synthetic(1024, patterns, &d.train_x, &d.train_y);
            make_synthetic(512, patterns, &d.test_x, &d.test_y);
        }
        d.name = "generated data (--synthetic)";
    } else {
        double mean = TG_FASHION_MNIST_MEAN, std = TG_FASHION_MNIST_STD;
        bool fashion = !strcmp(args->data_dir, TG_FASHION_MNIST_DIR);
        /* One split at a time, bytes converted in one pass and released at once: the
         * peak memory is the float training set plus one byte copy. */
        TG_SCOPE {
            tg_mnist train = tg_mnist_load(args->data_dir, TG_MNIST_TRAIN);
            if (!fashion && train.images) {
                TG_SCOPE { tg_mnist_mean_std(tg_mnist_to_float(train.images), &mean, &std); }
            }
            d.train_x = tg_retain(tg_mnist_to_normalized(train.images, mean, std));
            d.train_y = tg_retain(train.labels);
        }
        TG_SCOPE {
            tg_mnist test = tg_mnist_load(args->data_dir, TG_MNIST_TEST);
            d.test_x = tg_retain(tg_mnist_to_normalized(test.images, mean, std));
            d.test_y = tg_retain(test.labels);
        }
        d.name = fashion ? "Fashion-MNIST" : args->data_dir;
        if (!fashion) printf("data: %s, mean %.4f, std %.4f (measured on the training images)\n", d.name, mean, std);
    }
    /* [N, 28, 28] or [N, 784] -> the shape the model wants. */
    TG_SCOPE {
        tg_tensor **xs[2] = {&d.train_x, &d.test_x};
        for (int i = 0; i < 2; i++) {
            int64_t n = tg_size(*xs[i], 0);
            tg_tensor *r =
                image_shape ? tg_reshape(*xs[i], TG_SHAPE(n, 1, 28, 28)) : tg_reshape(*xs[i], TG_SHAPE(n, 784));
            tg_release(*xs[i]);
            *xs[i] = tg_retain(r);
        }
    }
    return d;
}

void tut_data_free(tut_data *d) {
    tg_release(d->train_x);
    tg_release(d->train_y);
    tg_release(d->test_x);
    tg_release(d->test_y);
    *d = (tut_data){0};
}

tut_eval tut_evaluate(tg_module *model, tg_tensor *x, tg_tensor *y, int64_t batch_size, tg_device device) {
    bool was_training = tg_is_training(model);
    tg_eval(model);
    int64_t n = tg_size(x, 0), correct = 0;
    double loss_sum = 0;
    tg_loader *ld = tg_loader_new(x, y, (tg_loader_opts){.batch_size = batch_size, .device = device});
    tg_tensor *bx, *by;
    TG_NO_GRAD {
        TG_FOR_EACH_BATCH(ld, bx, by) {
            tg_tensor *logits = tg_forward(model, bx);
            tg_tensor *loss = tg_cross_entropy_opts(logits, by, (tg_loss_opts){.reduction = TG_REDUCTION_SUM});
            tg_tensor *hits = tg_sum(tg_eq(tg_argmax(logits, 1, false), by));
            loss_sum += tg_item(loss);
            correct += (int64_t)tg_item(hits);
        }
    }
    tg_loader_free(ld);
    tg_train(model, was_training);
    return (tut_eval){.accuracy = 100.0 * (double)correct / (double)n, .loss = loss_sum / (double)n};
}

void tut_append_file(unsigned char **text, int64_t *length, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot read %s (Debian's `fortunes` package; ./bazelw installs it)\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    *text = realloc(*text, (size_t)(*length + size));
    if (!*text || fread(*text + *length, 1, (size_t)size, f) != (size_t)size) exit(1);
    *length += size;
    fclose(f);
}
