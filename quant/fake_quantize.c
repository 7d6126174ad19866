/* FakeQuantize (quant/fake_quantize.h): an observer, the qparams it yields, and the
 * fake quantisation op of ops/fake_quantize.h. */
#include "quant/fake_quantize.h"

#include <stdint.h>
#include <string.h>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"
#include "ops/fake_quantize.h"
#include "ops/shape.h"

static bool flag(tg_module *m, const char *name) {
    bool on = false;
    TG_SCOPE {
        tg_tensor *t = tg_contiguous(tg_tensor_to(tg_module_buffer(m, name), TG_CPU));
        on = t && *(const uint8_t *)tg_data_ptr(t) == 1;
    }
    return on;
}

/* scale / zero_point := the observer's qparams, re-registered (same order, same
 * device) when the number of channels changes, as PyTorch's resize_. */
static tg_status update_qparams(tg_module *self, tg_tensor *scale, tg_tensor *zero_point) {
    tg_tensor *old = tg_module_buffer(self, "scale");
    tg_tensor *zp = tg_cast(zero_point, TG_INT32);
    if (!zp) return TG_ERROR;
    if (tg_numel(old) == tg_numel(scale)) {
        if (tg_copy_values_(old, scale)) return TG_ERROR;
        return tg_copy_values_(tg_module_buffer(self, "zero_point"), zp);
    }
    tg_device dev = tg_device_of(old);
    tg_tensor *s = tg_tensor_to(scale, dev), *z = tg_tensor_to(zp, dev);
    if (!s || !z || tg_unregister_buffer(self, "scale") || tg_unregister_buffer(self, "zero_point")) return TG_ERROR;
    if (tg_register_buffer(self, "scale", s)) return TG_ERROR;
    return tg_register_buffer(self, "zero_point", z);
}

static tg_tensor *fake_quantize_forward(tg_module *self, tg_tensor *x) {
    tg_module *obs = tg_module_child(self, "activation_post_process");
    tg_observer_info info;
    if (tg_observer_get_info(obs, &info)) return NULL;
    if (flag(self, "observer_enabled")) {
        tg_tensor *scale, *zp;
        bool prev = tg_set_grad_enabled(false);
        tg_status st = tg_forward(obs, tg_detach(x)) ? TG_OK : TG_ERROR;
        if (!st) st = tg_observer_calculate_qparams(obs, &scale, &zp);
        if (!st) st = update_qparams(self, scale, zp);
        tg_set_grad_enabled(prev);
        if (st) return NULL;
    }
    if (!flag(self, "fake_quant_enabled")) return tg_scope_track(tg_retain(x));
    tg_tensor *scale = tg_module_buffer(self, "scale"), *zp = tg_module_buffer(self, "zero_point");
    if (info.per_channel) {
        int axis = info.ch_axis < 0 ? info.ch_axis + tg_ndim(x) : info.ch_axis;
        return tg_fake_quantize_per_channel_affine(x, scale, zp, axis, info.quant_min, info.quant_max);
    }
    tg_tensor *s = tg_contiguous(tg_tensor_to(scale, TG_CPU)), *z = tg_contiguous(tg_tensor_to(zp, TG_CPU));
    if (!s || !z) return NULL;
    return tg_fake_quantize_per_tensor_affine(x, *(const float *)tg_data_ptr(s), *(const int32_t *)tg_data_ptr(z),
                                              info.quant_min, info.quant_max);
}

static void fake_quantize_repr(tg_module *self, char *buf, size_t size) {
    tg_observer_info info;
    if (tg_observer_get_info(tg_module_child(self, "activation_post_process"), &info)) return;
    snprintf(buf, size, "fake_quant_enabled=%d, observer_enabled=%d, quant_min=%lld, quant_max=%lld",
             flag(self, "fake_quant_enabled"), flag(self, "observer_enabled"), (long long)info.quant_min,
             (long long)info.quant_max);
}

static const tg_module_type fake_quantize_type = {
    .name = "FakeQuantize", .forward = fake_quantize_forward, .extra_repr = fake_quantize_repr};

bool tg_is_fake_quantize(tg_module *m) { return m && tg_module_type_of(m) == &fake_quantize_type; }

tg_module *tg_nn_fake_quantize(tg_module *observer) {
    if (!tg_is_observer(observer)) {
        const tg_module_type *t = observer ? tg_module_type_of(observer) : NULL;
        tg_error("tg_nn_fake_quantize: expected an observer, got %s", !observer      ? "NULL"
                                                                      : t && t->name ? t->name
                                                                                     : "Module");
        if (observer) tg_module_free(observer);
        return NULL;
    }
    tg_module *m = tg_module_new(&fake_quantize_type, 0);
    tg_status st = TG_ERROR;
    TG_SCOPE {
        uint8_t one = 1;
        float s = 1.0f;
        int32_t z = 0;
        st = tg_register_buffer(m, "fake_quant_enabled", tg_from_data(&one, TG_SHAPE(1), (tg_opts){.dtype = TG_UINT8}));
        if (!st)
            st = tg_register_buffer(m, "observer_enabled",
                                    tg_from_data(&one, TG_SHAPE(1), (tg_opts){.dtype = TG_UINT8}));
        if (!st) st = tg_register_buffer(m, "scale", tg_from_data(&s, TG_SHAPE(1), (tg_opts){.dtype = TG_FLOAT32}));
        if (!st) st = tg_register_buffer(m, "zero_point", tg_from_data(&z, TG_SHAPE(1), (tg_opts){.dtype = TG_INT32}));
    }
    if (!st) {
        st = tg_register_module(m, "activation_post_process", observer);
    } else {
        tg_module_free(observer);
    }
    if (st) {
        tg_module_free(m);
        return NULL;
    }
    return m;
}

static int set_flag(tg_module *m, const char *name, bool enabled) {
    int changed = 0;
    if (tg_is_fake_quantize(m)) {
        tg_fill_values_(tg_module_buffer(m, name), enabled ? 1 : 0);
        changed++;
    }
    for (int i = 0; i < tg_module_num_children(m); i++)
        changed += set_flag(tg_module_child_at(m, i, NULL), name, enabled);
    return changed;
}

int tg_fake_quant_enable_observer(tg_module *model, bool enabled) {
    return model ? set_flag(model, "observer_enabled", enabled) : 0;
}
int tg_fake_quant_enable_fake_quant(tg_module *model, bool enabled) {
    return model ? set_flag(model, "fake_quant_enabled", enabled) : 0;
}
