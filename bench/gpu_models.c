/* The training steps of the models past MNIST on the GPU (issues 32 and 33; twin:
 * bench/gpu_models_torch.py), run by tools/gpu_check.sh models:
 *   resnet20_step_128   lesson 13's ResNet-20, batch 128 of 3x32x32, SGD lr 0.1 Nesterov
 *                       momentum 0.9 weight decay 5e-4                           ms/step
 *   resnet18_step_256   ResNet-18 with the 3x3 stem (lesson 13's --model resnet18),
 *                       batch 256, the same SGD                                  ms/step
 *   gpt2_step_8x1024    lesson 10's GPT at GPT-2 small's shape: 12 layers, 12 heads,
 *                       768 wide, context 1024, batch 8, vocabulary 50304 (GPT-2's 50257
 *                       padded as nanoGPT does); AdamW lr 6e-4 betas (0.9, 0.95), weight
 *                       decay 0.1 on the matrices, clipping at 1.0           ms/step, tokens/s, MFU
 * each in float32 and with forward and loss under autocast bf16 ("_amp_bf16"). Each
 * figure is the median of REPS steps after WARMUP, with tg_cuda_synchronize() around
 * every step; cuda_mallocs_timed counts the allocator's cudaMalloc calls in the timed
 * steps (0 when the cache serves them). MFU is nanoGPT's estimate (6 N + 12 L T C flops a
 * token, N without the position embedding) against the GPU's dense bf16 peak given by
 * --peak-tflops (tools/gpu_check.sh passes 989.4 for an H100 / H200 SXM), for the
 * float32 run too, as nanoGPT and llm.c report it.
 *
 *   gpu_models [--device cpu] [--smoke] [--peak-tflops X] [--only resnet20|resnet18|gpt2]
 * --smoke runs each step WARMUP + 1 times at toy sizes (batch 4, GPT 2 x 2 x 64, context
 * 64, vocabulary 96): a check of the program itself, on a machine without a GPU too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "tapegrad.h"
#include "tutorials/10_gpt/gpt.h"
#include "tutorials/13_resnet/resnet.h"

enum { WARMUP = 3, REPS = 10 };

typedef struct {
    tg_device device;
    bool smoke;
    const char *only; /* resnet20, resnet18 or gpt2 (--only); NULL: all three */
    double peak;      /* the GPU's dense bf16 flop/s for MFU (--peak-tflops; 0: not reported) */
} run_opts;

typedef struct {
    const char *name; /* the RESULT line's bench, before "_amp_bf16" */
    tg_module *model;
    tg_optim *opt;
    tg_tensor *x, *y;
    bool gpt;              /* loss over [B * T, vocab] logits and clipping, else over [B, classes] */
    double flops_per_step; /* nanoGPT's model flops (GPT only) */
    int64_t tokens;        /* per step (GPT only) */
} workload;

static void sync_device(tg_device d) {
    if (d.kind == TG_DEVICE_CUDA) tg_cuda_synchronize();
}

static int64_t cuda_mallocs(tg_device d) { return d.kind == TG_DEVICE_CUDA ? tg_cuda_memory_stats(0).num_mallocs : 0; }

static tg_tensor *step_loss(const workload *w, bool amp, tg_device d) {
    tg_tensor *loss = NULL;
    TG_AUTOCAST_IF(d.kind, TG_BFLOAT16, amp) {
        tg_tensor *out = tg_forward(w->model, w->x);
        if (w->gpt) out = tg_reshape(out, TG_SHAPE(-1, tg_size(out, 2)));
        loss = tg_cross_entropy(out, w->gpt ? tg_reshape(w->y, TG_SHAPE(-1)) : w->y);
    }
    return loss;
}

static void run_workload(workload *w, bool amp, const run_opts *o) {
    char name[64];
    snprintf(name, sizeof name, "%s%s", w->name, amp ? "_amp_bf16" : "");
    int reps = o->smoke ? 1 : REPS;
    double times[REPS], loss = 0;
    int64_t mallocs_warm = 0;
    for (int r = 0; r < WARMUP + reps; r++) {
        sync_device(o->device);
        if (r == WARMUP) mallocs_warm = cuda_mallocs(o->device);
        double start = bench_now();
        TG_SCOPE {
            tg_tensor *l = step_loss(w, amp, o->device);
            tg_backward(l);
            if (w->gpt) tg_clip_grad_norm(w->model, 1.0, 2.0);
            tg_optim_step(w->opt);
            tg_optim_zero_grad(w->opt);
            sync_device(o->device);
            if (r == WARMUP + reps - 1) loss = tg_item(l);
        }
        if (r >= WARMUP) times[r - WARMUP] = bench_now() - start;
    }
    if (tg_has_error()) {
        printf("FAILED %s: %s\n", name, tg_last_error());
        tg_clear_error();
        return;
    }
    double median = bench_median(times, reps);
    printf("RESULT {\"bench\": \"%s\", \"impl\": \"tapegrad\", \"seconds\": %.6g, \"unit_value\": %.4g, "
           "\"unit\": \"ms/step\", \"loss\": %.4f, \"cuda_mallocs_timed\": %ld",
           name, median, median * 1e3, loss, (long)(cuda_mallocs(o->device) - mallocs_warm));
    if (w->gpt) {
        printf(", \"tokens_per_s\": %.0f", (double)w->tokens / median);
        if (o->peak > 0) printf(", \"mfu\": %.3f", w->flops_per_step / median / o->peak);
    }
    printf(", \"peak_rss_mib\": %.1f}\n", bench_peak_rss_mib());
    fflush(stdout);
}

