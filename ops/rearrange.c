/* movedim, unflatten, repeat, tile, roll, repeat_interleave: compositions of
 * differentiable views and copies (see ops/rearrange.h). */
#include "ops/rearrange.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "ops/slice.h"

tg_tensor *tg_movedim(tg_tensor *t, int source, int destination) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_movedim", t, 0), NULL;
    int nd = t->shape.ndim, s = tg_wrap_dim(source, nd), d = tg_wrap_dim(destination, nd);
    if (s < 0 || d < 0)
        return tg_error("tg_movedim: source %d / destination %d out of range for a tensor with %d dims", source,
                        destination, nd),
               NULL;
    int order[TG_MAX_DIMS], rest = 0;
    for (int i = 0; i < nd; i++) {
        if (i == d) continue;
        if (rest == s) rest++; /* skip the moved dim among the others */
        order[i] = rest++;
    }
    if (nd > 0) order[d] = s;
    return tg_permute(t, order);
}

tg_tensor *tg_unflatten(tg_tensor *t, int dim, const int64_t *sizes, int count) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_unflatten", t, 0), NULL;
    int nd = t->shape.ndim, d = tg_wrap_dim(dim, nd);
    if (d < 0 || nd == 0) return tg_error("tg_unflatten: dim %d out of range for a tensor with %d dims", dim, nd), NULL;
    if (count < 1 || !sizes || nd - 1 + count > TG_MAX_DIMS)
        return tg_error("tg_unflatten: %d sizes for a tensor with %d dims (at most %d dims in all)", count, nd,
                        TG_MAX_DIMS),
               NULL;
    int64_t known = 1, infer = -1;
    for (int i = 0; i < count; i++) {
        if (sizes[i] == -1 && infer < 0) infer = i;
        else if (sizes[i] < 0 || __builtin_mul_overflow(known, sizes[i], &known)) known = -1;
    }
    int64_t size = t->shape.dims[d];
    bool ok = known >= 0 && (infer >= 0 ? known != 0 && size % known == 0 : known == size);
    if (!ok) {
        char list[200] = "";
        int used = 0;
        for (int i = 0; i < count && used < (int)sizeof list - 24; i++)
            used += snprintf(list + used, sizeof list - (size_t)used, "%s%lld", i ? ", " : "", (long long)sizes[i]);
        return tg_error("tg_unflatten: sizes [%s] do not multiply to %lld, the size of dim %d", list, (long long)size,
                        d),
               NULL;
    }
    tg_shape shape = {0};
    for (int i = 0; i < d; i++) shape.dims[shape.ndim++] = t->shape.dims[i];
    for (int i = 0; i < count; i++) shape.dims[shape.ndim++] = i == infer ? size / known : sizes[i];
    for (int i = d + 1; i < nd; i++) shape.dims[shape.ndim++] = t->shape.dims[i];
    return tg_view(t, shape);
}

/* More dims than the interleaved view allows: one dim at a time, as a cat of copies. */
static tg_tensor *repeat_by_cat(const char *op, tg_tensor *t, const int64_t *repeats, int count) {
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_shape padded = {0};
        int lead = count - t->shape.ndim;
        for (int i = 0; i < count; i++) padded.dims[padded.ndim++] = i < lead ? 1 : t->shape.dims[i - lead];
        tg_tensor *x = tg_reshape(t, padded);
        for (int i = 0; x && i < count; i++) {
            if (repeats[i] == 1) continue;
            if (repeats[i] > INT32_MAX) {
                tg_error("%s: repeat %lld is too large", op, (long long)repeats[i]);
                x = NULL;
                break;
            }
            int n = (int)repeats[i];
            tg_tensor **copies = malloc((size_t)(n > 0 ? n : 1) * sizeof *copies);
            TG_ASSERT(copies != NULL);
            for (int k = 0; k < n; k++) copies[k] = x;
            x = n > 0 ? tg_cat(copies, n, i) : tg_narrow(x, i, 0, 0);
            free(copies);
        }
        if (x) result = tg_scope_return(tg_same_storage(x, t) ? tg_clone(x) : x); /* always a copy */
    }
    return result;
}

