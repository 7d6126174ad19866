/* Text generation: nanoGPT's generate() (temperature, top-k, torch.multinomial), with a
 * key/value cache: the keys and values of the positions seen so far are kept per
 * layer, so each new token runs ONE position through the blocks and attends to the
 * cache, instead of running the whole context again. The cached forward below uses
 * the model's own modules and parameters. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tutorials/10_gpt/gpt.h"
#include "tutorials/common/common.h"

/* Per layer, the keys and values of window positions 0..length-1: [1, H, block, hs]
 * each, written in place as positions arrive (owned references). */
typedef struct {
    tg_tensor **keys, **values;
    int64_t length;
} kv_cache;

/* One block on positions [start, start + n) of the window: x [1, n, C]. Its keys and
 * values go into the cache, its queries attend to every cached position up to their
 * own (causal when n > 1, which only happens from position 0; one query sees the
 * whole cache). Returns the block's output [1, n, C]. */
static tg_tensor *cached_block(tg_module *block, tg_tensor *x, tg_tensor **keys, tg_tensor **values, int64_t start,
                               int n_head, int block_size) {
    tg_module *attn = tg_module_child(block, "attn");
    int64_t n = tg_size(x, 1), C = tg_size(x, 2);
    tg_tensor *qkv[3];
    tg_split(tg_forward(tg_module_child(attn, "c_attn"), tg_forward(tg_module_child(block, "ln_1"), x)), C, 2, qkv, 3);
    tg_tensor *q = gpt_split_heads(qkv[0], n_head), *k = gpt_split_heads(qkv[1], n_head),
              *v = gpt_split_heads(qkv[2], n_head); /* [1, H, n, hs] */
    if (!*keys) {                                   /* made on first use: the dtype of k (bfloat16 under autocast) */
        tg_opts opts = {.dtype = tg_dtype_of(k), .device = tg_device_of(k)};
        *keys = tg_retain(tg_zeros(TG_SHAPE(1, n_head, block_size, C / n_head), opts));
        *values = tg_retain(tg_zeros(TG_SHAPE(1, n_head, block_size, C / n_head), opts));
    }
    tg_copy_(tg_narrow(*keys, 2, start, n), k);
    tg_copy_(tg_narrow(*values, 2, start, n), v);
    tg_tensor *y = tg_scaled_dot_product_attention(q, tg_narrow(*keys, 2, 0, start + n),
                                                   tg_narrow(*values, 2, 0, start + n), NULL, 0.0, n > 1);
    x = tg_add(x, tg_forward(tg_module_child(attn, "c_proj"), gpt_merge_heads(y)));
    return gpt_mlp(block, x);
}

/* GPT's forward on window positions [start, start + n) with the cache: the last
 * position's logits [1, vocab]. */
static tg_tensor *cached_forward(tg_module *gpt, kv_cache *cache, tg_tensor *idx, int64_t start) {
    const gpt_config *cfg = gpt_config_of(gpt);
    tg_module *transformer = tg_module_child(gpt, "transformer");
    int64_t n = tg_size(idx, 1);
    tg_tensor *pos =
        tg_arange((double)start, (double)(start + n), 1, (tg_opts){.dtype = TG_INT64, .device = tg_device_of(idx)});
    tg_tensor *x = tg_add(tg_forward(tg_module_child(transformer, "wte"), idx),
                          tg_forward(tg_module_child(transformer, "wpe"), pos));
    for (int i = 0; i < cfg->n_layer; i++)
        x = cached_block(gpt_block(gpt, i), x, &cache->keys[i], &cache->values[i], start, cfg->n_head, cfg->block_size);
    cache->length = start + n;
    x = tg_forward(tg_module_child(transformer, "ln_f"), tg_narrow(x, 1, n - 1, 1));
    return tg_reshape(tg_forward(tg_module_child(gpt, "lm_head"), x), TG_SHAPE(1, -1));
}

/* nanoGPT's generate() step after the logits: scale by the temperature, drop all but
 * the top k, softmax, one draw (torch.multinomial(probs, num_samples=1)). */
static int64_t draw_token(tg_tensor *logits, gpt_sample_opts opts) {
    logits = tg_div_scalar(tg_cast(logits, TG_FLOAT32), opts.temperature);
    int64_t vocab = tg_size(logits, 1);
    if (opts.top_k > 0 && opts.top_k < vocab) {
        tg_tensor *top = tg_topk(logits, opts.top_k, 1, true, true, NULL); /* [1, k], sorted */
        tg_tensor *kth = tg_narrow(top, 1, opts.top_k - 1, 1);             /* the k-th largest */
        logits = tg_masked_fill(logits, tg_lt(logits, kth), -INFINITY);
    }
    return (int64_t)tg_item(tg_multinomial(tg_softmax(logits, 1), 1, false));
}

double gpt_generate(tg_module *gpt, const int64_t *prompt, int64_t count, gpt_sample_opts opts, int64_t *out) {
    const gpt_config *cfg = gpt_config_of(gpt);
    int64_t block = cfg->block_size, keep = block / 2 > 0 ? block / 2 : 1;
    int param_count;
    tg_device device = tg_device_of(tg_parameters(gpt, &param_count)[0]);
    /* the window's tokens: the prompt's last `block` (at most), then the generated ones */
    int64_t *window = malloc((size_t)block * sizeof *window), length = 0;
    for (int64_t i = count > block ? count - block : 0; i < count; i++) window[length++] = prompt[i];
    kv_cache cache = {.keys = calloc((size_t)cfg->n_layer, sizeof(tg_tensor *)),
                      .values = calloc((size_t)cfg->n_layer, sizeof(tg_tensor *))};
    bool was_training = tg_is_training(gpt);
    tg_train(gpt, false);
    double start = tut_now();
    TG_NO_GRAD {
        for (int64_t t = 0; t < opts.tokens; t++) {
            TG_SCOPE {
                if (length == block) { /* full: go on from its second half */
                    memmove(window, window + block - keep, (size_t)keep * sizeof *window);
                    length = keep;
                    cache.length = 0; /* positions changed: the cache is primed again below */
                }
                tg_tensor *logits;
                if (opts.kv_cache) {
                    /* prime the cache with the window in one pass, then one position per token */
                    int64_t from = cache.length;
                    tg_tensor *idx = tg_from_data(window + from, TG_SHAPE(1, length - from),
                                                  (tg_opts){.dtype = TG_INT64, .device = device});
                    logits = cached_forward(gpt, &cache, idx, from);
                } else {
                    tg_tensor *idx =
                        tg_from_data(window, TG_SHAPE(1, length), (tg_opts){.dtype = TG_INT64, .device = device});
                    logits = tg_select(tg_forward(gpt, idx), 1, length - 1); /* [1, vocab] */
                }
                out[t] = window[length++] = draw_token(logits, opts);
            }
        }
    }
    double seconds = tut_now() - start;
    tg_train(gpt, was_training);
    for (int i = 0; i < cfg->n_layer; i++) {
        tg_release(cache.keys[i]);
        tg_release(cache.values[i]);
    }
    free(cache.keys);
    free(cache.values);
    free(window);
    return seconds;
}