static void free_workload(workload *w) {
    tg_optim_free(w->opt);
    tg_module_free(w->model);
    tg_release(w->x);
    tg_release(w->y);
}

/* Lesson 13's models on N(0, 1) images and uniform labels; both runs from the same seed. */
static void bench_resnet(const char *name, bool resnet18, int batch, const run_opts *o) {
    for (int amp = 0; amp < 2; amp++) {
        tg_manual_seed(0);
        workload w = {.name = name, .model = resnet18 ? resnet18_cifar(3, 10) : resnet20(3, 10)};
        tg_opts on = {.device = o->device};
        if (!w.model || tg_module_to(w.model, o->device)) {
            printf("SKIPPED %s: %s\n", name, tg_last_error());
            tg_module_free(w.model);
            return;
        }
        w.x = tg_randn(TG_SHAPE(batch, 3, 32, 32), on);
        w.y = tg_randint(0, 10, TG_SHAPE(batch), (tg_opts){.dtype = TG_INT64, .device = o->device});
        w.opt = tg_sgd(w.model, (tg_sgd_opts){.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 5e-4});
        run_workload(&w, amp, o);
        free_workload(&w);
    }
}

/* Lesson 10's GPT on uniform token ids (the loss starts at log(vocab)). */
static void bench_gpt(const run_opts *o) {
    gpt_config c = {.vocab = 50304, .n_layer = 12, .n_head = 12, .n_embd = 768, .block_size = 1024};
    int batch = 8;
    if (o->smoke) c = (gpt_config){.vocab = 96, .n_layer = 2, .n_head = 2, .n_embd = 64, .block_size = 64}, batch = 4;
    char name[48];
    snprintf(name, sizeof name, "gpt2_step_%dx%d", batch, c.block_size);
    for (int amp = 0; amp < 2; amp++) {
        tg_manual_seed(0);
        workload w = {.name = name, .model = gpt_new(c), .gpt = true, .tokens = (int64_t)batch * c.block_size};
        if (!w.model || tg_module_to(w.model, o->device)) {
            printf("SKIPPED %s: %s\n", name, tg_last_error());
            tg_module_free(w.model);
            return;
        }
        double n_params = (double)tg_module_num_params(w.model) - (double)c.block_size * c.n_embd; /* less wpe */
        double per_token = 6 * n_params + 12.0 * c.n_layer * c.block_size * c.n_embd;
        w.flops_per_step = per_token * (double)w.tokens;
        tg_opts ids = {.dtype = TG_INT64, .device = o->device};
        w.x = tg_randint(0, c.vocab, TG_SHAPE(batch, c.block_size), ids);
        w.y = tg_randint(0, c.vocab, TG_SHAPE(batch, c.block_size), ids);
        w.opt = tg_adamw_decay_groups(w.model, (tg_adamw_opts){.lr = 6e-4, .betas = {0.9, 0.95}, .weight_decay = 0.1});
        run_workload(&w, amp, o);
        free_workload(&w);
    }
}

int main(int argc, char **argv) {
    run_opts o = {.device = tg_cuda(0)};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--smoke")) o.smoke = true;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc && !strcmp(argv[i + 1], "cpu")) o.device = TG_CPU, i++;
        else if (!strcmp(argv[i], "--peak-tflops") && i + 1 < argc) o.peak = atof(argv[++i]) * 1e12;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) o.only = argv[++i];
        else {
            fprintf(stderr,
                    "usage: gpu_models [--device cpu] [--smoke] [--peak-tflops X] [--only resnet20|resnet18|gpt2]\n");
            return 2;
        }
    }
    if (o.device.kind == TG_DEVICE_CUDA && !tg_cuda_available()) {
        printf("SKIPPED gpu_models: no CUDA device (%s)\n", tg_build_info());
        return 0;
    }
    printf("# %s\n", tg_build_info());
    if (!o.only || !strcmp(o.only, "resnet20"))
        bench_resnet(o.smoke ? "resnet20_step_4" : "resnet20_step_128", false, o.smoke ? 4 : 128, &o);
    if (!o.only || !strcmp(o.only, "resnet18"))
        bench_resnet(o.smoke ? "resnet18_step_4" : "resnet18_step_256", true, o.smoke ? 4 : 256, &o);
    if (!o.only || !strcmp(o.only, "gpt2")) bench_gpt(&o);
    return 0;
}
