/* The ResNet-20 training step of tutorials/13_resnet at batch 128 on CIFAR-shaped data:
 * x [128, 3, 32, 32] ~ N(0, 1), 10 classes, forward + cross entropy + backward + SGD
 * (lr 0.1, Nesterov momentum 0.9, weight decay 5e-4) ("resnet20_train_step"; ms, the
 * median of REPS steps after WARMUP). The same seed gives the twin (bench/resnet_torch.py)
 * the same weights and data, so "check", the first step's loss, agrees with it. */
#include "bench/bench_util.h"
#include "tapegrad.h"
#include "tutorials/13_resnet/resnet.h"

enum { BATCH = 128, WARMUP = 2, REPS = 10 };

int main(void) {
    tg_manual_seed(0);
    tg_module *model = resnet20(3, 10);
    tg_tensor *x = tg_randn(TG_SHAPE(BATCH, 3, 32, 32), (tg_opts){0});
    tg_tensor *y = tg_randint(0, 10, TG_SHAPE(BATCH), (tg_opts){.dtype = TG_INT64});
    tg_optim *opt = tg_sgd(model, (tg_sgd_opts){.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 5e-4});
    double times[REPS], first_loss = 0;
    for (int r = 0; r < WARMUP + REPS; r++) {
        double start = bench_now();
        TG_SCOPE {
            tg_tensor *loss = tg_cross_entropy(tg_forward(model, x), y);
            tg_backward(loss);
            tg_optim_step(opt);
            tg_optim_zero_grad(opt);
            double value = tg_item(loss);
            if (r == 0) first_loss = value;
        }
        if (r >= WARMUP) times[r - WARMUP] = bench_now() - start;
    }
    double median = bench_median(times, REPS);
    printf(
        "RESULT {\"bench\": \"resnet20_train_step\", \"impl\": \"tapegrad\", \"seconds\": %.6g, \"unit_value\": %.4g, "
        "\"unit\": \"ms\", \"check\": %.3f, \"peak_rss_mib\": %.1f}\n",
        median, median * 1e3, first_loss, bench_peak_rss_mib());
    tg_optim_free(opt);
    tg_module_free(model);
    tg_release(x);
    tg_release(y);
    return 0;
}
