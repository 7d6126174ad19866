/* State dicts and checkpoints (see io/checkpoint.h). */
#include "io/checkpoint.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "autograd/grad_mode.h"
#include "core/scope.h"
#include "nn/load_check.h"
#include "nn/module.h"
#include "ops/random_impl.h"
#include "ops/inplace.h"
#include "optim/optim.h"
#include "optim/grad_scaler_state.h"
#include "optim/schedule_state.h"

tg_tensor_map *tg_module_state_map(tg_module *m) {
    if (!m) return tg_error("tg_module_state_map: module is NULL"), NULL;
    int count = 0;
    const tg_named_tensor *sd = tg_state_dict(m, &count);
    tg_tensor_map *map = tg_tensor_map_new();
    for (int i = 0; map && i < count; i++) {
        if (tg_tensor_map_set(map, sd[i].name, sd[i].tensor)) {
            tg_tensor_map_free(map);
            return NULL;
        }
    }
    return map;
}

/* A report of load problems, grouped by kind, in one bounded message. */
typedef struct {
    char text[4][640]; /* missing, unexpected, size, dtype */
    size_t len[4];
    int count[4];
} problems;

static void note(problems *p, int kind, const char *fmt, ...) {
    p->count[kind]++;
    size_t room = sizeof p->text[kind] - p->len[kind];
    if (room <= 1) return;
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(p->text[kind] + p->len[kind], room, fmt, args);
    va_end(args);
    if (n > 0) p->len[kind] += (size_t)n < room ? (size_t)n : room - 1;
}

tg_status tg_module_load_state_map(tg_module *m, const tg_tensor_map *state, bool strict, const char *what) {
    const char *op = "tg_load_state_dict";
    if (!m || !state) return tg_error("%s: %s is NULL", op, m ? "state" : "module");
    if (!what) what = "state dict";
    int count = 0;
    const tg_named_tensor *sd = tg_state_dict(m, &count);
    problems p;
    memset(p.len, 0, sizeof p.len);
    memset(p.count, 0, sizeof p.count);
    for (int k = 0; k < 4; k++) p.text[k][0] = '\0';
    enum { MISSING, UNEXPECTED, SIZE, DTYPE };

    for (int i = 0; i < count; i++) {
        tg_tensor *src = tg_tensor_map_get(state, sd[i].name);
        if (!src) {
            if (strict) note(&p, MISSING, "%s\"%s\"", p.count[MISSING] ? ", " : "", sd[i].name);
            continue;
        }
        tg_shape a = tg_shape_of(src), b = tg_shape_of(sd[i].tensor);
        if (!tg_shape_equal(a, b)) {
            char sa[96], sb[96];
            note(&p, SIZE, "%s\"%s\": %s in the file, %s in the module", p.count[SIZE] ? "; " : "", sd[i].name,
                 tg_shape_str(a, sa, sizeof sa), tg_shape_str(b, sb, sizeof sb));
        }
        if (tg_dtype_of(src) != tg_dtype_of(sd[i].tensor))
            note(&p, DTYPE, "%s\"%s\": %s in the file, %s in the module", p.count[DTYPE] ? "; " : "", sd[i].name,
                 tg_dtype_name(tg_dtype_of(src)), tg_dtype_name(tg_dtype_of(sd[i].tensor)));
    }
    if (strict) {
        for (int64_t j = 0; j < tg_tensor_map_size(state); j++) {
            const char *name = tg_tensor_map_name(state, j);
            bool known = false;
            for (int i = 0; i < count && !known; i++) known = strcmp(sd[i].name, name) == 0;
            if (!known) note(&p, UNEXPECTED, "%s\"%s\"", p.count[UNEXPECTED] ? ", " : "", name);
        }
    }
    int total = p.count[0] + p.count[1] + p.count[2] + p.count[3];
    if (total) {
        static const char *const heads[4] = {"missing keys", "unexpected keys", "size mismatch", "dtype mismatch"};
        char msg[1024];
        int len =
            snprintf(msg, sizeof msg, "%s: %s: %d problem%s, module unchanged", op, what, total, total == 1 ? "" : "s");
        for (int k = 0; k < 4; k++) {
            if (!p.count[k] || len < 0 || (size_t)len >= sizeof msg) continue;
            len += snprintf(msg + len, sizeof msg - (size_t)len, "; %s (%d): %s", heads[k], p.count[k], p.text[k]);
        }
        return tg_error("%s", msg);
    }
    /* Values the modules cannot run with (scales, zero points, masks), before any copy. */
    for (int i = 0; i < count; i++) {
        tg_tensor *src = tg_tensor_map_get(state, sd[i].name);
        if (src && tg_check_loaded_value(op, what, m, sd[i].name, src)) return TG_ERROR;
    }
    tg_status status = TG_OK;
    /* As PyTorch's param.copy_ under no_grad: crosses devices, bumps the version. */
    bool prev = tg_set_grad_enabled(false);
    for (int i = 0; i < count && !status; i++) {
        tg_tensor *src = tg_tensor_map_get(state, sd[i].name);
        if (src) status = tg_copy_(sd[i].tensor, src);
    }
    tg_set_grad_enabled(prev);
    return status;
}

