/* Lesson 09: a character-level LSTM language model (pytorch/examples'
 * word_language_model, on characters) on English text from Debian's `fortunes`.
 *
 * Embedding(V, 200) -> 2-layer LSTM(200, 200) -> Linear(200, V) over the bytes of
 * the text; truncated backpropagation through time (64 characters, the hidden state
 * carried over and detached between batches); SGD lr 20 with the gradient norm
 * clipped at 0.25, the learning rate divided by 4 when the validation loss does
 * not improve; reports the validation perplexity. README.md walks through this file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tapegrad.h"
#include "tutorials/common/common.h"

enum { EMBED = 200, HIDDEN = 200, LAYERS = 2, BPTT = 64, EVAL_BATCH = 10 };

/* The files of /usr/share/games/fortunes read, in this order (about 400 KB). */
static const char *const corpus_files[] = {"wisdom", "literature", "science", "people"};

/* ---- the corpus: bytes -> class indices ---- */

typedef struct {
    int64_t *ids; /* the text as vocabulary indices */
    int64_t length;
    int vocab;                /* distinct bytes */
    unsigned char chars[256]; /* index -> byte, in byte order */
} corpus;

/* The vocabulary is the set of bytes in the text, sorted (the twin's sorted(set(text))). */
static corpus load_corpus(const tut_args *args) {
    unsigned char *text = NULL;
    int64_t length = 0;
    if (args->synthetic) { /* a few sentences, repeated: learnable in a few steps */
        static const char *sentences = "the cat sat on the mat. a dog ran in the fog. we see the sea. ";
        int64_t n = (int64_t)strlen(sentences);
        length = 64 * 1024;
        text = malloc((size_t)length);
        for (int64_t i = 0; i < length; i++) text[i] = (unsigned char)sentences[i % n];
    } else {
        char path[4096];
        for (size_t i = 0; i < sizeof corpus_files / sizeof corpus_files[0]; i++) {
            snprintf(path, sizeof path, "%s/%s", args->data_dir, corpus_files[i]);
            tut_append_file(&text, &length, path);
        }
    }
    corpus c = {.ids = malloc((size_t)length * sizeof(int64_t)), .length = length};
    int index_of[256];
    bool seen[256] = {0};
    for (int64_t i = 0; i < length; i++) seen[text[i]] = true;
    for (int b = 0; b < 256; b++)
        if (seen[b]) {
            index_of[b] = c.vocab;
            c.chars[c.vocab++] = (unsigned char)b;
        }
    for (int64_t i = 0; i < length; i++) c.ids[i] = index_of[text[i]];
    free(text);
    return c;
}

/* The example's batchify: ids[begin, end) cut into `columns` streams side by side,
 * [rows, columns] with column j = the j-th consecutive piece (the remainder dropped). */
static tg_tensor *batchify(const int64_t *ids, int64_t count, int64_t columns, tg_device device) {
    int64_t rows = count / columns;
    int64_t *grid = malloc((size_t)(rows * columns) * sizeof *grid);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < columns; j++) grid[i * columns + j] = ids[j * rows + i];
    tg_tensor *t = tg_from_data(grid, TG_SHAPE(rows, columns), (tg_opts){.dtype = TG_INT64, .device = device});
    free(grid);
    return t;
}

/* ---- the model: the example's RNNModel (encoder, rnn, decoder), no dropout ---- */

/* x [T, B] int64 -> logits [T * B, V]; *h and *c: the state in (NULL: zeros) and the
 * state out (references owned by the current scope). */
static tg_tensor *lm_run(tg_module *lm, tg_tensor *x, tg_tensor **h, tg_tensor **c) {
    tg_tensor *embedded = tg_forward(tg_module_child(lm, "encoder"), x); /* [T, B, EMBED] */
    tg_rnn_result r;
    tg_rnn_forward(tg_module_child(lm, "rnn"), embedded, *h, *c, &r); /* output [T, B, HIDDEN] */
    *h = r.h_n;
    *c = r.c_n;
    tg_tensor *flat = tg_reshape(r.output, TG_SHAPE(tg_size(x, 0) * tg_size(x, 1), HIDDEN));
    return tg_forward(tg_module_child(lm, "decoder"), flat);
}