/* repeat: t viewed as [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1, ...] and
 * reshaped (a copy) to [r0 * s0, r1 * s1, ...]; the gradient sums the copies back. */
static tg_tensor *repeat(const char *op, tg_tensor *t, const int64_t *repeats, int count) {
    int nd = t->shape.ndim, lead = count - nd;
    if (!repeats || lead < 0 || count > TG_MAX_DIMS)
        return tg_error("%s: %d repeats for a tensor with %d dims (at least %d, at most %d)", op, count, nd, nd,
                        TG_MAX_DIMS),
               NULL;
    for (int i = 0; i < count; i++)
        if (repeats[i] < 0) return tg_error("%s: negative repeat %lld", op, (long long)repeats[i]), NULL;
    if (2 * count > TG_MAX_DIMS) return repeat_by_cat(op, t, repeats, count);
    tg_shape v = {0}, e = {0}, r = {0};
    for (int i = 0; i < count; i++) {
        int64_t s = i < lead ? 1 : t->shape.dims[i - lead];
        v.dims[v.ndim++] = 1, v.dims[v.ndim++] = s;
        e.dims[e.ndim++] = repeats[i], e.dims[e.ndim++] = s;
        if (__builtin_mul_overflow(s, repeats[i], &r.dims[r.ndim++]))
            return tg_error("%s: repeating %lld elements %lld times overflows", op, (long long)s,
                            (long long)repeats[i]),
                   NULL;
    }
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *x = tg_reshape(tg_expand(tg_reshape(t, v), e), r);
        if (x) result = tg_scope_return(tg_same_storage(x, t) ? tg_clone(x) : x); /* always a copy */
    }
    return result;
}

tg_tensor *tg_repeat(tg_tensor *t, const int64_t *repeats, int count) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_repeat", t, 0), NULL;
    return repeat("tg_repeat", t, repeats, count);
}

tg_tensor *tg_tile(tg_tensor *t, const int64_t *reps, int count) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_tile", t, 0), NULL;
    if (count < 0 || (count > 0 && !reps) || count > TG_MAX_DIMS)
        return tg_error("tg_tile: %d reps (at most %d)", count, TG_MAX_DIMS), NULL;
    int64_t padded[TG_MAX_DIMS];
    int n = count > t->shape.ndim ? count : t->shape.ndim, lead = n - count;
    for (int i = 0; i < n; i++) padded[i] = i < lead ? 1 : reps[i - lead];
    return repeat("tg_tile", t, padded, n);
}

tg_tensor *tg_roll(tg_tensor *t, int64_t shift, int dim) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_roll", t, 0), NULL;
    int d = t->shape.ndim > 0 ? tg_wrap_dim(dim, t->shape.ndim) : -1;
    if (d < 0) return tg_error("tg_roll: dim %d out of range for a tensor with %d dims", dim, t->shape.ndim), NULL;
    int64_t size = t->shape.dims[d];
    int64_t s = size ? ((shift % size) + size) % size : 0;
    if (s == 0) return tg_clone(t);
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *parts[2] = {tg_slice(t, d, size - s, TG_SLICE_END, 1), tg_slice(t, d, 0, size - s, 1)};
        if (parts[0] && parts[1]) result = tg_scope_return(tg_cat(parts, 2, d));
    }
    return result;
}

static int interleave_dim(const char *op, tg_tensor *t, int dim) {
    int d = t->shape.ndim > 0 ? tg_wrap_dim(dim, t->shape.ndim) : -1;
    if (d < 0) tg_error("%s: dim %d out of range for a tensor with %d dims", op, dim, t->shape.ndim);
    return d;
}

/* t [..., n, ...] viewed as [..., n, 1, ...], expanded to [..., n, r, ...], reshaped
 * (a copy) to [..., n r, ...]; the gradient sums the copies back. */
