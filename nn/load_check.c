/* Load-time checks of quantisation parameters and prune masks (nn/load_check.h): a
 * checkpoint whose int8 scale was 0, -1 or NaN, whose zero point was out of range or
 * whose mask held 0.5 used to load and run (issue 35). */
#include "nn/load_check.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/scope.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

/* The module holding key's member, and the member's name, or NULL. */
static tg_module *owner_of(tg_module *m, const char *key, const char **member) {
    const char *at = key;
    for (const char *dot; m && (dot = strchr(at, '.')); at = dot + 1) {
        char part[128];
        size_t n = (size_t)(dot - at);
        if (n >= sizeof part) return NULL;
        memcpy(part, at, n);
        part[n] = '\0';
        m = tg_module_child(m, part);
    }
    *member = at;
    return m;
}

static bool type_is(tg_module *m, const char *const *names) {
    const tg_module_type *t = tg_module_type_of(m);
    for (; t && t->name && *names; names++)
        if (!strcmp(t->name, *names)) return true;
    return false;
}

static const char *const DYNAMIC[] = {"DynamicQuantizedLinear", NULL};
static const char *const STATIC[] = {
    "QuantizedConv2d", "QuantizedConvReLU2d", "QuantizedLinear", "QuantizedLinearReLU", "Quantize", "DeQuantize", NULL};

enum rule { NONE, SCALE, ZP_ZERO, ZP_QUINT8, MASK };

static bool breaks(enum rule r, double v) {
    switch (r) {
    case SCALE: return !(isfinite(v) && v > 0);
    case ZP_ZERO: return v != 0;
    case ZP_QUINT8: return !(v >= 0 && v <= 255);
    case MASK: return v != 0 && v != 1;
    default: return false;
    }
}

tg_status tg_check_loaded_value(const char *op, const char *what, tg_module *model, const char *key, tg_tensor *t) {
    const char *member = NULL;
    tg_module *owner = owner_of(model, key, &member);
    if (!owner) return TG_OK;
    enum rule r = NONE;
    const char *why = "";
    bool dynamic = type_is(owner, DYNAMIC), fixed = type_is(owner, STATIC);
    if ((dynamic || fixed) &&
        (!strcmp(member, "scale") || !strcmp(member, "weight_scale") || !strcmp(member, "input_scale"))) {
        r = SCALE, why = "a quantisation scale must be finite and positive";
    } else if (dynamic && !strcmp(member, "zero_point")) {
        r = ZP_ZERO, why = "the int8 weights are symmetric (qint8, zero point 0)";
    } else if (fixed && (!strcmp(member, "zero_point") || !strcmp(member, "input_zero_point"))) {
        r = ZP_QUINT8, why = "a quint8 zero point must be within [0, 255]";
    } else {
        size_t n = strlen(member);
        if (n > 5 && !strcmp(member + n - 5, "_mask") && n < 120) {
            char orig[128];
            memcpy(orig, member, n - 5);
            strcpy(orig + n - 5, "_orig");
            if (tg_module_param(owner, orig)) r = MASK, why = "a prune mask holds only 0 and 1";
        }
    }
    if (r == NONE) return TG_OK;
    tg_status st = TG_OK;
    TG_SCOPE {
        tg_tensor *d = tg_contiguous(tg_cast(tg_tensor_to(t, TG_CPU), TG_FLOAT64));
        if (!d) {
            st = TG_ERROR;
        } else {
            const double *v = tg_data_ptr(d);
            for (int64_t i = 0, n = tg_numel(d); i < n && !st; i++)
                if (breaks(r, v[i]))
                    st = tg_error("%s: %s: \"%s\" holds %g at flat index %lld: %s, module unchanged", op, what, key,
                                  v[i], (long long)i, why);
        }
    }
    return st;
}
