/* Autocast state (per thread) and the dtype choices of autograd/autocast.h. */
#include "autograd/autocast_impl.h"

#include <stdlib.h>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"

static _Thread_local tg_autocast_state state[TG_NUM_DEVICE_KINDS];
static _Thread_local bool dtype_set[TG_NUM_DEVICE_KINDS];
static _Thread_local int suspended;
static _Thread_local int enabled_count; /* device kinds with autocast on */
static _Thread_local int nesting;       /* open regions (tg_set_autocast .. tg_restore_autocast) */
static _Thread_local bool cache_disabled;

/* PyTorch's cast cache (autocast_mode.cpp, cached_casts): the lower-precision cast of a
 * float32 leaf that requires grad, made once and reused while the outermost region is
 * open, so a weight used by several ops is cast once and its gradient flows through
 * one cast. Entries own a reference to the leaf (so its address cannot be reused) and
 * to the cast. */
typedef struct {
    tg_tensor *leaf, *cast;
    uint64_t version; /* the leaf's version when cast */
} cast_entry;
static _Thread_local cast_entry *cache;
static _Thread_local int cache_len, cache_cap;

static void clear_cache(void) {
    for (int i = 0; i < cache_len; i++) {
        tg_release(cache[i].cast);
        tg_release(cache[i].leaf);
    }
    free(cache);
    cache = NULL;
    cache_len = cache_cap = 0;
}

static bool valid_kind(tg_device_kind d) { return (unsigned)d < TG_NUM_DEVICE_KINDS; }

/* PyTorch 1.13's defaults: bfloat16 on the CPU, float16 on CUDA. */
static tg_dtype default_dtype(tg_device_kind d) { return d == TG_DEVICE_CPU ? TG_BFLOAT16 : TG_FLOAT16; }

bool tg_is_autocast_enabled(tg_device_kind device) { return valid_kind(device) && state[device].enabled; }

tg_dtype tg_get_autocast_dtype(tg_device_kind device) {
    if (!valid_kind(device)) return TG_BFLOAT16;
    return dtype_set[device] ? state[device].dtype : default_dtype(device);
}

static void apply_state(tg_device_kind device, tg_autocast_state previous) {
    enabled_count += (int)previous.enabled - (int)state[device].enabled;
    state[device] = previous;
    dtype_set[device] = true;
}

void tg_restore_autocast(tg_device_kind device, tg_autocast_state previous) {
    if (nesting > 0 && --nesting == 0) clear_cache(); /* torch: the outermost region's exit */
    if (valid_kind(device)) apply_state(device, previous);
}

tg_autocast_state tg_set_autocast(tg_device_kind device, bool enabled, tg_dtype dtype) {
    nesting++; /* paired with tg_restore_autocast, whatever happens below */
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
    apply_state(device, (tg_autocast_state){enabled, usable ? dtype : previous.dtype});
    return previous;
}

bool tg_autocast_active(void) { return enabled_count > 0 && suspended == 0; }
void tg_autocast_suspend(void) { suspended++; }
void tg_autocast_resume(void) { suspended--; }

/* PyTorch's is_eligible: a floating tensor, not float64, on a device kind with autocast on. */
static bool eligible(const tg_tensor *t) {
    return t && tg_dtype_is_floating(t->dtype) && t->dtype != TG_FLOAT64 && state[t->storage->device.kind].enabled;
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

bool tg_is_autocast_cache_enabled(void) { return !cache_disabled; }

bool tg_set_autocast_cache_enabled(bool enabled) {
    bool previous = !cache_disabled;
    cache_disabled = !enabled;
    return previous;
}

/* PyTorch 1.13's can_try_cache: a cast to the device's autocast dtype of a float32 leaf
 * that requires grad (tapegrad cannot tell a leaf view from a leaf; both are cached). */
static bool cacheable(const tg_tensor *t, tg_dtype to) {
    return !cache_disabled && nesting > 0 && t->dtype == TG_FLOAT32 && t->requires_grad && !t->grad_fn &&
           to == state[t->storage->device.kind].dtype;
}

tg_tensor *tg_autocast_cast(tg_tensor *t, tg_dtype to) {
    if (!cacheable(t, to)) return tg_cast(t, to);
    cast_entry *e = NULL;
    for (int i = 0; i < cache_len && !e; i++)
        if (cache[i].leaf == t && cache[i].cast->dtype == to) e = &cache[i];
    /* Beyond PyTorch, which would reuse them: a cast made before an in-place write to the
     * leaf (an optimizer step inside the region), or under no_grad when grad is now on
     * (it has no graph to carry the gradient), is made again. */
    if (e && e->version == tg_version(t) && (e->cast->grad_fn || !tg_is_grad_enabled())) return e->cast;
    tg_tensor *cast = tg_cast(t, to);
    if (!cast) return NULL;
    if (!e) {
        if (cache_len == cache_cap) {
            int cap = cache_cap ? 2 * cache_cap : 16;
            cast_entry *grown = realloc(cache, (size_t)cap * sizeof *grown);
            if (!grown) return cast; /* uncached, still correct */
            cache = grown;
            cache_cap = cap;
        }
        e = &cache[cache_len++];
        e->leaf = tg_retain(t);
    } else {
        tg_release(e->cast);
    }
    e->cast = tg_retain(cast); /* the cache's reference; the scope owns the returned one */
    e->version = tg_version(t);
    return cast;
}

tg_status tg_autocast_inputs(tg_autocast_policy policy, tg_tensor **ts, int n) {
    if (!tg_autocast_active()) return TG_OK;
    for (int i = 0; i < n; i++) {
        int to = ts[i] ? tg_autocast_target(policy, ts[i]) : -1;
        if (to < 0) continue;
        ts[i] = tg_autocast_cast(ts[i], (tg_dtype)to);
        if (!ts[i]) return TG_ERROR;
    }
    return TG_OK;
}
