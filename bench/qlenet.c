/* Inference of the tutorials' LeNet in float32 and after static int8 quantisation
 * (quant/static_quant.h: fused conv+relu / linear+relu, onednn qconfig, calibrated on
 * four batches), at batch 1 and 64, no grad, images/s. Twin: bench/qlenet_torch.py
 * (torch.ao.quantization prepare / convert on the onednn engine). The seeds give both
 * the same weights, calibration data and inputs, so the float32 check (out[0, 0])
 * agrees to float32 rounding and the int8 one to a quantisation step. */
#include "bench/inference.h"
#include "tapegrad.h"

static tg_module *make_lenet(void) {
    tg_pool_opts pool2 = {.kernel_size = 2};
    return TG_NN_SEQUENTIAL(tg_nn_conv2d(1, 20, 5, (tg_conv_opts){0}), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                            tg_nn_conv2d(20, 50, 5, (tg_conv_opts){0}), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                            tg_nn_flatten(1, -1), tg_nn_linear(800, 500, (tg_linear_opts){0}), tg_nn_relu(),
                            tg_nn_linear(500, 10, (tg_linear_opts){0}));
}

static void run(tg_module *model, tg_tensor *inputs, const char *kind, int batch) {
    bench_inference("qlenet", model, inputs, kind, batch, batch == 1 ? 400 : 50);
}

int main(void) {
    tg_manual_seed(1);
    tg_module *model = tg_quant_wrapper(make_lenet());
    tg_eval(model);
    tg_manual_seed(0);
    tg_tensor *inputs = tg_rand(TG_SHAPE(64, 1, 28, 28), (tg_opts){0});
    tg_tensor *calib = tg_rand(TG_SHAPE(4, 32, 1, 28, 28), (tg_opts){0});
    run(model, inputs, "f32", 1);
    run(model, inputs, "f32", 64);
    tg_fuse_modules(model, "module.0", "module.1");
    tg_fuse_modules(model, "module.3", "module.4");
    tg_fuse_modules(model, "module.7", "module.8");
    tg_qconfig qconfig = tg_get_default_qconfig("onednn");
    tg_quant_prepare(model, qconfig);
    TG_SCOPE {
        for (int i = 0; i < 4; i++) tg_forward(model, tg_select(calib, 0, i));
    }
    if (tg_quant_convert(model, qconfig)) {
        fprintf(stderr, "qlenet: %s\n", tg_last_error());
        return 1;
    }
    run(model, inputs, "int8", 1);
    run(model, inputs, "int8", 64);
    tg_release(inputs);
    tg_release(calib);
    tg_module_free(model);
    return 0;
}