tg_status tg_save_state_dict(tg_module *m, const char *path) {
    tg_tensor_map *map = tg_module_state_map(m);
    if (!map) return TG_ERROR;
    tg_status s = tg_safetensors_save(map, path);
    tg_tensor_map_free(map);
    return s;
}

tg_status tg_load_state_dict(tg_module *m, const char *path, bool strict) {
    if (!m) return tg_error("tg_load_state_dict: module is NULL");
    tg_tensor_map *map = tg_safetensors_load(path);
    if (!map) return TG_ERROR;
    tg_status s = tg_module_load_state_map(m, map, strict, path);
    tg_tensor_map_free(map);
    return s;
}

/* ---- checkpoints ---- */

static tg_status set_meta_i64(tg_tensor_map *m, const char *key, long long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    return tg_tensor_map_set_metadata(m, key, buf);
}

static tg_status set_meta_u64(tg_tensor_map *m, const char *key, unsigned long long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", v);
    return tg_tensor_map_set_metadata(m, key, buf);
}

/* The GradScaler made on opt, if any (scaler.state_dict()): "scaler.scale" (the
 * float32 scale, exactly), ".growth_tracker", ".growth_factor", ".backoff_factor",
 * ".growth_interval", ".enabled", and (since the non-finite limit) ".nonfinite_steps"
 * and ".max_consecutive_nonfinite", optional on load. */
static tg_status save_scaler(tg_tensor_map *ck, tg_optim *opt) {
    const tg_grad_scaler *sc = tg_optim_scaler_(opt);
    if (!sc) return TG_OK;
    tg_grad_scaler_opts o = tg_grad_scaler_get_opts(sc);
    char v[40];
    snprintf(v, sizeof v, "%.17g", tg_grad_scaler_is_enabled(sc) ? tg_grad_scaler_get_scale(sc) : o.init_scale);
    tg_status s = tg_tensor_map_set_metadata(ck, "scaler.scale", v);
    if (!s) s = set_meta_i64(ck, "scaler.growth_tracker", (long long)tg_grad_scaler_growth_tracker(sc));
    snprintf(v, sizeof v, "%.17g", o.growth_factor);
    if (!s) s = tg_tensor_map_set_metadata(ck, "scaler.growth_factor", v);
    snprintf(v, sizeof v, "%.17g", o.backoff_factor);
    if (!s) s = tg_tensor_map_set_metadata(ck, "scaler.backoff_factor", v);
    if (!s) s = set_meta_i64(ck, "scaler.growth_interval", o.growth_interval);
    if (!s) s = set_meta_i64(ck, "scaler.enabled", tg_grad_scaler_is_enabled(sc));
    if (!s) s = set_meta_i64(ck, "scaler.nonfinite_steps", (long long)tg_grad_scaler_nonfinite_steps(sc));
    if (!s) s = set_meta_i64(ck, "scaler.max_consecutive_nonfinite", o.max_consecutive_nonfinite);
    return s;
}

/* The state of every scheduler made on opt: "sched.count" and, per scheduler i,
 * "sched.<i>.name", ".settings", ".last_epoch", ".step_count", ".groups" and per group g
 * ".group.<g>.base_lr" and ".group.<g>.last_lr" (%.17g: doubles round-trip exactly). */
