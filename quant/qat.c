/* Quantisation-aware training (quant/qat.h): the QAT modules and prepare_qat's swap. */
#include "quant/qat.h"

#include <string.h>

#include "core/error.h"
#include "quant/fake_quantize.h"
#include "nn/layers.h"
#include "quant/observer.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"

/* FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255) */
static tg_module *activation_fq(void) {
    return tg_nn_fake_quantize(
        tg_nn_moving_average_minmax_observer((tg_observer_opts){.quant_min = 0, .quant_max = 255}));
}
static tg_module *activation_fq_rr(void) {
    return tg_nn_fake_quantize(tg_nn_moving_average_minmax_observer(
        (tg_observer_opts){.reduce_range = true, .quant_min = 0, .quant_max = 255}));
}
static tg_module *weight_fq(void) {
    return tg_nn_fake_quantize(tg_nn_moving_average_per_channel_minmax_observer((tg_observer_opts){
        .dtype = TG_QINT8, .qscheme = TG_PER_CHANNEL_SYMMETRIC, .quant_min = -128, .quant_max = 127}));
}

tg_qconfig tg_get_default_qat_qconfig(const char *backend) {
    if (backend && !strcmp(backend, "onednn")) return (tg_qconfig){activation_fq, weight_fq};
    if (backend && (!strcmp(backend, "x86") || !strcmp(backend, "fbgemm")))
        return (tg_qconfig){activation_fq_rr, weight_fq};
    tg_error("tg_get_default_qat_qconfig: unknown backend \"%s\" (onednn, x86 or fbgemm)",
             backend ? backend : "(NULL)");
    return (tg_qconfig){NULL, NULL};
}

/* The state of a QAT module: the Conv2d's options first (tg_quant_convert reads them). */
typedef struct {
    tg_conv_opts opts;
    bool conv, relu;
} qat_state;

static tg_tensor *qat_forward(tg_module *self, tg_tensor *x) {
    qat_state *s = tg_module_state(self);
    tg_tensor *w = tg_forward(tg_module_child(self, "weight_fake_quant"), tg_module_param(self, "weight"));
    if (!w) return NULL;
    tg_tensor *b = tg_module_param(self, "bias");
    tg_tensor *y = s->conv ? tg_conv2d(x, w, b, s->opts) : tg_linear(x, w, b);
    return y && s->relu ? tg_relu(y) : y;
}

static const tg_module_type qat_types[] = {
    {.name = "QATConv2d", .forward = qat_forward},
    {.name = "QATConvReLU2d", .forward = qat_forward},
    {.name = "QATLinear", .forward = qat_forward},
    {.name = "QATLinearReLU", .forward = qat_forward},
};

static const char *type_name(tg_module *m) {
    const tg_module_type *t = tg_module_type_of(m);
    return t && t->name ? t->name : "Module";
}

/* The QAT module of a Conv2d / Linear / fused one (NULL for other modules, no error). */
static tg_module *qat_of(tg_module *m, tg_qconfig q) {
    const char *t = type_name(m);
    bool conv = !strcmp(t, "Conv2d") || !strcmp(t, "ConvReLU2d");
    bool linear = !strcmp(t, "Linear") || !strcmp(t, "LinearReLU");
    if (!conv && !linear) return NULL;
    bool relu = strstr(t, "ReLU") != NULL;
    tg_module *inner = relu ? tg_module_child(m, "0") : m;
    qat_state s = {.conv = conv, .relu = relu};
    if (conv && tg_nn_conv2d_get_opts(inner, &s.opts)) return NULL;
    tg_module *qat = tg_module_new(&qat_types[(conv ? 0 : 2) + relu], sizeof s);
    *(qat_state *)tg_module_state(qat) = s;
    tg_tensor *w = tg_module_param(inner, "weight"), *b = tg_module_param(inner, "bias");
    tg_module *fq = q.weight();
    if (!w || tg_register_parameter(qat, "weight", w) || (b && tg_register_parameter(qat, "bias", b)) || !fq ||
        tg_register_module(qat, "weight_fake_quant", fq)) {
        if (!w) tg_error("tg_quant_prepare_qat: %s has no weight", t);
        tg_module_free(qat);
        return NULL;
    }
    return qat;
}

static tg_status swap_walk(tg_module *m, tg_qconfig q) {
    for (int i = 0; i < tg_module_num_children(m); i++) {
        const char *name;
        tg_module *c = tg_module_child_at(m, i, &name);
        const char *t = type_name(c);
        if (!strcmp(t, "Conv2d") || !strcmp(t, "ConvReLU2d") || !strcmp(t, "Linear") || !strcmp(t, "LinearReLU")) {
            tg_module *qat = qat_of(c, q);
            if (!qat || tg_module_replace_child(m, name, qat)) return TG_ERROR;
        } else if (!tg_is_observer(c) && !tg_is_fake_quantize(c) && swap_walk(c, q)) {
            return TG_ERROR;
        }
    }
    return TG_OK;
}

tg_status tg_quant_prepare_qat(tg_module *model, tg_qconfig qconfig) {
    if (!model || !qconfig.activation || !qconfig.weight)
        return tg_error("tg_quant_prepare_qat: model and both qconfig functions must not be NULL");
    if (swap_walk(model, qconfig)) return TG_ERROR;
    tg_train(model, true);
    return tg_quant_prepare(model, qconfig);
}