static tg_tensor *lm_forward(tg_module *self, tg_tensor *x) {
    tg_tensor *h = NULL, *c = NULL;
    return lm_run(self, x, &h, &c);
}

static const tg_module_type lm_type = {.name = "RNNModel", .forward = lm_forward};

static tg_module *make_lm(int vocab) {
    tg_module *m = tg_module_new(&lm_type, 0);
    /* in the order of the example's __init__, then its init_weights: the same draws */
    tg_register_module(m, "encoder", tg_nn_embedding(vocab, EMBED, (tg_embedding_opts){0}));
    tg_register_module(m, "rnn", tg_nn_lstm(EMBED, HIDDEN, (tg_rnn_opts){.num_layers = LAYERS}));
    tg_register_module(m, "decoder", tg_nn_linear(HIDDEN, vocab, (tg_linear_opts){0}));
    TG_NO_GRAD {
        tg_uniform_(tg_module_param(tg_module_child(m, "encoder"), "weight"), -0.1, 0.1);
        tg_fill_(tg_module_param(tg_module_child(m, "decoder"), "bias"), 0.0);
        tg_uniform_(tg_module_param(tg_module_child(m, "decoder"), "weight"), -0.1, 0.1);
    }
    return m;
}

/* Keeps a state across steps: a detached copy, retained (the step's scope ends). */
static void carry_state(tg_tensor **kept, tg_tensor *state) {
    tg_tensor *next = tg_retain(tg_detach(state));
    tg_release(*kept);
    *kept = next;
}

/* The example's evaluate(): mean cross-entropy per character over `data` [rows, cols],
 * BPTT windows in order, the state carried, eval mode, no grad. */
static double evaluate(tg_module *lm, tg_tensor *data) {
    tg_eval(lm);
    int64_t rows = tg_size(data, 0);
    double total = 0;
    tg_tensor *h = NULL, *c = NULL;
    TG_NO_GRAD {
        for (int64_t i = 0; i < rows - 1; i += BPTT) {
            TG_SCOPE {
                int64_t len = rows - 1 - i < BPTT ? rows - 1 - i : BPTT;
                tg_tensor *x = tg_narrow(data, 0, i, len),
                          *target = tg_reshape(tg_narrow(data, 0, i + 1, len), TG_SHAPE(-1));
                tg_tensor *hs = h, *cs = c;
                tg_tensor *loss = tg_cross_entropy(lm_run(lm, x, &hs, &cs), target);
                total += (double)len * tg_item(loss);
                carry_state(&h, hs);
                carry_state(&c, cs);
            }
        }
    }
    tg_release(h);
    tg_release(c);
    tg_train(lm, true);
    return total / (double)(rows - 1);
}