static tg_status save_schedulers(tg_tensor_map *ck, tg_optim *opt) {
    int n = tg_optim_num_schedulers_(opt);
    tg_status s = set_meta_i64(ck, "sched.count", n);
    for (int i = 0; i < n && !s; i++) {
        const tg_lr_scheduler *sched = tg_optim_scheduler_(opt, i);
        tg_scheduler_state_ st = tg_scheduler_get_state_(sched);
        char key[96], value[1024];
        snprintf(key, sizeof key, "sched.%d.name", i);
        s = tg_tensor_map_set_metadata(ck, key, st.name);
        tg_scheduler_settings_(sched, value, sizeof value);
        snprintf(key, sizeof key, "sched.%d.settings", i);
        if (!s) s = tg_tensor_map_set_metadata(ck, key, value);
        snprintf(key, sizeof key, "sched.%d.last_epoch", i);
        if (!s) s = set_meta_i64(ck, key, st.last_epoch);
        snprintf(key, sizeof key, "sched.%d.step_count", i);
        if (!s) s = set_meta_i64(ck, key, st.step_count);
        snprintf(key, sizeof key, "sched.%d.groups", i);
        if (!s) s = set_meta_i64(ck, key, st.num_groups);
        for (int g = 0; g < st.num_groups && !s; g++) {
            snprintf(key, sizeof key, "sched.%d.group.%d.base_lr", i, g);
            snprintf(value, sizeof value, "%.17g", st.base_lrs[g]);
            s = tg_tensor_map_set_metadata(ck, key, value);
            snprintf(key, sizeof key, "sched.%d.group.%d.last_lr", i, g);
            snprintf(value, sizeof value, "%.17g", st.last_lrs[g]);
            if (!s) s = tg_tensor_map_set_metadata(ck, key, value);
        }
    }
    return s;
}

tg_status tg_save_checkpoint(const char *path, tg_module *model, tg_optim *opt, tg_checkpoint_info info) {
    const char *op = "tg_save_checkpoint";
    if (!model) return tg_error("%s: model is NULL", op);
    tg_tensor_map *ck = tg_tensor_map_new();
    tg_tensor_map *state = tg_module_state_map(model);
    tg_status s = ck && state ? TG_OK : TG_ERROR;
    if (!s) s = tg_tensor_map_merge(ck, state, "model.");
    if (!s && opt) {
        for (int i = 0; i < tg_optim_state_count(opt) && !s; i++) {
            const char *name;
            tg_tensor *t;
            s = tg_optim_state_get(opt, i, &name, &t);
            if (s) break;
            char full[512];
            snprintf(full, sizeof full, "optim.%s", name);
            s = tg_tensor_map_set(ck, full, t);
        }
        if (!s) s = tg_tensor_map_set_metadata(ck, "optim.name", tg_optim_name(opt));
        char lr[40], key[64];
        snprintf(lr, sizeof lr, "%.17g", tg_optim_get_lr(opt)); /* group 0's, as files before groups */
        if (!s) s = tg_tensor_map_set_metadata(ck, "optim.lr", lr);
        if (!s) s = set_meta_i64(ck, "optim.groups", tg_optim_num_groups(opt));
        for (int g = 0; g < tg_optim_num_groups(opt) && !s; g++) {
            snprintf(key, sizeof key, "optim.group.%d.params", g);
            s = set_meta_i64(ck, key, tg_optim_group_num_params(opt, g));
            snprintf(key, sizeof key, "optim.group.%d.lr", g);
            snprintf(lr, sizeof lr, "%.17g", tg_optim_get_group_lr(opt, g));
            if (!s) s = tg_tensor_map_set_metadata(ck, key, lr);
            /* what OneCycleLR cycles: SGD/RMSprop momentum, Adam/AdamW beta1 */
            snprintf(key, sizeof key, "optim.group.%d.momentum", g);
            snprintf(lr, sizeof lr, "%.17g", tg_optim_get_group_momentum(opt, g));
            if (!s) s = tg_tensor_map_set_metadata(ck, key, lr);
        }
        if (!s) s = save_schedulers(ck, opt);
        if (!s) s = save_scaler(ck, opt);
    }
    tg_rng_state rng = tg_rng_get_state();
    if (!s) s = tg_tensor_map_set_metadata(ck, "tapegrad.checkpoint", "1");
    if (!s) s = set_meta_i64(ck, "step", (long long)info.step);
    if (!s) s = set_meta_i64(ck, "epoch", (long long)info.epoch);
    if (!s) s = set_meta_u64(ck, "rng.seed", (unsigned long long)rng.seed);
    if (!s) s = set_meta_u64(ck, "rng.offset", (unsigned long long)rng.offset);
    TG_SCOPE { /* the whole state: the CPU generator's mt19937 words */
        if (!s) s = tg_tensor_map_set(ck, "rng.state", tg_get_rng_state());
    }
    if (!s) s = tg_safetensors_save(ck, path);
    tg_tensor_map_free(state);
    tg_tensor_map_free(ck);
    return s;
}

