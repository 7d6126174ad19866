/* Lesson 13: a ResNet on 32 x 32 images, with augmentation, workers and a schedule.
 *
 * ResNet-20 (He et al. 2016, section 4.2; resnet.c) or ResNet-18 (--model resnet18)
 * trained as the CIFAR recipes do: per-sample random crop (padding 4) + horizontal
 * flip + normalisation in the loader's worker threads (data.c), SGD with Nesterov
 * momentum 0.9 and weight decay 5e-4, batch 128, a OneCycle (default) or cosine
 * learning-rate schedule stepped every batch, optional label smoothing and autocast,
 * test accuracy after every epoch, and a checkpoint to resume from. README.md walks
 * through it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tapegrad.h"
#include "tutorials/13_resnet/data.h"
#include "tutorials/13_resnet/resnet.h"
#include "tutorials/13_resnet/sample_grid.h"
#include "tutorials/common/common.h"

/* The lesson's own options, as strings from the command line. */
typedef struct {
    const char *model, *workers, *label_smoothing, *schedule, *weight_decay, *checkpoint, *resume, *save_grid;
} lesson_options;

/* One optimizer step on (x, y); returns the loss. Under --amp the forward and the
 * loss run under autocast (convolutions and linears in bf16/fp16, batch norm and the
 * loss in float32); the scaler scales the loss for fp16 and passes it through otherwise. */
static double train_step(tg_module *model, tg_optim *opt, tg_grad_scaler *scaler, const tut_args *args,
                         double label_smoothing, tg_tensor *x, tg_tensor *y) {
    double value = 0;
    TG_SCOPE {
        tg_tensor *loss = NULL;
        TG_AUTOCAST_IF(args->device.kind, args->amp_dtype, args->amp) {
            loss = tg_cross_entropy_opts(tg_forward(model, x), y, (tg_loss_opts){.label_smoothing = label_smoothing});
        }
        tut_step_memory_forward_end();
        tg_backward(tg_grad_scaler_scale(scaler, loss));
        tg_grad_scaler_step(scaler, opt, NULL); /* skipped if an fp16 gradient overflowed */
        tg_grad_scaler_update(scaler);
        tg_optim_zero_grad(opt);
        value = tg_item(loss);
    }
    return value;
}

/* The test set's accuracy. tut_evaluate's loader draws a number from the default
 * generator (as every DataLoader pass does); putting the generator back afterwards
 * keeps the training's random numbers (augmentation with --workers 0) those of a run
 * that never evaluated, so a run resumed from any step continues exactly. */
static tut_eval evaluate(tg_module *model, const image_data *data, tg_device device) {
    tut_eval result;
    TG_SCOPE {
        tg_tensor *rng = tg_get_rng_state();
        result = tut_evaluate(model, data->test_x, data->test_y, 500, device);
        tg_set_rng_state(rng);
    }
    return result;
}