int main(int argc, char **argv) {
    const char *clip_text = "0.25";
    tut_option extra[] = {
        {.name = "--clip", .metavar = "X", .value = &clip_text, .help = "gradient norm clipping (default 0.25)"}};
    tut_args args = {.options = TUT_OPT_TRAINING | TUT_OPT_LOG | TUT_OPT_RESULT_LINE | TUT_OPT_SAVE_INIT,
                     .epochs = 1,
                     .batch_size = 32,
                     .lr = 20,
                     .seed = 1,
                     .data_dir = "/usr/share/games/fortunes"};
    tut_parse_args(argc, argv,
                   "Lesson 09: a character-level LSTM language model on Debian's fortunes "
                   "(--data: the folder of fortune files).",
                   &args, extra, 1);
    double clip = atof(clip_text);

    /* ---- data: 90% to train, the last 10% to validate ---- */
    corpus text = load_corpus(&args);
    int64_t train_length = text.length * 9 / 10;
    tg_tensor *train = batchify(text.ids, train_length, args.batch_size, args.device);
    tg_tensor *valid = batchify(text.ids + train_length, text.length - train_length, EVAL_BATCH, args.device);
    printf("corpus: %s, %lld characters (%lld train, %lld validation), vocabulary %d\n",
           args.synthetic ? "generated text (--synthetic)" : args.data_dir, (long long)text.length,
           (long long)train_length, (long long)(text.length - train_length), text.vocab);

    tg_manual_seed(args.seed);
    tg_module *lm = make_lm(text.vocab);
    tut_save_init(lm, &args);
    tg_to(lm, args.device);
    int count;
    tg_tensor *const *params = tg_parameters(lm, &count);
    int64_t total_params = 0;
    for (int i = 0; i < count; i++) total_params += tg_numel(params[i]);
    printf("model: Embedding(%d, %d) -> LSTM(%d, %d, layers %d) -> Linear(%d, %d), %lld parameters\n", text.vocab,
           EMBED, EMBED, HIDDEN, LAYERS, HIDDEN, text.vocab, (long long)total_params);
    tg_optim *opt = tg_sgd(lm, (tg_sgd_opts){.lr = args.lr}); /* p -= lr * grad, as the example's loop */

    FILE *log = tut_log_open(args.log_path);
    int64_t step = 0, rows = tg_size(train, 0), steps_per_epoch = (rows - 1 + BPTT - 1) / BPTT;
    double epoch_seconds = 0, best = INFINITY, val_loss = 0, lr = args.lr;
    char device_text[16];
    printf("training on %s: %d epoch(s), batch %lld, BPTT %d, SGD lr %g, clip %g\n",
           tg_device_str(args.device, device_text), args.epochs, (long long)args.batch_size, BPTT, lr, clip);
    for (int epoch = 0; epoch < args.epochs && !(args.max_steps && step >= args.max_steps); epoch++) {
        tut_progress bar;
        tut_progress_begin(&bar, epoch, args.epochs, steps_per_epoch, args.batch_size);
        double start = tut_now();
        tg_tensor *h = NULL, *c = NULL; /* zeros at the start of each epoch (init_hidden) */
        for (int64_t i = 0; i < rows - 1; i += BPTT) {
            if (args.max_steps && step >= args.max_steps) break;
            TG_SCOPE {
                int64_t len = rows - 1 - i < BPTT ? rows - 1 - i : BPTT;
                tg_tensor *x = tg_narrow(train, 0, i, len);                                    /* [len, B] */
                tg_tensor *target = tg_reshape(tg_narrow(train, 0, i + 1, len), TG_SHAPE(-1)); /* the next characters */
                tg_tensor *hs = h, *cs = c; /* detached: backward stops at this window's start */
                tg_optim_zero_grad(opt);
                tg_tensor *loss = tg_cross_entropy(lm_run(lm, x, &hs, &cs), target);
                tg_backward(loss);
                tg_clip_grad_norm(lm, clip, 2.0);
                tg_optim_step(opt);
                carry_state(&h, hs);
                carry_state(&c, cs);
                tut_progress_update(&bar, tg_item(loss));
            }
            step++;
        }
        tg_release(h);
        tg_release(c);
        epoch_seconds = tut_now() - start;
        double train_loss = tut_progress_end(&bar);
        val_loss = evaluate(lm, valid);
        printf("epoch %d: train loss %.4f, valid loss %.4f, valid perplexity %.3f, lr %g, %.1f s\n", epoch + 1,
               train_loss, val_loss, exp(val_loss), lr, epoch_seconds);
        tut_log_row(log, epoch + 1, step, train_loss, val_loss, exp(val_loss), lr, epoch_seconds);
        if (val_loss < best) {
            best = val_loss;
        } else { /* the example anneals the learning rate when validation stops improving */
            lr /= 4;
            tg_optim_set_lr(opt, lr);
        }
    }
    tut_log_close(log);
    if (args.result_line) tut_print_result("lstm_lm_epoch", epoch_seconds, exp(val_loss)); /* "check": perplexity */
    /* --export-onnx: character ids [T, B] (time first, as the model takes them) -> logits
     * [T * B, V], the state starting at zeros; the example is one window of one stream */
    int exported = tut_export_onnx(lm, TG_SHAPE(BPTT, 1), TG_INT64, &args, NULL);

    tg_optim_free(opt);
    tg_module_free(lm);
    tg_release(train);
    tg_release(valid);
    free(text.ids);
    printf("live tensors at exit: %ld\n", tg_live_tensors());
    return exported;
}