/* Parses a decimal metadata value; false (with an error) when absent or malformed. */
static bool meta_number(const char *op, const char *path, const tg_tensor_map *m, const char *key, bool is_signed,
                        uint64_t *out) {
    const char *v = tg_tensor_map_metadata(m, key);
    char *end = NULL;
    if (v && *v) {
        *out = is_signed ? (uint64_t)strtoll(v, &end, 10) : strtoull(v, &end, 10);
        if (end && *end == '\0') return true;
    }
    tg_error("%s: %s: metadata \"%s\" is %s", op, path, key,
             v ? "not a decimal integer" : "missing (not a tapegrad checkpoint?)");
    return false;
}

/* Parses a metadata value written with %.17g; false (with an error) when absent or malformed. */
static bool meta_double(const char *op, const char *path, const tg_tensor_map *m, const char *key, double *out) {
    const char *v = tg_tensor_map_metadata(m, key);
    char *end = NULL;
    if (v && *v) {
        *out = strtod(v, &end);
        if (end && *end == '\0') return true;
    }
    tg_error("%s: %s: metadata \"%s\" is %s", op, path, key, v ? "not a number" : "missing");
    return false;
}

/* A GradScaler's state read from a checkpoint. */
typedef struct {
    double scale;
    uint64_t growth_tracker, enabled, interval, nonfinite_steps, max_nonfinite;
    tg_grad_scaler_opts opts;
} saved_scaler;

/* Reads the state of the GradScaler made on opt (none: nothing to read, true); false
 * with an error when the file has none or another kind (enabled / disabled). */
static bool read_scaler(const char *op, const char *path, const tg_tensor_map *ck, tg_optim *opt, saved_scaler *out) {
    const tg_grad_scaler *sc = tg_optim_scaler_(opt);
    if (!sc) return true;
    if (!tg_tensor_map_metadata(ck, "scaler.scale"))
        return tg_error("%s: %s holds no GradScaler state (saved without one, or by an older tapegrad), but a "
                        "GradScaler was made on the optimizer (%s)",
                        op, path, tg_optim_name(opt)),
               false;
    if (!meta_double(op, path, ck, "scaler.scale", &out->scale) ||
        !meta_number(op, path, ck, "scaler.growth_tracker", false, &out->growth_tracker) ||
        !meta_double(op, path, ck, "scaler.growth_factor", &out->opts.growth_factor) ||
        !meta_double(op, path, ck, "scaler.backoff_factor", &out->opts.backoff_factor) ||
        !meta_number(op, path, ck, "scaler.growth_interval", false, &out->interval) ||
        !meta_number(op, path, ck, "scaler.enabled", false, &out->enabled))
        return false;
    /* Files from before the non-finite limit lack these two: the scaler's own limit, a count of 0. */
    out->max_nonfinite = (uint64_t)(int64_t)tg_grad_scaler_get_opts(sc).max_consecutive_nonfinite;
    if ((tg_tensor_map_metadata(ck, "scaler.nonfinite_steps") &&
         !meta_number(op, path, ck, "scaler.nonfinite_steps", false, &out->nonfinite_steps)) ||
        (tg_tensor_map_metadata(ck, "scaler.max_consecutive_nonfinite") &&
         !meta_number(op, path, ck, "scaler.max_consecutive_nonfinite", true, &out->max_nonfinite)))
        return false;
    if ((out->enabled != 0) != tg_grad_scaler_is_enabled(sc))
        return tg_error("%s: %s holds the state of a%s GradScaler, but the one made on the optimizer is %s", op, path,
                        out->enabled ? "n enabled" : " disabled", out->enabled ? "disabled" : "enabled"),
               false;
    out->opts.growth_interval = (int)out->interval;
    out->opts.max_consecutive_nonfinite = (int)(int64_t)out->max_nonfinite;
    out->opts.init_scale = tg_grad_scaler_get_opts(sc).init_scale;
    out->opts.disabled = !out->enabled;
    return true;
}

