/* Padding (see ops/pad.h): constant mode is narrow + cat with filled blocks; the
 * other modes are one index_select per padded dim, its index (output position ->
 * input position) built on the host. */
#include "ops/pad.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/shape.h"

static const char *mode_name(tg_pad_mode m) {
    switch (m) {
    case TG_PAD_CONSTANT: return "constant";
    case TG_PAD_REFLECT: return "reflect";
    case TG_PAD_REPLICATE: return "replicate";
    default: return "circular";
    }
}

/* Input position of output position i - before (i.e. of p in [-before, n + after)). */
static int64_t source_of(tg_pad_mode mode, int64_t p, int64_t n) {
    switch (mode) {
    case TG_PAD_REFLECT: return p < 0 ? -p : p >= n ? 2 * (n - 1) - p : p;
    case TG_PAD_REPLICATE: return p < 0 ? 0 : p >= n ? n - 1 : p;
    default: return ((p % n) + n) % n; /* circular */
    }
}

/* One dim of the non-constant modes: index_select with the mapped positions. Circular
 * mode crops the negative pads first and wraps within what is left (PyTorch's
 * _pad_circular: on [0,1,2,3,4], (-1, 2) gives [1,2,3,4,1,2]); reflect and replicate
 * crop by their mapping. */
static tg_tensor *pad_by_index(tg_tensor *y, int d, int64_t before, int64_t after, tg_pad_mode mode) {
    int64_t n = y->shape.dims[d], len = n + before + after, first = 0;
    if (mode == TG_PAD_CIRCULAR) {
        first = before < 0 ? -before : 0;
        n -= first + (after < 0 ? -after : 0);
        before = before > 0 ? before : 0;
    }
    int64_t *index = malloc((size_t)(len > 0 ? len : 1) * sizeof *index);
    TG_ASSERT(index != NULL);
    for (int64_t i = 0; i < len; i++) index[i] = first + source_of(mode, i - before, n);
    tg_tensor *idx = tg_from_data(index, TG_SHAPE(len), (tg_opts){.dtype = TG_INT64});
    free(index);
    return tg_index_select(y, d, tg_tensor_to(idx, y->storage->device));
}

/* One dim of constant mode: negative pads narrow, positive ones cat filled blocks. */
static tg_tensor *pad_constant(tg_tensor *y, int d, int64_t before, int64_t after, double value) {
    int64_t n = y->shape.dims[d];
    if (before < 0 || after < 0) {
        int64_t start = before < 0 ? -before : 0, stop = after < 0 ? n + after : n;
        y = tg_narrow(y, d, start, stop - start);
    }
    if (!y || (before <= 0 && after <= 0)) return y;
    tg_tensor *parts[3];
    int count = 0;
    tg_opts o = {.dtype = y->dtype, .device = y->storage->device};
    tg_shape block = y->shape;
    if (before > 0) block.dims[d] = before, parts[count++] = tg_full(block, value, o);
    parts[count++] = y;
    if (after > 0) block.dims[d] = after, parts[count++] = tg_full(block, value, o);
    return tg_cat(parts, count, d);
}

tg_tensor *tg_pad(tg_tensor *x, const int64_t *pad, int count, tg_pad_mode mode, double value) {
    const char *op = "tg_pad";
    if (tg_unusable_(x)) return tg_error_unusable_input(op, x, 0), NULL;
    char xs[128];
    tg_shape_str(x->shape, xs, sizeof xs);
    if (mode < TG_PAD_CONSTANT || mode > TG_PAD_CIRCULAR) return tg_error("%s: unknown mode %d", op, (int)mode), NULL;
    if (count < 0 || (count > 0 && !pad) || count % 2)
        return tg_error("%s: padding length must be divisible by 2, got %d", op, count), NULL;
    int dims = count / 2, nd = x->shape.ndim;
    if (dims > nd) return tg_error("%s: padding length %d too large for input %s", op, count, xs), NULL;
    if (mode != TG_PAD_CONSTANT) {
        if (value != 0)
            return tg_error("%s: padding mode %s does not take a value (got %g)", op, mode_name(mode), value), NULL;
        if (dims < 1 || dims > 3 || (nd != dims + 1 && nd != dims + 2))
            return tg_error("%s: %s padding of the last %d dims needs an input of %d or %d dims, got %s", op,
                            mode_name(mode), dims, dims + 1, dims + 2, xs),
                   NULL;
    }
    for (int k = 0; k < dims; k++) {
        int d = nd - 1 - k;
        int64_t n = x->shape.dims[d], before = pad[2 * k], after = pad[2 * k + 1], out;
        bool ok = !__builtin_add_overflow(n, before, &out) && !__builtin_add_overflow(out, after, &out) && out >= 0;
        const char *why = "would give a negative size";
        if (ok && mode == TG_PAD_REFLECT && !(before < n && after < n))
            ok = false, why = "must be less than the dim's size for reflect";
        /* Against the size left after cropping: PyTorch checks the uncropped size and then
         * copies from elements it has not written yet (e.g. 5 with (-3, 4)). */
        int64_t kept = n - (before < 0 ? -before : 0) - (after < 0 ? -after : 0);
        if (ok && mode == TG_PAD_CIRCULAR && !(before <= kept && after <= kept))
            ok = false, why = kept < n ? "would wrap around more than once (pads larger than what cropping leaves)"
                                       : "would wrap around more than once";
        if (ok && mode != TG_PAD_CONSTANT && n == 0 && out > 0) ok = false, why = "cannot fill an empty dim";
        if (!ok)
            return tg_error("%s: padding (%lld, %lld) of dim %d of input %s %s", op, (long long)before,
                            (long long)after, d, xs, why),
                   NULL;
    }
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *y = x;
        for (int k = 0; y && k < dims; k++) {
            int d = nd - 1 - k;
            int64_t before = pad[2 * k], after = pad[2 * k + 1];
            if (before == 0 && after == 0) continue;
            y = mode == TG_PAD_CONSTANT ? pad_constant(y, d, before, after, value)
                                        : pad_by_index(y, d, before, after, mode);
        }
        if (y) result = tg_scope_return(y == x ? tg_clone(x) : y); /* always a copy, as PyTorch */
    }
    return result;
}
