/* libFuzzer target for the checkpoint loader (io/checkpoint.h): any file must load
 * into a model with a pruned layer and BatchNorm, its Adam optimizer and StepLR
 * scheduler (tg_load_checkpoint), or into a dynamically quantised int8 copy
 * (tg_load_state_dict), or fail with a message; never crash, never leak, and a
 * failed load must leave the model's state untouched (issue 35). The seeds are
 * checkpoints the same program wrote. Built by tests/fuzz/run.sh (the whole library). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tapegrad.h"

static tg_module *model, *quantised;
static tg_optim *opt;
static tg_lr_scheduler *sched;
static char path[64];

/* The model's parameters and buffers as bytes, to tell whether a load changed them. */
static size_t snapshot(tg_module *m, unsigned char **out) {
    tg_tensor_map *state = tg_module_state_map(m);
    uint8_t *bytes = NULL;
    size_t n = 0;
    TG_ASSERT(state && tg_safetensors_serialize(state, &bytes, &n) == TG_OK);
    tg_tensor_map_free(state);
    *out = bytes;
    return n;
}

static void set_up(void) {
    tg_set_error_mode(TG_ERRORS_SILENT); /* malformed inputs are expected: record, do not print */
    tg_manual_seed(0);
    model = TG_NN_SEQUENTIAL(tg_nn_linear(4, 3, (tg_linear_opts){0}), tg_nn_batch_norm1d(3, (tg_batch_norm_opts){0}),
                             tg_nn_relu(), tg_nn_linear(3, 2, (tg_linear_opts){0}));
    TG_ASSERT(tg_prune_l1_unstructured(tg_module_child(model, "0"), "weight", tg_prune_fraction(0.5)) == TG_OK);
    opt = tg_adam(model, (tg_adam_opts){.lr = 1e-2});
    sched = tg_step_lr(opt, 2, 0.5);
    quantised = tg_quantize_dynamic(TG_NN_SEQUENTIAL(tg_nn_linear(4, 3, (tg_linear_opts){0}), tg_nn_relu()),
                                    (tg_quantize_opts){0});
    TG_ASSERT(model && opt && sched && quantised);
    snprintf(path, sizeof path, "/tmp/tg_checkpoint_fuzz_%d.safetensors", (int)getpid());
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!model) set_up();
    FILE *f = fopen(path, "wb");
    TG_ASSERT(f && fwrite(data, 1, size, f) == size && fclose(f) == 0);
    long live = tg_live_tensors();
    unsigned char *before = NULL, *after = NULL;
    size_t n_before = snapshot(model, &before);
    tg_clear_error();
    tg_checkpoint_info info = {0};
    if (tg_load_checkpoint(path, model, opt, &info) != TG_OK) {
        TG_ASSERT(tg_last_error()[0]);
        /* The model part is checked before anything is copied (an optimizer state that
         * does not fit is reported after the model was restored, as documented; so is
         * the RNG state is checked before the model too). */
        if (!strstr(tg_last_error(), "optimizer")) {
            size_t n_after = snapshot(model, &after);
            if (n_after != n_before || memcmp(before, after, n_before) != 0)
                fprintf(stderr, "the model changed though the load failed with: %s\n", tg_last_error());
            TG_ASSERT(n_after == n_before && memcmp(before, after, n_before) == 0);
        }
    }
    free(before);
    free(after);
    tg_clear_error();
    if (tg_load_state_dict(quantised, path, false) != TG_OK) TG_ASSERT(tg_last_error()[0]);
    tg_clear_error();
    TG_ASSERT(tg_live_tensors() == live);
    remove(path);
    return 0;
}

/* Seeds: `checkpoint_fuzzer -seed_only DIR` writes a checkpoint and a quantised state
 * dict into DIR (run.sh keeps them in tests/fuzz/corpus/checkpoint_fuzzer). */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    for (int i = 1; i + 1 < *argc; i++)
        if (strcmp((*argv)[i], "-seed_only") == 0) {
            set_up();
            char file[512];
            snprintf(file, sizeof file, "%s/checkpoint.safetensors", (*argv)[i + 1]);
            TG_ASSERT(tg_save_checkpoint(file, model, opt, (tg_checkpoint_info){3, 1}) == TG_OK);
            snprintf(file, sizeof file, "%s/quantised.safetensors", (*argv)[i + 1]);
            TG_ASSERT(tg_save_state_dict(quantised, file) == TG_OK);
            exit(0);
        }
    return 0;
}
