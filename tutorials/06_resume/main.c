/* Lesson 06: interrupt a training run and resume it exactly.
 *
 * A checkpoint holds everything the next step depends on: the model's state dict,
 * the optimizer's state (Adam's moments and step counts), the random generator's
 * state (dropout draws from it) and the position in the data (step -> epoch and
 * batch; the loader's shuffle is a function of (seed, epoch) only). With all of it
 * restored, the resumed losses equal an uninterrupted run's bit for bit on the CPU.
 * README.md walks through this file. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tapegrad.h"
#include "tutorials/common/common.h"

/* Everything a run is made of. */
typedef struct {
    tg_module *model;
    tg_optim *opt;
    tg_loader *loader;
    tut_data *data;
    const tut_args *args;
    FILE *log;
} run;

static tg_module *make_model(void) {
    return TG_NN_SEQUENTIAL(tg_nn_linear(784, 256, (tg_linear_opts){0}), tg_nn_relu(),
                            tg_nn_dropout(0.2), /* dropout: uses the RNG */
                            tg_nn_linear(256, 10, (tg_linear_opts){0}));
}

static run run_new(const tut_args *args, tut_data *data, uint64_t init_seed) {
    run r = {.data = data, .args = args};
    tg_manual_seed(init_seed);
    r.model = make_model();
    tg_to(r.model, args->device);
    r.opt = tg_adam(r.model, (tg_adam_opts){.lr = args->lr});
    r.loader = tg_loader_new(
        data->train_x, data->train_y,
        (tg_loader_opts){.batch_size = args->batch_size, .shuffle = true, .seed = args->seed, .device = args->device});
    return r;
}

static void run_free(run *r) {
    tg_loader_free(r->loader);
    tg_optim_free(r->opt);
    tg_module_free(r->model);
}

/* ---- the checkpoint ---- */

static void save_checkpoint(run *r, int64_t step, const char *path) {
    tg_tensor_map *map = tg_tensor_map_new();
    int count;
    const tg_named_tensor *state = tg_state_dict(r->model, &count);
    for (int i = 0; i < count; i++) {
        char name[256];
        snprintf(name, sizeof name, "model.%s", state[i].name);
        tg_tensor_map_set(map, name, state[i].tensor);
    }
    for (int i = 0; i < tg_optim_state_count(r->opt); i++) { /* "state.0.step", "state.0.exp_avg", ... */
        const char *key;
        tg_tensor *t;
        tg_optim_state_get(r->opt, i, &key, &t);
        char name[256];
        snprintf(name, sizeof name, "optim.%s", key);
        tg_tensor_map_set(map, name, t);
    }
    TG_SCOPE { tg_tensor_map_set(map, "rng_state", tg_get_rng_state()); } /* torch.get_rng_state() */
    char text[64];
    snprintf(text, sizeof text, "%" PRId64, step);
    tg_tensor_map_set_metadata(map, "step", text);
    snprintf(text, sizeof text, "%" PRIu64, r->args->seed);
    tg_tensor_map_set_metadata(map, "data_seed", text);
    snprintf(text, sizeof text, "%" PRId64, r->args->batch_size);
    tg_tensor_map_set_metadata(map, "batch_size", text);
    snprintf(text, sizeof text, "%.17g", tg_optim_get_lr(r->opt));
    tg_tensor_map_set_metadata(map, "lr", text);
    tg_safetensors_save(map, path);
    tg_tensor_map_free(map);
}

static const char *need(const tg_tensor_map *map, const char *key, const char *path) {
    const char *v = tg_tensor_map_metadata(map, key);
    if (!v) {
        fprintf(stderr, "%s: not a 06_resume checkpoint (no \"%s\" in its metadata)\n", path, key);
        exit(1);
    }
    return v;
}

