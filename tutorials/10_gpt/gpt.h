/* Lesson 10's pieces: the text (corpus.c), the model (model.c) and the sampler
 * (sample.c); main.c trains. Only tapegrad.h underneath. */
#ifndef TG_TUTORIALS_10_GPT_H
#define TG_TUTORIALS_10_GPT_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad.h"

/* ---- the text: characters -> token ids (corpus.c) ---- */

typedef struct {
    int64_t *ids; /* the text as vocabulary indices */
    int64_t length;
    int vocab;                /* distinct bytes (96 for --synthetic) */
    unsigned char chars[256]; /* index -> byte */
    const char *name;
} gpt_corpus;

/* `path`: a text file, or a folder of Debian's fortunes (the four files lesson 09
 * reads). synthetic: 65 536 uniform token ids from a vocabulary of 96 (the current
 * generator), shown as the printable ASCII characters and newline. Exits with a
 * message when a file cannot be read. */
gpt_corpus gpt_corpus_load(const char *path, bool synthetic);
void gpt_corpus_free(gpt_corpus *c);

/* ---- the model: nanoGPT's GPT (model.c) ---- */

typedef struct {
    int vocab, n_layer, n_head, n_embd, block_size;
    bool checkpoint_activations; /* tg_checkpoint around each block in training */
} gpt_config;

/* GPT with nanoGPT's children and names (transformer.wte / wpe / h.N.{ln_1, attn.c_attn,
 * attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj} / ln_f, lm_head tied to wte) and init,
 * drawn from the default generator. tg_forward(gpt, idx [B, T] int64) -> logits
 * [B, T, vocab]. */
tg_module *gpt_new(gpt_config config);
const gpt_config *gpt_config_of(tg_module *gpt);

/* The pieces the sampler's cached forward shares with the module's forward. */
tg_module *gpt_block(tg_module *gpt, int layer);
tg_tensor *gpt_split_heads(tg_tensor *x, int n_head); /* [B, T, C] -> [B, H, T, C / H] */
tg_tensor *gpt_merge_heads(tg_tensor *y);             /* [B, H, T, hs] -> [B, T, H * hs] */
tg_tensor *gpt_mlp(tg_module *block, tg_tensor *x);   /* x + mlp(ln_2(x)) */

/* ---- sampling (sample.c) ---- */

typedef struct {
    int64_t tokens;     /* how many to generate */
    double temperature; /* logits / temperature */
    int top_k;          /* keep the k largest logits (0: all) */
    bool kv_cache;      /* false: the whole window recomputed for every token */
} gpt_sample_opts;

/* Generates opts.tokens ids after `prompt` (count ids, at least 1) into out[0..tokens),
 * drawing with tg_multinomial from the default generator, in eval mode and without
 * grad. The window: positions 0..block_size-1 (learned positions); when it is full,
 * both modes keep its last block_size / 2 tokens and go on from there, so the two give
 * the same text. Returns the seconds spent. */
double gpt_generate(tg_module *gpt, const int64_t *prompt, int64_t count, gpt_sample_opts opts, int64_t *out);

#endif