tg_tensor *tg_repeat_interleave(tg_tensor *t, int64_t repeats, int dim) {
    const char *op = "tg_repeat_interleave";
    if (tg_unusable_(t)) return tg_error_unusable_input(op, t, 0), NULL;
    int d = interleave_dim(op, t, dim);
    if (d < 0) return NULL;
    if (repeats < 0) return tg_error("%s: repeats can not be negative, got %lld", op, (long long)repeats), NULL;
    if (t->shape.ndim >= TG_MAX_DIMS)
        return tg_error("%s: a tensor with %d dims has no room for the repeat dim (at most %d)", op, t->shape.ndim,
                        TG_MAX_DIMS),
               NULL;
    tg_shape out = t->shape, wide = {0};
    if (__builtin_mul_overflow(t->shape.dims[d], repeats, &out.dims[d]))
        return tg_error("%s: repeating %lld elements %lld times overflows", op, (long long)t->shape.dims[d],
                        (long long)repeats),
               NULL;
    for (int i = 0; i < t->shape.ndim; i++) {
        wide.dims[wide.ndim++] = t->shape.dims[i];
        if (i == d) wide.dims[wide.ndim++] = repeats;
    }
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *x = tg_reshape(tg_expand(tg_unsqueeze(t, d + 1), wide), out);
        if (x) result = tg_scope_return(tg_same_storage(x, t) ? tg_clone(x) : x); /* always a copy */
    }
    return result;
}

/* The index k repeated repeats[k] times (repeats read on the host), then index_select. */
tg_tensor *tg_repeat_interleave_tensor(tg_tensor *t, tg_tensor *repeats, int dim) {
    const char *op = "tg_repeat_interleave_tensor";
    if (tg_unusable_(t)) return tg_error_unusable_input(op, t, 0), NULL;
    if (tg_unusable_(repeats)) return tg_error_unusable_input(op, repeats, 1), NULL;
    int d = interleave_dim(op, t, dim);
    if (d < 0) return NULL;
    int64_t n = t->shape.dims[d], count = tg_numel(repeats);
    if ((repeats->dtype != TG_INT64 && repeats->dtype != TG_INT32) || repeats->shape.ndim > 1)
        return tg_error("%s: repeats must be a 0-dim or 1-D int64 or int32 tensor, got %s with %d dims", op,
                        tg_dtype_name(repeats->dtype), repeats->shape.ndim),
               NULL;
    if (count != n && count != 1)
        return tg_error("%s: repeats must have the same size as input along dim: %lld repeats for size %lld", op,
                        (long long)count, (long long)n),
               NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *host = tg_contiguous(tg_tensor_to(tg_cast(repeats, TG_INT64), TG_CPU));
        const int64_t *r = host ? tg_data_ptr(host) : NULL;
        int64_t total = 0;
        bool ok = r != NULL;
        for (int64_t k = 0; ok && k < n; k++) {
            int64_t rk = r[count == 1 ? 0 : k];
            if (rk < 0) ok = !tg_error("%s: repeats can not be negative, got %lld", op, (long long)rk);
            else if (__builtin_add_overflow(total, rk, &total)) ok = !tg_error("%s: the repeats overflow", op);
        }
        int64_t *index = ok ? malloc((size_t)(total > 0 ? total : 1) * sizeof *index) : NULL;
        if (ok) {
            TG_ASSERT(index != NULL);
            for (int64_t k = 0, at = 0; k < n; k++)
                for (int64_t j = 0; j < r[count == 1 ? 0 : k]; j++) index[at++] = k;
            tg_tensor *idx =
                tg_tensor_to(tg_from_data(index, TG_SHAPE(total), (tg_opts){.dtype = TG_INT64}), t->storage->device);
            free(index);
            result = tg_scope_return(tg_index_select(t, d, idx));
        }
    }
    return result;
}
