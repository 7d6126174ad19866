/* Inference of lesson 02's MLP (784-1024-512-256-128-10) in float32 and after dynamic
 * int8 quantisation (quant/quantize.h), at batch 1 and 64, no grad, images/s.
 * Twin: bench/qmlp_torch.py (torch.ao.quantization.quantize_dynamic). The seeds give
 * both the same weights and inputs, so the float32 check (out[0, 0]) agrees to float32
 * rounding and the int8 one to a quantisation step. */
#include "bench/inference.h"
#include "tapegrad.h"

static tg_module *make_mlp(void) {
    return TG_NN_SEQUENTIAL(
        tg_nn_linear(784, 1024, (tg_linear_opts){0}), tg_nn_relu(), tg_nn_linear(1024, 512, (tg_linear_opts){0}),
        tg_nn_relu(), tg_nn_linear(512, 256, (tg_linear_opts){0}), tg_nn_relu(),
        tg_nn_linear(256, 128, (tg_linear_opts){0}), tg_nn_relu(), tg_nn_linear(128, 10, (tg_linear_opts){0}));
}

static void run(tg_module *model, tg_tensor *inputs, const char *kind, int batch) {
    bench_inference("qmlp", model, inputs, kind, batch, batch == 1 ? 400 : 100);
}

int main(void) {
    tg_manual_seed(1);
    tg_module *model = make_mlp();
    tg_manual_seed(0);
    tg_tensor *inputs = tg_randn(TG_SHAPE(64, 784), (tg_opts){0});
    run(model, inputs, "f32", 1);
    run(model, inputs, "f32", 64);
    model = tg_quantize_dynamic(model, (tg_quantize_opts){0});
    run(model, inputs, "int8", 1);
    run(model, inputs, "int8", 64);
    tg_release(inputs);
    tg_module_free(model);
    return 0;
}
