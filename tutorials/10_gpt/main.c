/* Lesson 10: a character-level GPT (Karpathy's nanoGPT, its shakespeare_char recipe
 * sized for a CPU) on English text from Debian's `fortunes`.
 *
 * Token + learned position embeddings, n_layer pre-LayerNorm blocks (causal
 * self-attention through the fused tg_scaled_dot_product_attention, a 4x GELU MLP),
 * a final LayerNorm and an output head tied to the token embedding (model.c); AdamW
 * with weight decay on the matrices only, linear warmup then cosine decay, gradient
 * clipping; random windows of the text as batches (nanoGPT's get_batch); at the end,
 * text sampled with temperature and top-k from a key/value cache (sample.c).
 * README.md walks through these files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tapegrad.h"
#include "tutorials/10_gpt/gpt.h"
#include "tutorials/common/common.h"

/* ---- batches: nanoGPT's get_batch ---- */

typedef struct {
    const int64_t *ids;
    int64_t length;
} split;

/* B random windows of block_size + 1 tokens: torch.randint(len(data) - block_size, (B,))
 * from the default generator (so the twin, seeded alike, draws the same windows);
 * x = the windows' first block_size tokens, y = the same shifted by one (new references,
 * owned by the open scope). */
static void get_batch(split s, int64_t batch, int64_t block, tg_device device, tg_tensor **x, tg_tensor **y) {
    int64_t *start = malloc((size_t)batch * sizeof *start), *xs = malloc((size_t)(batch * block) * sizeof *xs),
            *ys = malloc((size_t)(batch * block) * sizeof *ys);
    TG_SCOPE {
        tg_copy_to_host(tg_randint(0, s.length - block, TG_SHAPE(batch), (tg_opts){0}), start,
                        (size_t)batch * sizeof *start);
    }
    for (int64_t b = 0; b < batch; b++) {
        memcpy(xs + b * block, s.ids + start[b], (size_t)block * sizeof *xs);
        memcpy(ys + b * block, s.ids + start[b] + 1, (size_t)block * sizeof *ys);
    }
    tg_opts opts = {.dtype = TG_INT64, .device = device};
    *x = tg_from_data(xs, TG_SHAPE(batch, block), opts);
    *y = tg_from_data(ys, TG_SHAPE(batch, block), opts);
    free(start);
    free(xs);
    free(ys);
}

typedef struct {
    tg_module *gpt;
    const tut_args *args;
    int64_t block;
} run_context;

/* Mean cross-entropy per token of idx [B, T] -> targets [B, T], under --amp's autocast. */
static tg_tensor *lm_loss(const run_context *r, tg_tensor *x, tg_tensor *y) {
    tg_tensor *loss = NULL;
    TG_AUTOCAST_IF(r->args->device.kind, r->args->amp_dtype, r->args->amp) {
        tg_tensor *logits = tg_forward(r->gpt, x); /* [B, T, vocab] */
        loss = tg_cross_entropy(tg_reshape(logits, TG_SHAPE(-1, tg_size(logits, 2))), tg_reshape(y, TG_SHAPE(-1)));
    }
    return loss;
}

/* nanoGPT's estimate_loss for one split: the mean loss of `iters` random batches, in
 * eval mode, without grad. */
static double estimate_loss(const run_context *r, split s, int iters) {
    double total = 0;
    tg_eval(r->gpt);
    TG_NO_GRAD {
        for (int i = 0; i < iters; i++) {
            TG_SCOPE {
                tg_tensor *x, *y;
                get_batch(s, r->args->batch_size, r->block, r->args->device, &x, &y);
                total += tg_item(lm_loss(r, x, y));
            }
        }
    }
    tg_train(r->gpt, true);
    return total / iters;
}

static long parse_positive(const char *name, const char *text) {
    char *end;
    long v = strtol(text, &end, 10);
    if (*end || v <= 0) {
        fprintf(stderr, "10_gpt: bad %s '%s' (a positive integer)\n", name, text);
        exit(2);
    }
    return v;
}

static void print_text(const gpt_corpus *c, const int64_t *ids, int64_t n) {
    for (int64_t i = 0; i < n; i++) putchar(c->chars[ids[i]]);
    putchar('\n');
}