/* The per-group lrs of a file with "optim.groups" (its groups must match the
 * optimizer's, as torch.optim.Optimizer.load_state_dict checks), or NULL with
 * *has_groups false for a file written before parameter groups. NULL + error on a
 * mismatch. The caller frees the array. */
static double *read_group_lrs(const char *op, const char *path, const tg_tensor_map *ck, tg_optim *opt,
                              bool *has_groups) {
    *has_groups = tg_tensor_map_metadata(ck, "optim.groups") != NULL;
    if (!*has_groups) return NULL;
    uint64_t groups;
    if (!meta_number(op, path, ck, "optim.groups", true, &groups)) return NULL;
    if ((int64_t)groups != tg_optim_num_groups(opt)) {
        tg_error("%s: %s holds %lld parameter groups, but the optimizer (%s) has %d", op, path, (long long)groups,
                 tg_optim_name(opt), tg_optim_num_groups(opt));
        return NULL;
    }
    double *lrs = malloc((groups ? groups : 1) * sizeof(double));
    TG_ASSERT(lrs != NULL);
    for (int g = 0; g < (int)groups; g++) {
        char key[64];
        uint64_t count;
        snprintf(key, sizeof key, "optim.group.%d.params", g);
        if (!meta_number(op, path, ck, key, true, &count)) goto fail;
        if ((int64_t)count != tg_optim_group_num_params(opt, g)) {
            tg_error("%s: %s: parameter group %d has %lld parameters in the file, %d in the optimizer (%s)", op, path,
                     g, (long long)count, tg_optim_group_num_params(opt, g), tg_optim_name(opt));
            goto fail;
        }
        snprintf(key, sizeof key, "optim.group.%d.lr", g);
        if (!meta_double(op, path, ck, key, &lrs[g])) goto fail;
    }
    return lrs;
fail:
    free(lrs);
    return NULL;
}

/* One scheduler's state read from a checkpoint, checked against the scheduler made
 * for the resumed run. */
typedef struct {
    int last_epoch, step_count;
    double *base_lrs, *last_lrs; /* one allocation */
} saved_sched;

/* Reads and checks the state of every scheduler made on opt (none: nothing to
 * restore; the file's, if any, is ignored). Returns the array (count
 * tg_optim_num_schedulers_) or NULL; *ok false with an error on a mismatch. */
