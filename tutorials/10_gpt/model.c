/* nanoGPT's model.py in tapegrad: GPT, Block, CausalSelfAttention and MLP as user
 * modules with the same children and names, so the state dict reads as nanoGPT's
 * (bench/gpt_torch.py loads it). No dropout (nanoGPT's default dropout=0.0). */
#include <math.h>
#include <string.h>

#include "tutorials/10_gpt/gpt.h"

typedef struct {
    int n_head;
} attention_state;

tg_tensor *gpt_split_heads(tg_tensor *x, int n_head) {
    int64_t B = tg_size(x, 0), T = tg_size(x, 1), C = tg_size(x, 2);
    return tg_transpose(tg_reshape(x, TG_SHAPE(B, T, n_head, C / n_head)), 1, 2);
}

tg_tensor *gpt_merge_heads(tg_tensor *y) {
    int64_t B = tg_size(y, 0), H = tg_size(y, 1), T = tg_size(y, 2), hs = tg_size(y, 3);
    /* no copy: the fused attention writes its output heads-last, [B, T, H, hs] in memory */
    return tg_reshape(tg_transpose(y, 1, 2), TG_SHAPE(B, T, H * hs));
}

/* CausalSelfAttention.forward: one Linear makes q, k and v side by side; each is split
 * into heads, and the fused attention with is_causal lets position t see 0..t. */
static tg_tensor *attention_forward(tg_module *self, tg_tensor *x) {
    const attention_state *s = tg_module_state(self);
    int64_t C = tg_size(x, 2);
    tg_tensor *qkv[3];
    tg_split(tg_forward(tg_module_child(self, "c_attn"), x), C, 2, qkv, 3);
    tg_tensor *y =
        tg_scaled_dot_product_attention(gpt_split_heads(qkv[0], s->n_head), gpt_split_heads(qkv[1], s->n_head),
                                        gpt_split_heads(qkv[2], s->n_head), NULL, 0.0, true);
    return tg_forward(tg_module_child(self, "c_proj"), gpt_merge_heads(y));
}

/* MLP.forward: 4x wider, GELU's tanh approximation (GPT-2's), back. */
static tg_tensor *mlp_forward(tg_module *self, tg_tensor *x) {
    tg_tensor *h = tg_gelu_tanh(tg_forward(tg_module_child(self, "c_fc"), x));
    return tg_forward(tg_module_child(self, "c_proj"), h);
}

tg_tensor *gpt_mlp(tg_module *block, tg_tensor *x) {
    return tg_add(x, tg_forward(tg_module_child(block, "mlp"), tg_forward(tg_module_child(block, "ln_2"), x)));
}

/* Block.forward: pre-LayerNorm residual branches. */
static tg_tensor *block_forward(tg_module *self, tg_tensor *x) {
    x = tg_add(x, tg_forward(tg_module_child(self, "attn"), tg_forward(tg_module_child(self, "ln_1"), x)));
    return gpt_mlp(self, x);
}

/* nanoGPT's nn.ModuleDict `transformer`: holds children, is not called. */
static tg_tensor *module_dict_forward(tg_module *self, tg_tensor *x) {
    (void)self;
    (void)x;
    tg_error("ModuleDict 'transformer' is a container: call its children");
    return NULL;
}

/* tg_checkpoint's segment: one block, recomputed in backward. */
static tg_tensor *run_block(tg_tensor *const *inputs, void *block) { return tg_forward(block, inputs[0]); }

tg_module *gpt_block(tg_module *gpt, int layer) {
    return tg_nn_module_list_get(tg_module_child(tg_module_child(gpt, "transformer"), "h"), layer);
}

const gpt_config *gpt_config_of(tg_module *gpt) { return tg_module_state(gpt); }

static tg_tensor *gpt_forward(tg_module *self, tg_tensor *idx) {
    const gpt_config *cfg = tg_module_state(self);
    int64_t T = tg_size(idx, 1);
    if (T > cfg->block_size) {
        tg_error("GPT: a sequence of %lld tokens, the block size is %d", (long long)T, cfg->block_size);
        return NULL;
    }
    tg_module *transformer = tg_module_child(self, "transformer");
    tg_tensor *pos = tg_arange(0, (double)T, 1, (tg_opts){.dtype = TG_INT64, .device = tg_device_of(idx)});
    tg_tensor *x = tg_add(tg_forward(tg_module_child(transformer, "wte"), idx),  /* [B, T, C] */
                          tg_forward(tg_module_child(transformer, "wpe"), pos)); /* [T, C], broadcast */
    for (int i = 0; i < cfg->n_layer; i++) {
        tg_module *block = gpt_block(self, i);
        /* checkpointing keeps only each block's input; backward runs the block again */
        x = cfg->checkpoint_activations ? tg_checkpoint(run_block, block, &x, 1) : tg_forward(block, x);
    }
    x = tg_forward(tg_module_child(transformer, "ln_f"), x);
    return tg_forward(tg_module_child(self, "lm_head"), x); /* the tied weight: x @ wte^T */
}