/* Restores r from path; returns the step to continue from. */
static int64_t load_checkpoint(run *r, const char *path) {
    tg_tensor_map *map = tg_safetensors_load(path);
    if (strtoll(need(map, "batch_size", path), NULL, 10) != r->args->batch_size ||
        strtoull(need(map, "data_seed", path), NULL, 10) != r->args->seed)
        printf("warning: --batch-size/--seed differ from the checkpoint's; the data order will not match\n");
    /* The model: copy every saved tensor into the model's own (any device). */
    tg_tensor_map *model_state = tg_tensor_map_select(map, "model.");
    int count;
    const tg_named_tensor *state = tg_state_dict(r->model, &count);
    for (int i = 0; i < count; i++) {
        tg_tensor *saved = tg_tensor_map_get(model_state, state[i].name);
        if (!saved) {
            fprintf(stderr, "%s: no tensor model.%s\n", path, state[i].name);
            exit(1);
        }
        TG_NO_GRAD { tg_copy_(state[i].tensor, saved); }
    }
    tg_tensor_map_free(model_state);
    /* The optimizer: its state entries by name (they are created on the way). */
    tg_tensor_map *optim_state = tg_tensor_map_select(map, "optim.");
    for (int64_t i = 0; i < tg_tensor_map_size(optim_state); i++)
        tg_optim_state_set(r->opt, tg_tensor_map_name(optim_state, i), tg_tensor_map_tensor(optim_state, i));
    tg_tensor_map_free(optim_state);
    tg_optim_set_lr(r->opt, strtod(need(map, "lr", path), NULL));
    /* The generator: dropout's next mask continues where it stopped. */
    tg_tensor *rng = tg_tensor_map_get(map, "rng_state");
    if (!rng || tg_set_rng_state(rng)) {
        fprintf(stderr, "%s: no usable \"rng_state\" tensor\n", path);
        exit(1);
    }
    int64_t step = strtoll(need(map, "step", path), NULL, 10);
    tg_tensor_map_free(map);
    return step;
}

/* ---- training from step `from` to step `to` (global step numbers) ----
 * Step s is batch s % B of epoch s / B (B batches per epoch). losses[s] gets step s's loss. */
static void train_steps(run *r, int64_t from, int64_t to, double *losses) {
    int64_t per_epoch = tg_loader_num_batches(r->loader);
    tut_progress bar;
    for (int64_t step = from; step < to; step++) {
        int64_t epoch = step / per_epoch, batch = step % per_epoch;
        if (step == from || batch == 0) {
            tg_loader_reset(r->loader, epoch); /* the same permutation as the first time */
            tg_loader_seek(r->loader, batch);  /* past the batches done before the checkpoint */
            tut_progress_begin(&bar, (int)epoch, r->args->epochs, per_epoch, r->args->batch_size);
            bar.step = bar.first_step = batch;
        }
        TG_SCOPE {
            tg_tensor *x, *y;
            tg_loader_next(r->loader, &x, &y);
            tg_tensor *loss = tg_cross_entropy(tg_forward(r->model, x), y);
            tg_backward(loss);
            tg_optim_step(r->opt);
            tg_optim_zero_grad(r->opt);
            losses[step] = tg_item(loss);
        }
        tut_progress_update(&bar, losses[step]);
        if (batch == per_epoch - 1 || step == to - 1) {
            double train_loss = tut_progress_end(&bar);
            if (batch == per_epoch - 1) { /* an epoch finished: evaluate (eval mode: no dropout, no RNG draws) */
                tut_eval test = tut_evaluate(r->model, r->data->test_x, r->data->test_y, 1000, r->args->device);
                printf("epoch %lld: train loss %.4f, test loss %.4f, test accuracy %.2f%%\n", (long long)epoch + 1,
                       train_loss, test.loss, test.accuracy);
                tut_log_row(r->log, (int)epoch + 1, step + 1, train_loss, test.loss, test.accuracy,
                            tg_optim_get_lr(r->opt), 0);
            }
        }
    }
}

