/* Autocast state (per thread) and the dtype choices of autograd/autocast.h. */
#include "autograd/autocast_impl.h"

#include "core/error.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"

static _Thread_local tg_autocast_state state[TG_NUM_DEVICE_KINDS];
static _Thread_local bool dtype_set[TG_NUM_DEVICE_KINDS];
static _Thread_local int suspended;
static _Thread_local int enabled_count; /* device kinds with autocast on */

static bool valid_kind(tg_device_kind d) { return (unsigned)d < TG_NUM_DEVICE_KINDS; }

/* PyTorch 1.13's defaults: bfloat16 on the CPU, float16 on CUDA. */
static tg_dtype default_dtype(tg_device_kind d) { return d == TG_DEVICE_CPU ? TG_BFLOAT16 : TG_FLOAT16; }

bool tg_is_autocast_enabled(tg_device_kind device) { return valid_kind(device) && state[device].enabled; }

tg_dtype tg_get_autocast_dtype(tg_device_kind device) {
    if (!valid_kind(device)) return TG_BFLOAT16;
    return dtype_set[device] ? state[device].dtype : default_dtype(device);
}

void tg_restore_autocast(tg_device_kind device, tg_autocast_state previous) {
    if (!valid_kind(device)) return;
    enabled_count += (int)previous.enabled - (int)state[device].enabled;
    state[device] = previous;
    dtype_set[device] = true;
}

tg_autocast_state tg_set_autocast(tg_device_kind device, bool enabled, tg_dtype dtype) {
    if (!valid_kind(device)) {
        tg_error("tg_set_autocast: device kind %d does not exist", (int)device);
        return (tg_autocast_state){false, TG_BFLOAT16};
    }
    tg_autocast_state previous = {state[device].enabled, tg_get_autocast_dtype(device)};
    bool usable = device == TG_DEVICE_CPU ? dtype == TG_BFLOAT16 : tg_dtype_is_low_precision(dtype);
    if (enabled && !usable) {
        tg_error("tg_set_autocast: %s autocast supports %s, not %s; autocast is off in this region",
                 device == TG_DEVICE_CPU ? "CPU" : "CUDA",
                 device == TG_DEVICE_CPU ? "bfloat16" : "float16 and bfloat16", tg_dtype_name(dtype));
        enabled = false;
    }
    tg_restore_autocast(device, (tg_autocast_state){enabled, usable ? dtype : previous.dtype});
    return previous;
}

bool tg_autocast_active(void) { return enabled_count > 0 && suspended == 0; }
void tg_autocast_suspend(void) { suspended++; }
void tg_autocast_resume(void) { suspended--; }

/* PyTorch's is_eligible: a floating tensor, not float64, on a device kind with autocast on. */
static bool eligible(const tg_tensor *t) {
    return t && tg_dtype_is_floating(t->dtype) && t->dtype != TG_FLOAT64 &&
           state[t->storage->device.kind].enabled;
}

int tg_autocast_target(tg_autocast_policy policy, const tg_tensor *t) {
    if (!eligible(t)) return -1;
    tg_device_kind kind = t->storage->device.kind;
    tg_dtype to = t->dtype;
    switch (policy) {
    case TG_AUTOCAST_LOWER: to = state[kind].dtype; break;
    case TG_AUTOCAST_FLOAT32: to = TG_FLOAT32; break;
    case TG_AUTOCAST_FLOAT32_ON_CUDA: to = kind == TG_DEVICE_CUDA ? TG_FLOAT32 : t->dtype; break;
    default: break;
    }
    return to == t->dtype ? -1 : (int)to;
}

tg_status tg_autocast_inputs(tg_autocast_policy policy, tg_tensor **ts, int n) {
    if (!tg_autocast_active()) return TG_OK;
    for (int i = 0; i < n; i++) {
        int to = ts[i] ? tg_autocast_target(policy, ts[i]) : -1;
        if (to < 0) continue;
        ts[i] = tg_cast(ts[i], (tg_dtype)to);
        if (!ts[i]) return TG_ERROR;
    }
    return TG_OK;
}