static saved_sched *read_schedulers(const char *op, const char *path, const tg_tensor_map *ck, tg_optim *opt,
                                    bool *ok) {
    *ok = true;
    int n = tg_optim_num_schedulers_(opt);
    if (n == 0) return NULL;
    *ok = false;
    uint64_t count = 0;
    if (tg_tensor_map_metadata(ck, "sched.count") && !meta_number(op, path, ck, "sched.count", true, &count))
        return NULL;
    if (count == 0) {
        tg_error("%s: %s holds no scheduler state (saved without a scheduler, or by an older tapegrad), but %d "
                 "scheduler%s made on the optimizer (%s); resuming it from its first epoch would give other lrs",
                 op, path, n, n == 1 ? " was" : "s were", tg_optim_name(opt));
        return NULL;
    }
    if ((int64_t)count != n) {
        tg_error("%s: %s holds the state of %lld scheduler%s, but %d %s made on the optimizer", op, path,
                 (long long)count, count == 1 ? "" : "s", n, n == 1 ? "was" : "were");
        return NULL;
    }
    saved_sched *out = calloc((size_t)n, sizeof *out);
    TG_ASSERT(out != NULL);
    for (int i = 0; i < n; i++) {
        const tg_lr_scheduler *sched = tg_optim_scheduler_(opt, i);
        tg_scheduler_state_ st = tg_scheduler_get_state_(sched);
        char key[96], settings[1024];
        snprintf(key, sizeof key, "sched.%d.name", i);
        const char *name = tg_tensor_map_metadata(ck, key);
        if (!name || strcmp(name, st.name)) {
            tg_error("%s: %s: scheduler %d is %s in the file, %s here", op, path, i, name ? name : "(missing)",
                     st.name);
            goto fail;
        }
        snprintf(key, sizeof key, "sched.%d.settings", i);
        const char *saved_settings = tg_tensor_map_metadata(ck, key);
        tg_scheduler_settings_(sched, settings, sizeof settings);
        if (!saved_settings || strcmp(saved_settings, settings)) {
            tg_error("%s: %s: scheduler %d (%s) was made with %s in the file, %s here", op, path, i, st.name,
                     saved_settings ? saved_settings : "(missing)", settings);
            goto fail;
        }
        uint64_t v, groups;
        snprintf(key, sizeof key, "sched.%d.groups", i);
        if (!meta_number(op, path, ck, key, true, &groups)) goto fail;
        if ((int64_t)groups != st.num_groups) {
            tg_error("%s: %s: scheduler %d (%s) schedules %lld parameter groups in the file, %d here", op, path, i,
                     st.name, (long long)groups, st.num_groups);
            goto fail;
        }
        snprintf(key, sizeof key, "sched.%d.last_epoch", i);
        if (!meta_number(op, path, ck, key, true, &v)) goto fail;
        out[i].last_epoch = (int)(int64_t)v;
        snprintf(key, sizeof key, "sched.%d.step_count", i);
        if (!meta_number(op, path, ck, key, true, &v)) goto fail;
        out[i].step_count = (int)(int64_t)v;
        out[i].base_lrs = malloc((size_t)(groups ? 2 * groups : 1) * sizeof(double));
        TG_ASSERT(out[i].base_lrs != NULL);
        out[i].last_lrs = out[i].base_lrs + groups;
        for (int g = 0; g < (int)groups; g++) {
            snprintf(key, sizeof key, "sched.%d.group.%d.base_lr", i, g);
            if (!meta_double(op, path, ck, key, &out[i].base_lrs[g])) goto fail;
            snprintf(key, sizeof key, "sched.%d.group.%d.last_lr", i, g);
            if (!meta_double(op, path, ck, key, &out[i].last_lrs[g])) goto fail;
        }
    }
    *ok = true;
    return out;
fail:
    for (int i = 0; i < n; i++) free(out[i].base_lrs);
    free(out);
    return NULL;
}

/* The groups' saved momenta (beta1 for Adam) are checked here, before the model is changed,
 * by the optimizer's own rule: set, then put back. A value it refuses (a momentum of 1.9)
 * fails the load with the model untouched (found by tests/fuzz/checkpoint_fuzzer). */
static bool group_momenta_ok(const char *op, const char *path, tg_tensor_map *ck, tg_optim *opt) {
    for (int g = 0; g < tg_optim_num_groups(opt); g++) {
        char key[64];
        snprintf(key, sizeof key, "optim.group.%d.momentum", g);
        double momentum, old = tg_optim_get_group_momentum(opt, g);
        if (!tg_tensor_map_metadata(ck, key)) continue; /* absent in files from before it was saved */
        if (!meta_double(op, path, ck, key, &momentum)) return false;
        if (tg_optim_set_group_momentum(opt, g, momentum)) {
            char why[256];
            snprintf(why, sizeof why, "%s", tg_last_error());
            tg_error("%s: %s: the optimizer's parameter group %d: %s", op, path, g, why);
            return false;
        }
        tg_optim_set_group_momentum(opt, g, old);
    }
    return true;
}