int main(int argc, char **argv) {
    const char *checkpoint = "resume_06.safetensors", *stop_text = NULL, *resume = NULL;
    bool compare = false;
    tut_option extra[] = {
        {.name = "--stop-after",
         .metavar = "N",
         .value = &stop_text,
         .help = "save a checkpoint after step N and stop (with --compare: where to interrupt)"},
        {.name = "--checkpoint",
         .metavar = "FILE",
         .value = &checkpoint,
         .help = "checkpoint to write (default resume_06.safetensors)"},
        {.name = "--resume", .metavar = "FILE", .value = &resume, .help = "continue from a checkpoint"},
        {.name = "--compare",
         .flag = &compare,
         .help = "run straight through, then interrupted + resumed, and compare the losses"},
    };
    tut_args args = {.options = TUT_OPT_TRAINING | TUT_OPT_LOG, .epochs = 1, .batch_size = 64, .lr = 1e-3, .seed = 1};
    tut_parse_args(argc, argv, "Lesson 06: checkpoint a run (model, optimizer, RNG, position) and resume it exactly.",
                   &args, extra, 4);
    tut_data data = tut_load_data(&args, false);
    int64_t per_epoch = (tg_size(data.train_x, 0) + args.batch_size - 1) / args.batch_size;
    int64_t total = per_epoch * args.epochs;
    if (args.max_steps && args.max_steps < total) total = args.max_steps;
    int64_t stop = stop_text ? atoll(stop_text) : compare ? total / 2 : total;
    if (stop < 1 || stop > total) {
        fprintf(stderr, "--stop-after must be between 1 and %lld\n", (long long)total);
        return 2;
    }
    const char *path = tut_output_path(checkpoint);
    double *losses = calloc((size_t)total, sizeof *losses);
    int status = 0;

    if (compare) {
        /* A: straight through. */
        printf("== run A: steps 0..%lld without a break ==\n", (long long)total);
        double *straight = calloc((size_t)total, sizeof *straight);
        run a = run_new(&args, &data, args.seed);
        train_steps(&a, 0, total, straight);
        run_free(&a);
        /* B: stop after `stop` steps, checkpoint, throw everything away, rebuild, resume. */
        printf("== run B: steps 0..%lld, checkpoint, then a new model resumes ==\n", (long long)stop);
        run b = run_new(&args, &data, args.seed);
        train_steps(&b, 0, stop, losses);
        save_checkpoint(&b, stop, path);
        run_free(&b);
        tg_manual_seed(999);                          /* scramble the generator: the checkpoint must restore it */
        run c = run_new(&args, &data, args.seed + 1); /* other initial weights: the checkpoint must replace them */
        int64_t from = load_checkpoint(&c, path);
        printf("resumed at step %lld from %s\n", (long long)from, path);
        train_steps(&c, from, total, losses);
        status |= tut_export_onnx(c.model, TG_SHAPE(1, 784), TG_FLOAT32, &args, NULL); /* --export-onnx */
        run_free(&c);
        printf("\n step   run A (straight)   run B (resumed at %lld)\n", (long long)stop);
        int64_t differ = 0;
        for (int64_t s = 0; s < total; s++) {
            bool same = memcmp(&straight[s], &losses[s], sizeof(double)) == 0;
            differ += !same;
            if (s < 3 || (s >= stop - 2 && s < stop + 3) || s >= total - 2 || !same)
                printf("%5lld   %.17g   %.17g%s%s\n", (long long)s + 1, straight[s], losses[s],
                       s == stop ? "   <- resumed" : "", same ? "" : "   DIFFERENT");
            else if (s == 3 || s == stop + 3) printf("  ...\n");
        }
        printf("identical: %s (%lld of %lld losses differ)\n", differ ? "no" : "yes", (long long)differ,
               (long long)total);
        status |= differ != 0;
        free(straight);
    } else {
        run r = run_new(&args, &data, args.seed);
        r.log = tut_log_open(args.log_path);
        int64_t from = 0;
        if (resume) {
            from = load_checkpoint(&r, tut_output_path(resume));
            printf("resumed at step %lld from %s\n", (long long)from, tut_output_path(resume));
        }
        if (from < stop) train_steps(&r, from, stop, losses);
        for (int64_t s = from; s < stop; s++) /* the first and last two (compare them with --compare's) */
            if (s < from + 2 || s >= stop - 2) printf("step %lld loss %.17g\n", (long long)s + 1, losses[s]);
        save_checkpoint(&r, stop, path);
        if (stop < total)
            printf("stopped after step %lld; checkpoint %s (resume with --resume %s)\n", (long long)stop, path,
                   checkpoint);
        else printf("finished at step %lld; checkpoint %s\n", (long long)stop, path);
        tut_log_close(r.log);
        status = tut_export_onnx(r.model, TG_SHAPE(1, 784), TG_FLOAT32, &args, NULL); /* --export-onnx */
        run_free(&r);
    }
    free(losses);
    tut_data_free(&data);
    printf("live tensors at exit: %ld\n", tg_live_tensors());
    return status;
}