int main(int argc, char **argv) {
    const char *n_layer_text = "4", *n_head_text = "4", *n_embd_text = "128", *block_text = "128",
               *eval_interval_text = "100", *eval_iters_text = "20", *log_interval_text = "10", *warmup_text = "100",
               *weight_decay_text = "0.1", *clip_text = "1.0", *tokens_text = "500", *temperature_text = "0.8",
               *top_k_text = "200";
    bool no_kv_cache = false, compare_kv_cache = false, checkpoint_activations = false;
    tut_option extra[] = {
        {.name = "--n-layer", .metavar = "N", .value = &n_layer_text, .help = "transformer blocks (default 4)"},
        {.name = "--n-head", .metavar = "N", .value = &n_head_text, .help = "attention heads (default 4)"},
        {.name = "--n-embd", .metavar = "N", .value = &n_embd_text, .help = "model width (default 128)"},
        {.name = "--block-size", .metavar = "N", .value = &block_text, .help = "context length (default 128)"},
        {.name = "--eval-interval",
         .metavar = "N",
         .value = &eval_interval_text,
         .help = "estimate train/val loss every N steps (default 100)"},
        {.name = "--eval-iters",
         .metavar = "N",
         .value = &eval_iters_text,
         .help = "batches per loss estimate (default 20)"},
        {.name = "--log-interval",
         .metavar = "N",
         .value = &log_interval_text,
         .help = "print the step's loss every N steps (default 10)"},
        {.name = "--warmup-steps",
         .metavar = "N",
         .value = &warmup_text,
         .help = "linear warmup before the cosine decay (default 100)"},
        {.name = "--weight-decay",
         .metavar = "X",
         .value = &weight_decay_text,
         .help = "AdamW weight decay of the matrices (default 0.1)"},
        {.name = "--clip", .metavar = "X", .value = &clip_text, .help = "gradient norm clipping (default 1.0)"},
        {.name = "--sample-tokens",
         .metavar = "N",
         .value = &tokens_text,
         .help = "characters generated at the end (default 500; 0: none)"},
        {.name = "--temperature",
         .metavar = "X",
         .value = &temperature_text,
         .help = "sampling temperature (default 0.8)"},
        {.name = "--top-k",
         .metavar = "N",
         .value = &top_k_text,
         .help = "sample from the k likeliest tokens (default 200; 0: all)"},
        {.name = "--no-kv-cache", .flag = &no_kv_cache, .help = "sample by recomputing the whole window each token"},
        {.name = "--compare-kv-cache",
         .flag = &compare_kv_cache,
         .help = "sample both ways from the same generator state and check the texts are equal"},
        {.name = "--checkpoint-activations",
         .flag = &checkpoint_activations,
         .help = "recompute each block in backward instead of keeping its activations"},
    };
    tut_args args = {.options = TUT_OPT_DEVICE | TUT_OPT_BATCH_SIZE | TUT_OPT_LR | TUT_OPT_SEED | TUT_OPT_DATA |
                                TUT_OPT_MAX_STEPS | TUT_OPT_FLUSH_DENORMAL | TUT_OPT_LOG | TUT_OPT_RESULT_LINE |
                                TUT_OPT_SAVE_INIT | TUT_OPT_AMP | TUT_OPT_EXPORT_ONNX,
                     .batch_size = 32,
                     .lr = 1e-3,
                     .seed = 1337,
                     .max_steps = 2000,
                     .data_dir = "/usr/share/games/fortunes"};
    tut_parse_args(argc, argv,
                   "Lesson 10: a character-level GPT (nanoGPT) on Debian's fortunes. "
                   "--data: a text file, or a folder with lesson 09's four fortune files; --synthetic: uniform "
                   "token ids of a vocabulary of 96; --max-steps: the run's length, which the cosine schedule spans "
                   "(default 2000); --batch-size: sequences of --block-size tokens per step; --log: a row per "
                   "loss estimate.",
                   &args, extra, (int)(sizeof extra / sizeof extra[0]));
    gpt_config cfg = {.n_layer = (int)parse_positive("--n-layer", n_layer_text),
                      .n_head = (int)parse_positive("--n-head", n_head_text),
                      .n_embd = (int)parse_positive("--n-embd", n_embd_text),
                      .block_size = (int)parse_positive("--block-size", block_text),
                      .checkpoint_activations = checkpoint_activations};
    int eval_interval = (int)parse_positive("--eval-interval", eval_interval_text),
        eval_iters = (int)parse_positive("--eval-iters", eval_iters_text),
        log_interval = (int)parse_positive("--log-interval", log_interval_text);
    int warmup = atoi(warmup_text), top_k = atoi(top_k_text);
    int64_t sample_tokens = atoll(tokens_text);
    double weight_decay = atof(weight_decay_text), clip = atof(clip_text), temperature = atof(temperature_text);
    if (cfg.n_embd % cfg.n_head) {
        fprintf(stderr, "10_gpt: --n-embd %d is not a multiple of --n-head %d\n", cfg.n_embd, cfg.n_head);
        return 2;
    }
    if (args.max_steps <= 0) { /* the cosine schedule needs its length */
        fprintf(stderr, "10_gpt: --max-steps must be positive (the learning-rate schedule's length)\n");
        return 2;
    }
    if (temperature <= 0) {
        fprintf(stderr, "10_gpt: --temperature must be positive\n");
        return 2;
    }

    /* ---- data: the first 90% trains, the last 10% validates (nanoGPT's prepare.py) ---- */
    tg_manual_seed(args.seed);
    gpt_corpus text = gpt_corpus_load(args.data_dir, args.synthetic);
    int64_t train_length = text.length * 9 / 10;
    split train = {text.ids, train_length}, val = {text.ids + train_length, text.length - train_length};
    if (val.length <= cfg.block_size) {
        fprintf(stderr, "10_gpt: %lld characters of validation text, fewer than --block-size + 1\n",
                (long long)val.length);
        return 2;
    }
    cfg.vocab = text.vocab;
    printf("corpus: %s, %lld characters (%lld train, %lld validation), vocabulary %d\n",
           args.synthetic ? text.name : args.data_dir, (long long)text.length, (long long)train.length,
           (long long)val.length, text.vocab);

    /* ---- model and optimizer ---- */
    tg_manual_seed(args.seed);
    tg_module *gpt = gpt_new(cfg);
    tut_save_init(gpt, &args);
    tg_to(gpt, args.device);
    printf("model: GPT, %d layers, %d heads, width %d, block %d, vocabulary %d, %lld parameters (head tied to "
           "wte)%s\n",
           cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.block_size, cfg.vocab, (long long)tg_module_num_params(gpt),
           cfg.checkpoint_activations ? ", activation checkpointing" : "");
    /* nanoGPT's configure_optimizers: decay on the 2-D weights, none on biases and norms */
    tg_optim *opt =
        tg_adamw_decay_groups(gpt, (tg_adamw_opts){.lr = args.lr, .betas = {0.9, 0.99}, .weight_decay = weight_decay});
    /* fp16 (CUDA only) scales the loss; a disabled scaler (float32, bf16) passes through */
    tg_grad_scaler *scaler =
        tg_grad_scaler_new(opt, (tg_grad_scaler_opts){.disabled = !(args.amp && args.amp_dtype == TG_FLOAT16)});
    /* nanoGPT's get_lr as two schedulers: lr * (step + 1) / (warmup + 1) for the warmup
     * steps (LinearLR from 1 / (warmup + 1)), then a cosine down to lr / 10 at the last step */
    if (warmup >= args.max_steps) warmup = (int)(args.max_steps / 10);
    int decay_steps = (int)args.max_steps - warmup;
    tg_lr_scheduler *sched;
    if (warmup > 0) {
        tg_lr_scheduler *parts[2] = {tg_linear_lr(opt, 1.0 / (warmup + 1), 1.0, warmup),
                                     tg_cosine_annealing_lr(opt, decay_steps, args.lr / 10)};
        sched = tg_sequential_lr(opt, parts, 2, (int[]){warmup});
    } else {
        sched = tg_cosine_annealing_lr(opt, decay_steps, args.lr / 10);
    }

    /* The batches are drawn from the seed afresh (not after the init's draws), so a twin
     * that loads the weights draws the same windows. */
    tg_manual_seed(args.seed);
    run_context run = {gpt, &args, cfg.block_size};
    FILE *log = tut_log_open(args.log_path);
    char device_text[16];
    printf("training on %s: %lld steps, batch %lld x %d tokens, AdamW lr %g betas (0.9, 0.99) weight decay %g, "
           "warmup %d then cosine to %g, clip %g%s%s\n",
           tg_device_str(args.device, device_text), (long long)args.max_steps, (long long)args.batch_size,
           cfg.block_size, args.lr, weight_decay, warmup, args.lr / 10, clip, args.amp ? ", autocast " : "",
           args.amp ? args.amp_name : "");
    double train_seconds = 0, val_loss = NAN;
    for (int64_t step = 0;; step++) {
        if (step % eval_interval == 0 || step == args.max_steps) {
            double train_estimate = estimate_loss(&run, train, eval_iters);
            val_loss = estimate_loss(&run, val, eval_iters);
            printf("step %lld: train loss %.4f, val loss %.4f\n", (long long)step, train_estimate, val_loss);
            tut_log_row(log, 1, step, train_estimate, val_loss, exp(val_loss), tg_optim_get_lr(opt), train_seconds);
        }
        if (step == args.max_steps) break;
        double start = tut_now(), loss_value, lr = tg_optim_get_lr(opt); /* this step's */
        TG_SCOPE {
            tg_tensor *x, *y;
            get_batch(train, args.batch_size, cfg.block_size, args.device, &x, &y);
            tut_step_memory_begin();
            tg_tensor *loss = lm_loss(&run, x, y);
            tut_step_memory_forward_end();
            tg_backward(tg_grad_scaler_scale(scaler, loss));
            tg_grad_scaler_unscale_(scaler, opt); /* clip the true gradients */
            tg_clip_grad_norm(gpt, clip, 2.0);
            tg_grad_scaler_step(scaler, opt, NULL);
            tg_grad_scaler_update(scaler);
            tg_optim_zero_grad(opt);
            tut_step_memory_end();
            tg_scheduler_step(sched);
            loss_value = tg_item(loss);
        }
        double seconds = tut_now() - start;
        train_seconds += seconds;
        if ((step + 1) % log_interval == 0)
            printf("iter %lld: loss %.4f, lr %.3e, %.0f ms\n", (long long)step + 1, loss_value, lr, seconds * 1000);
    }
    tut_log_close(log);
    double step_seconds = train_seconds / (double)args.max_steps;
    printf("training: %lld steps in %.1f s, %.0f ms/step, %.0f tokens/s\n", (long long)args.max_steps, train_seconds,
           step_seconds * 1000, (double)args.batch_size * cfg.block_size / step_seconds);

    /* ---- sampling: nanoGPT's sample.py, starting from a newline ---- */
    if (sample_tokens > 0) {
        int64_t prompt = 0, *out = malloc((size_t)sample_tokens * sizeof *out);
        for (int i = 0; i < text.vocab; i++)
            if (text.chars[i] == '\n') prompt = i;
        gpt_sample_opts so = {
            .tokens = sample_tokens, .temperature = temperature, .top_k = top_k, .kv_cache = !no_kv_cache};
        tg_rng_state before = tg_rng_get_state();
        double seconds = 0;
        TG_AUTOCAST_IF(args.device.kind, args.amp_dtype, args.amp) { seconds = gpt_generate(gpt, &prompt, 1, so, out); }
        printf("sample (temperature %g, top-k %d, %s, %.2f ms/token):\n", temperature, top_k,
               so.kv_cache ? "key/value cache" : "whole window each token", seconds * 1000 / sample_tokens);
        print_text(&text, out, sample_tokens);
        if (compare_kv_cache) { /* the same draws the other way: the text must not change */
            int64_t *other = malloc((size_t)sample_tokens * sizeof *other);
            tg_rng_state after = tg_rng_get_state();
            tg_rng_set_state(before);
            so.kv_cache = !so.kv_cache;
            double other_seconds = 0;
            TG_AUTOCAST_IF(args.device.kind, args.amp_dtype, args.amp) {
                other_seconds = gpt_generate(gpt, &prompt, 1, so, other);
            }
            tg_rng_set_state(after);
            int64_t first_difference = -1;
            for (int64_t i = 0; i < sample_tokens && first_difference < 0; i++)
                if (out[i] != other[i]) first_difference = i;
            double cached = so.kv_cache ? other_seconds : seconds, full = so.kv_cache ? seconds : other_seconds;
            if (first_difference < 0)
                printf("kv cache vs whole window: identical (%lld tokens), %.2f ms/token with the cache, %.2f "
                       "without\n",
                       (long long)sample_tokens, cached * 1000 / sample_tokens, full * 1000 / sample_tokens);
            else printf("kv cache vs whole window: DIFFERENT from token %lld\n", (long long)first_difference);
            free(other);
            if (first_difference >= 0) return 1;
        }
        free(out);
    }
    if (args.result_line) tut_print_result("gpt_step", step_seconds, val_loss); /* "check": the val loss */
    /* --export-onnx: token ids [B, block_size] -> logits [B, block_size, vocab] */
    int exported = tut_export_onnx(gpt, TG_SHAPE(1, cfg.block_size), TG_INT64, &args, NULL);

    tg_scheduler_free(sched);
    tg_grad_scaler_free(scaler);
    tg_optim_free(opt);
    tg_module_free(gpt);
    gpt_corpus_free(&text);
    printf("live tensors at exit: %ld\n", tg_live_tensors());
    return exported;
}