tg_status tg_load_checkpoint(const char *path, tg_module *model, tg_optim *opt, tg_checkpoint_info *info) {
    const char *op = "tg_load_checkpoint";
    if (!model) return tg_error("%s: model is NULL", op);
    tg_tensor_map *ck = tg_safetensors_load(path);
    if (!ck) return TG_ERROR;
    tg_status s = TG_ERROR;
    uint64_t step, epoch, seed, offset;
    tg_tensor_map *model_state = NULL;
    double *group_lrs = NULL;
    bool has_groups = false;
    saved_sched *scheds = NULL;
    saved_scaler scaler = {0};
    const char *kind = tg_tensor_map_metadata(ck, "tapegrad.checkpoint");
    if (!kind || strcmp(kind, "1") != 0) {
        tg_error("%s: %s is not a tapegrad checkpoint (no \"tapegrad.checkpoint\" metadata; "
                 "a plain state dict loads with tg_load_state_dict)",
                 op, path);
        goto done;
    }
    if (!meta_number(op, path, ck, "step", true, &step) || !meta_number(op, path, ck, "epoch", true, &epoch) ||
        !meta_number(op, path, ck, "rng.seed", false, &seed) ||
        !meta_number(op, path, ck, "rng.offset", false, &offset))
        goto done;
    const char *saved_optim = tg_tensor_map_metadata(ck, "optim.name");
    if (opt) {
        if (!saved_optim) {
            tg_error("%s: %s has no optimizer state, but an optimizer (%s) was given", op, path, tg_optim_name(opt));
            goto done;
        }
        if (strcmp(saved_optim, tg_optim_name(opt)) != 0) {
            tg_error("%s: %s holds %s state, but the optimizer is %s", op, path, saved_optim, tg_optim_name(opt));
            goto done;
        }
        group_lrs = read_group_lrs(op, path, ck, opt, &has_groups);
        if (has_groups && !group_lrs) goto done;
        bool scheds_ok;
        scheds = read_schedulers(op, path, ck, opt, &scheds_ok);
        if (!scheds_ok || !read_scaler(op, path, ck, opt, &scaler)) goto done;
        if (has_groups && !group_momenta_ok(op, path, ck, opt)) goto done;
    }
    /* Checked here, before the model is changed; set at the end. */
    tg_tensor *rng = tg_tensor_map_get(ck, "rng.state");
    if (rng && tg_check_rng_state(rng)) goto done;
    model_state = tg_tensor_map_select(ck, "model.");
    if (!model_state || tg_module_load_state_map(model, model_state, true, path)) goto done;
    s = TG_OK;
    if (opt) {
        for (int64_t i = 0; i < tg_tensor_map_size(ck) && !s; i++) {
            const char *name = tg_tensor_map_name(ck, i);
            if (strncmp(name, "optim.", 6) == 0) s = tg_optim_state_set(opt, name + 6, tg_tensor_map_tensor(ck, i));
        }
        const char *lr = tg_tensor_map_metadata(ck, "optim.lr");
        if (!s && has_groups) {
            for (int g = 0; g < tg_optim_num_groups(opt) && !s; g++) {
                s = tg_optim_set_group_lr(opt, g, group_lrs[g]);
                char key[64];
                snprintf(key, sizeof key, "optim.group.%d.momentum", g);
                double momentum;
                if (!s && tg_tensor_map_metadata(ck, key)) /* absent in files from before it was saved */
                    s = meta_double(op, path, ck, key, &momentum) ? tg_optim_set_group_momentum(opt, g, momentum)
                                                                  : TG_ERROR;
            }
        } else if (!s && lr) {
            tg_optim_set_lr(opt, strtod(lr, NULL)); /* a file from before parameter groups: every group */
        }
        for (int i = 0; i < tg_optim_num_schedulers_(opt) && scheds && !s; i++)
            tg_scheduler_set_state_(tg_optim_scheduler_(opt, i), scheds[i].last_epoch, scheds[i].step_count,
                                    scheds[i].base_lrs, scheds[i].last_lrs);
        tg_grad_scaler *sc = tg_optim_scaler_(opt);
        if (!s && sc) s = tg_grad_scaler_set_state(sc, scaler.scale, (int64_t)scaler.growth_tracker, scaler.opts);
        if (!s && sc) tg_grad_scaler_set_nonfinite_steps_(sc, (int64_t)scaler.nonfinite_steps);
    }
    if (!s) {
        if (rng) {
            s = tg_set_rng_state(rng);
        } else { /* a file from before the CPU generator was mt19937: reseed */
            tg_manual_seed(seed);
            tg_rng_state r = tg_rng_get_state();
            r.offset = offset;
            tg_rng_set_state(r);
        }
    }
    if (!s) {
        if (info) *info = (tg_checkpoint_info){.step = (int64_t)step, .epoch = (int64_t)epoch};
    }
done:
    for (int i = 0; scheds && i < tg_optim_num_schedulers_(opt); i++) free(scheds[i].base_lrs);
    free(scheds);
    free(group_lrs);
    tg_tensor_map_free(model_state);
    tg_tensor_map_free(ck);
    return s;
}