int main(int argc, char **argv) {
    lesson_options o = {
        .model = "resnet20", .workers = "2", .label_smoothing = "0", .schedule = "onecycle", .weight_decay = "5e-4"};
    tut_option extra[] = {
        {.name = "--model", .metavar = "NAME", .value = &o.model, .help = "resnet20 (default) or resnet18"},
        {.name = "--workers",
         .metavar = "N",
         .value = &o.workers,
         .help = "loader worker threads making augmented batches ahead (default 2; 0: on the training thread)"},
        {.name = "--label-smoothing",
         .metavar = "X",
         .value = &o.label_smoothing,
         .help = "cross entropy's label_smoothing (default 0)"},
        {.name = "--schedule",
         .metavar = "NAME",
         .value = &o.schedule,
         .help = "onecycle (default: OneCycleLR, max lr --lr) or cosine (CosineAnnealingLR from --lr), per batch"},
        {.name = "--weight-decay", .metavar = "X", .value = &o.weight_decay, .help = "SGD weight decay (default 5e-4)"},
        {.name = "--checkpoint",
         .metavar = "FILE",
         .value = &o.checkpoint,
         .help = "write model, optimizer, schedule and RNG after every epoch and at the end"},
        {.name = "--resume", .metavar = "FILE", .value = &o.resume, .help = "continue the run saved in FILE"},
        {.name = "--save-grid",
         .metavar = "FILE",
         .value = &o.save_grid,
         .help = "write a PNG of 8 training images and 7 augmentations of each"},
    };
    tut_args args = {.options = TUT_OPT_TRAINING | TUT_OPT_LOG | TUT_OPT_PLOT | TUT_OPT_RESULT_LINE |
                                TUT_OPT_SAVE_INIT | TUT_OPT_AMP,
                     .device_name = "auto",
                     .epochs = 10,
                     .batch_size = 128,
                     .lr = 0.2,
                     .seed = 1};
    tut_parse_args(argc, argv, "Lesson 13: ResNet-20 (or ResNet-18) on 32 x 32 images with augmentation.", &args, extra,
                   (int)(sizeof extra / sizeof extra[0]));
    bool resnet18 = !strcmp(o.model, "resnet18"), cosine = !strcmp(o.schedule, "cosine");
    int workers = atoi(o.workers);
    double label_smoothing = atof(o.label_smoothing), weight_decay = atof(o.weight_decay);
    if ((!resnet18 && strcmp(o.model, "resnet20")) || (!cosine && strcmp(o.schedule, "onecycle")) || workers < 0) {
        fprintf(stderr, "bad --model (resnet20, resnet18), --schedule (onecycle, cosine) or --workers\n");
        return 2;
    }

    image_data data = image_data_load(&args);
    printf("data: %s, %lld training and %lld test images of %d x 32 x 32\n", data.name,
           (long long)tg_size(data.train_x, 0), (long long)tg_size(data.test_x, 0), data.channels);
    if (o.save_grid) {
        tg_compose flips_and_crops = image_data_augmentation(&data, false);
        if (save_augmentation_grid(tut_output_path(o.save_grid), data.train_x, &flips_and_crops, 8, 8, args.seed) == 0)
            printf("augmented samples: %s\n", tut_output_path(o.save_grid));
    }

    tg_manual_seed(args.seed);
    tg_module *model = resnet18 ? resnet18_cifar(data.channels, 10) : resnet20(data.channels, 10);
    tut_save_init(model, &args);
    tg_module_print(model, TG_SHAPE(args.batch_size, data.channels, 32, 32), stdout);
    tg_to(model, args.device);

    /* Batches are augmented per sample by the loader (in its workers when --workers > 0). */
    tg_loader *loader = tg_loader_new(data.train_x, data.train_y,
                                      (tg_loader_opts){.batch_size = args.batch_size,
                                                       .shuffle = true,
                                                       .seed = args.seed,
                                                       .device = args.device,
                                                       .transform = image_data_augmentation(&data, true),
                                                       .num_workers = workers});
    int64_t per_epoch = tg_loader_num_batches(loader);
    tg_optim *opt =
        tg_sgd(model, (tg_sgd_opts){.lr = args.lr, .momentum = 0.9, .nesterov = true, .weight_decay = weight_decay});
    /* Both schedules are stepped once per batch over the --epochs the run is planned for. */
    int total_steps = (int)(per_epoch * args.epochs);
    tg_lr_scheduler *schedule = cosine ? tg_cosine_annealing_lr(opt, total_steps, 0)
                                       : tg_one_cycle_lr(opt, (tg_one_cycle_opts){.max_lr = args.lr,
                                                                                  .total_steps = total_steps,
                                                                                  .pct_start = 0.25,
                                                                                  .no_cycle_momentum = true});
    tg_grad_scaler *scaler =
        tg_grad_scaler_new(opt, (tg_grad_scaler_opts){.disabled = !(args.amp && args.amp_dtype == TG_FLOAT16)});

    int64_t step = 0;
    if (o.resume) { /* model, optimizer (momentum buffers, lr), schedule, scaler, RNG, step */
        tg_checkpoint_info info;
        tg_load_checkpoint(tut_output_path(o.resume), model, opt, &info);
        step = info.step;
        tg_loader_reset(loader, step / per_epoch); /* that epoch's order ... */
        tg_loader_seek(loader, step % per_epoch);  /* ... from the next batch */
        printf("resumed at step %lld (epoch %lld, batch %lld) from %s\n", (long long)step,
               (long long)(step / per_epoch + 1), (long long)(step % per_epoch), tut_output_path(o.resume));
    }

    FILE *log = tut_log_open(args.log_path);
    tut_curve curve = {0};
    char device_text[16];
    printf("training on %s: %d epoch(s) of %lld steps, batch %lld, SGD nesterov momentum 0.9 weight decay %g, "
           "%s lr %g, label smoothing %g, %d loader worker(s)%s%s\n",
           tg_device_str(args.device, device_text), args.epochs, (long long)per_epoch, (long long)args.batch_size,
           weight_decay, cosine ? "CosineAnnealingLR from" : "OneCycleLR to", args.lr, label_smoothing, workers,
           args.amp ? ", autocast " : "", args.amp ? args.amp_name : "");
    double epoch_seconds = 0, accuracy = 0;
    for (int epoch = (int)(step / per_epoch); epoch < args.epochs && !(args.max_steps && step >= args.max_steps);
         epoch++) {
        tg_train(model, true);
        tut_progress bar;
        tut_progress_begin(&bar, epoch, args.epochs, per_epoch, args.batch_size);
        bar.step = bar.first_step = step - (int64_t)epoch * per_epoch; /* a resumed epoch starts there */
        double start = tut_now(), stepping = 0;
        tg_tensor *x, *y;
        TG_FOR_EACH_BATCH(loader, x, y) {
            if (args.max_steps && step >= args.max_steps) break;
            double step_start = tut_now();
            tut_step_memory_begin();
            double value = train_step(model, opt, scaler, &args, label_smoothing, x, y);
            tut_step_memory_end();
            tg_scheduler_step(schedule);
            stepping += tut_now() - step_start;
            tut_progress_update(&bar, value);
            tut_curve_add(&curve, value);
            step++;
        }
        epoch_seconds = tut_now() - start;
        tut_profile_section("the epoch's training steps", bar.loss_count, epoch_seconds);
        double train_loss = tut_progress_end(&bar);
        /* What is not the step's own work is the wait for the loader's next batch. */
        int64_t steps_done = bar.step - bar.first_step;
        printf("epoch %d: %.0f ms a step, %.1f%% of the epoch waiting for data\n", epoch + 1,
               1000 * stepping / (double)(steps_done ? steps_done : 1),
               100 * (epoch_seconds - stepping) / epoch_seconds);
        tut_eval test = evaluate(model, &data, args.device);
        accuracy = test.accuracy;
        double lr = tg_optim_get_lr(opt);
        printf("epoch %d: train loss %.4f, test loss %.4f, test accuracy %.2f%%, lr %.4g, %.1f s\n", epoch + 1,
               train_loss, test.loss, test.accuracy, lr, epoch_seconds);
        tut_log_row(log, epoch + 1, step, train_loss, test.loss, test.accuracy, lr, epoch_seconds);
        if (o.checkpoint) {
            tg_save_checkpoint(tut_output_path(o.checkpoint), model, opt,
                               (tg_checkpoint_info){.step = step, .epoch = step / per_epoch});
            printf("checkpoint: %s (step %lld)\n", tut_output_path(o.checkpoint), (long long)step);
        }
    }
    tut_log_close(log);
    if (args.plot_path && tut_plot_svg(args.plot_path, "13_resnet: training loss", &curve, per_epoch, 50) == 0)
        printf("loss curve: %s\n", tut_output_path(args.plot_path));
    if (args.result_line)
        tut_print_result(resnet18 ? (args.amp ? "resnet18_amp_epoch" : "resnet18_epoch")
                                  : (args.amp ? "resnet20_amp_epoch" : "resnet20_epoch"),
                         epoch_seconds, accuracy);
    /* --export-onnx: images [B, C, 32, 32] -> logits [B, 10], batch norm in eval mode */
    int exported = tut_export_onnx(model, TG_SHAPE(1, data.channels, 32, 32), TG_FLOAT32, &args, NULL);

    tut_curve_free(&curve);
    tg_scheduler_free(schedule);
    tg_grad_scaler_free(scaler);
    tg_optim_free(opt);
    tg_loader_free(loader);
    tg_module_free(model);
    image_data_free(&data);
    printf("live tensors at exit: %ld\n", tg_live_tensors());
    return exported;
}