static const tg_module_type gpt_type = {.name = "GPT", .forward = gpt_forward};
static const tg_module_type module_dict_type = {.name = "ModuleDict", .forward = module_dict_forward};
static const tg_module_type block_type = {.name = "Block", .forward = block_forward};
static const tg_module_type attention_type = {.name = "CausalSelfAttention", .forward = attention_forward};
static const tg_module_type mlp_type = {.name = "MLP", .forward = mlp_forward};

static tg_module *make_block(const gpt_config *cfg) {
    int64_t C = cfg->n_embd;
    tg_module *attn = tg_module_new(&attention_type, sizeof(attention_state));
    ((attention_state *)tg_module_state(attn))->n_head = cfg->n_head;
    tg_register_module(attn, "c_attn", tg_nn_linear(C, 3 * C, (tg_linear_opts){0}));
    tg_register_module(attn, "c_proj", tg_nn_linear(C, C, (tg_linear_opts){0}));
    tg_module *mlp = tg_module_new(&mlp_type, 0);
    tg_register_module(mlp, "c_fc", tg_nn_linear(C, 4 * C, (tg_linear_opts){0}));
    tg_register_module(mlp, "c_proj", tg_nn_linear(4 * C, C, (tg_linear_opts){0}));
    tg_module *block = tg_module_new(&block_type, 0);
    tg_register_module(block, "ln_1", tg_nn_layer_norm(TG_SHAPE(C), (tg_layer_norm_opts){0}));
    tg_register_module(block, "attn", attn);
    tg_register_module(block, "ln_2", tg_nn_layer_norm(TG_SHAPE(C), (tg_layer_norm_opts){0}));
    tg_register_module(block, "mlp", mlp);
    return block;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* nanoGPT's _init_weights, then the scaled residual projections: every matrix (Linear
 * and Embedding weights) N(0, 0.02), Linear biases 0, LayerNorms as made (1, 0), and
 * the two projections into the residual stream (attn.c_proj, mlp.c_proj)
 * N(0, 0.02 / sqrt(2 n_layer)), so the sum of 2 n_layer branches keeps its scale. */
static void init_weights(tg_module *gpt, int n_layer) {
    int count;
    const tg_named_tensor *params = tg_named_parameters(gpt, &count); /* the tied weight once */
    TG_NO_GRAD {
        for (int i = 0; i < count; i++) {
            tg_tensor *p = params[i].tensor;
            if (ends_with(params[i].name, "c_proj.weight")) tg_normal_(p, 0.0, 0.02 / sqrt(2.0 * n_layer));
            else if (tg_ndim(p) == 2) tg_normal_(p, 0.0, 0.02);
            else if (ends_with(params[i].name, ".bias")) tg_fill_(p, 0.0);
        }
    }
}

tg_module *gpt_new(gpt_config config) {
    tg_module *gpt = tg_module_new(&gpt_type, sizeof(gpt_config));
    *(gpt_config *)tg_module_state(gpt) = config;
    tg_module *transformer = tg_module_new(&module_dict_type, 0);
    tg_register_module(transformer, "wte", tg_nn_embedding(config.vocab, config.n_embd, (tg_embedding_opts){0}));
    tg_register_module(transformer, "wpe", tg_nn_embedding(config.block_size, config.n_embd, (tg_embedding_opts){0}));
    tg_module *h = tg_nn_module_list(0, NULL);
    for (int i = 0; i < config.n_layer; i++) tg_nn_module_list_append(h, make_block(&config));
    tg_register_module(transformer, "h", h);
    tg_register_module(transformer, "ln_f", tg_nn_layer_norm(TG_SHAPE(config.n_embd), (tg_layer_norm_opts){0}));
    tg_register_module(gpt, "transformer", transformer);

    /* Weight tying (nanoGPT: transformer.wte.weight = lm_head.weight): the output
     * head's weight is the token embedding's tensor, registered under both names, so
     * it gets the gradient of both uses and is one parameter to the optimizer. */
    tg_module *lm_head = tg_nn_linear(config.n_embd, config.vocab, (tg_linear_opts){.no_bias = true});
    tg_unregister_parameter(lm_head, "weight");
    tg_register_parameter(lm_head, "weight", tg_module_param(tg_module_child(transformer, "wte"), "weight"));
    tg_register_module(gpt, "lm_head", lm_head);
    init_weights(gpt, config.n_layer);
    return gpt;
}
