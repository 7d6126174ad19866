/* Lesson 11: lesson 03's LeNet trained data-parallel on several ranks with DDP.
 *
 *     mpirun -np 2 bazel-bin/tutorials/11_ddp/11_ddp --epochs 1
 *
 * Every rank runs this same program on its own shard of the training set (the
 * loader's DistributedSampler), with batch --batch-size per rank; DDP averages the
 * gradients during backward, so 2 ranks of batch 32 train as one process of batch 64.
 * CPU tensors go through MPI, CUDA tensors (--device cuda: GPU = local rank) through
 * NCCL; the program does not change. README.md walks through it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/ddp.h"
#include "tapegrad.h"
#include "tutorials/common/common.h"

static tg_module *make_lenet(void) {
    tg_pool_opts pool2 = {.kernel_size = 2};
    return TG_NN_SEQUENTIAL(tg_nn_conv2d(1, 20, 5, (tg_conv_opts){0}), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                            tg_nn_conv2d(20, 50, 5, (tg_conv_opts){0}), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                            tg_nn_flatten(1, -1), tg_nn_linear(800, 500, (tg_linear_opts){0}), tg_nn_relu(),
                            tg_nn_linear(500, 10, (tg_linear_opts){0}));
}

/* The mean over ranks of a number each rank has (the epoch's training loss). */
static double mean_over_ranks(double value) {
    double mean = value;
    TG_SCOPE {
        tg_tensor *t = tg_from_data(&value, TG_SHAPE(1), (tg_opts){.dtype = TG_FLOAT64});
        if (tg_dist_all_reduce(t, TG_DIST_AVG) == TG_OK) mean = tg_item(t);
    }
    return mean;
}

int main(int argc, char **argv) {
    /* First: every rank joins the group (mpirun's environment says who is who). */
    tg_set_error_mode(TG_ERRORS_EXIT);
    tg_dist_init();
    int rank = tg_dist_rank(), world = tg_dist_world_size();
    bool chief = rank == 0; /* rank 0 prints, evaluates and saves */

    const char *momentum_text = "0.9", *checkpoint_path = NULL;
    tut_option extra[] = {
        {.name = "--momentum", .metavar = "X", .value = &momentum_text, .help = "SGD momentum (default 0.9)"},
        {.name = "--checkpoint",
         .metavar = "FILE",
         .value = &checkpoint_path,
         .help = "rank 0 saves model + optimizer there at the end; every rank loads it back"}};
    tut_args args = {
        .options = TUT_OPT_TRAINING | TUT_OPT_RESULT_LINE, .epochs = 1, .batch_size = 32, .lr = 0.01, .seed = 1};
    tut_parse_args(argc, argv, "Lesson 11: LeNet data-parallel over MPI ranks (DDP).", &args, extra, 2);
    /* One GPU per rank: the local rank picks it (mpirun numbers the ranks of a machine). */
    if (args.device.kind == TG_DEVICE_CUDA) args.device = tg_cuda(tg_dist_local_rank());

    tut_data data = tut_load_data(&args, true);
    if (chief)
        printf("data: %s, %lld training images; %d rank(s), batch %lld per rank (%lld per step)\n", data.name,
               (long long)tg_size(data.train_x, 0), world, (long long)args.batch_size,
               (long long)args.batch_size * world);

    tg_manual_seed(args.seed);
    tg_module *model = make_lenet();
    tg_to(model, args.device);
    /* Broadcasts rank 0's weights, then reduces gradients in buckets during backward. */
    tg_ddp *ddp = tg_ddp_new(model, (tg_ddp_opts){0});
    tg_optim *opt = tg_sgd(model, (tg_sgd_opts){.lr = args.lr, .momentum = atof(momentum_text)});

    /* This rank's shard: DistributedSampler(shuffle=True, seed), a new order each epoch. */
    tg_loader *loader = tg_loader_new(data.train_x, data.train_y,
                                      (tg_loader_opts){.batch_size = args.batch_size,
                                                       .shuffle = true,
                                                       .seed = args.seed,
                                                       .device = args.device,
                                                       .world_size = world,
                                                       .rank = rank});
    int64_t step = 0;
    double epoch_seconds = 0, accuracy = 0;
    for (int epoch = 0; epoch < args.epochs && !(args.max_steps && step >= args.max_steps); epoch++) {
        tut_progress bar;
        if (chief) /* images per second counted over all ranks */
            tut_progress_begin(&bar, epoch, args.epochs, tg_loader_num_batches(loader), args.batch_size * world);
        double start = tut_now(), loss_sum = 0;
        int64_t batches = 0;
        tg_tensor *x, *y;
        TG_FOR_EACH_BATCH(loader, x, y) {
            if (args.max_steps && step >= args.max_steps) break;
            tg_tensor *loss = tg_cross_entropy(tg_ddp_forward(ddp, x), y);
            tg_backward(loss); /* returns with the gradients averaged over the ranks */
            tg_optim_step(opt);
            tg_optim_zero_grad(opt);
            double value = tg_item(loss);
            if (chief) tut_progress_update(&bar, value);
            loss_sum += value;
            batches++;
            step++;
        }
        epoch_seconds = tut_now() - start;
        if (chief) tut_progress_end(&bar);
        double train_loss = mean_over_ranks(batches ? loss_sum / batches : 0);
        if (chief) {
            tut_eval test = tut_evaluate(model, data.test_x, data.test_y, 1000, args.device);
            accuracy = test.accuracy;
            printf("epoch %d: train loss %.4f (mean over ranks), test loss %.4f, test accuracy %.2f%%, %.2f s\n",
                   epoch + 1, train_loss, test.loss, test.accuracy, epoch_seconds);
        }
    }
    tg_ddp_stats stats = tg_ddp_get_stats(ddp);
    if (chief && stats.steps > 0)
        printf("all-reduce: %.1f MB per step, %.2f ms per step, of which %.2f ms waited after backward "
               "(%.0f%% hidden behind backward)\n",
               stats.bytes / stats.steps / 1e6, 1e3 * stats.comm_s / stats.steps, 1e3 * stats.wait_s / stats.steps,
               stats.comm_s > 0 ? 100.0 * (1 - stats.wait_s / stats.comm_s) : 0.0);

    if (checkpoint_path) {
        /* Rank 0 writes; the others wait for the file, then every rank loads it. */
        if (chief) tg_save_checkpoint(checkpoint_path, model, opt, (tg_checkpoint_info){.step = step});
        tg_dist_barrier();
        tg_checkpoint_info info;
        tg_load_checkpoint(checkpoint_path, model, opt, &info);
        if (chief)
            printf("checkpoint: %s saved by rank 0 at step %lld, loaded on %d rank(s)\n", checkpoint_path,
                   (long long)info.step, world);
    }
    if (chief && args.result_line) tut_print_result("ddp_epoch", epoch_seconds, accuracy);
    /* --export-onnx: rank 0 writes the model (every rank holds the same weights) */
    int exported = chief ? tut_export_onnx(model, TG_SHAPE(1, 1, 28, 28), TG_FLOAT32, &args, NULL) : 0;

    tg_loader_free(loader);
    tg_optim_free(opt);
    tg_ddp_free(ddp);
    tg_module_free(model);
    tut_data_free(&data);
    if (chief) printf("live tensors at exit: %ld\n", tg_live_tensors());
    tg_dist_finalize();
    return exported;
}
