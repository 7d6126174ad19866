/* The in-place rules (see ops/inplace.h), tg_copy_ and tg_fill_. */
#include "ops/inplace.h"

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/shape.h"

tg_status tg_inplace_check(const char *op, tg_tensor *target, tg_tensor **sources, int num_sources, bool *record) {
    if (tg_unusable_(target)) return tg_error_unusable_input(op, target, 0);
    for (int i = 0; i < num_sources; i++)
        if (tg_unusable_(sources[i])) return tg_error_unusable_input(op, sources[i], i + 1);
    bool grad_mode = tg_is_grad_enabled();
    if (grad_mode && target->requires_grad && !target->grad_fn)
        return tg_error("%s: a leaf Variable that requires grad is being used in an in-place operation "
                        "(write under TG_NO_GRAD, as an optimizer step does)",
                        op);
    char buf[128];
    if (tg_has_internal_overlap(target))
        return tg_error("%s: unsupported operation: more than one element of the written-to tensor (shape "
                        "%s, a stride of 0) refers to a single memory location; clone it first",
                        op, tg_shape_str(target->shape, buf, sizeof buf));
    bool any_requires_grad = target->requires_grad;
    for (int i = 0; i < num_sources; i++) any_requires_grad |= sources[i]->requires_grad;
    *record = grad_mode && any_requires_grad;
    for (int i = 0; i < num_sources; i++) {
        tg_overlap o = tg_overlap_of(target, sources[i]);
        if (o == TG_OVERLAP_PARTIAL)
            return tg_error("%s: unsupported operation: some elements of the input tensor (input %d) and the "
                            "written-to tensor refer to a single memory location; clone it first",
                            op, i + 1);
        /* Read what the write would change from a copy: recorded, the source keeps its
         * graph (x *= x must see the old x twice); unrecorded, interleaved layouts. */
        if (o != TG_OVERLAP_NONE && (*record || o == TG_OVERLAP_MAYBE)) {
            sources[i] = *record ? tg_clone(sources[i]) : tg_clone_values(sources[i]);
            if (!sources[i]) return TG_ERROR;
        }
    }
    /* The target's new history would not reach the tensors that share its storage
     * (PyTorch rebuilds theirs through CopySlices; tapegrad has none), so refuse. */
    if (*record && target->storage->refcount > 1)
        return tg_error("%s: cannot record an in-place write into a tensor of shape %s that shares its "
                        "storage with another tensor (a view, the base of a view, or a detached or "
                        "saved alias): the other's gradient would be wrong; write into a tensor of its "
                        "own (tg_clone), or under TG_NO_GRAD",
                        op, tg_shape_str(target->shape, buf, sizeof buf));
    return TG_OK;
}

tg_status tg_inplace_commit(tg_tensor *target, tg_tensor *result) {
    if (!result) return TG_ERROR;
    if (tg_copy_values_(target, result)) return TG_ERROR;
    tg_node *old = target->grad_fn;
    bool retains = old && old->retains_grad[target->output_nr] == target; /* tg_retain_grad moves along */
    if (retains) old->retains_grad[target->output_nr] = NULL;
    if (retains && result->grad_fn) result->grad_fn->retains_grad[result->output_nr] = target;
    if (result->grad_fn) tg_node_retain(result->grad_fn);
    target->grad_fn = result->grad_fn;
    target->output_nr = result->output_nr;
    target->requires_grad = result->requires_grad;
    tg_node_release(old);
    return TG_OK;
}

/* ---- copy_ ---- */

static tg_tensor *copy_forward(tg_ctx *ctx, tg_tensor *const *in) {
    (void)ctx;
    tg_tensor *out = tg_empty(in[0]->shape, (tg_opts){.dtype = in[0]->dtype, .device = in[0]->storage->device});
    return out && !tg_copy_values_(out, in[1]) ? out : NULL;
}

static void copy_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    if (tg_ctx_needs_input_grad(ctx, 0)) grad_in[0] = tg_zeros_like(g);
    /* The engine casts to src's dtype and sums a broadcast; the device is ours. */
    if (tg_ctx_needs_input_grad(ctx, 1)) grad_in[1] = tg_tensor_to(g, ctx->node->input_meta[1].device);
}

static const tg_function copy_fn = {.name = "copy_",
                                    .num_inputs = 2,
                                    .forward = copy_forward,
                                    .backward = copy_backward,
                                    .low_precision = TG_LOW_PRECISION_NATIVE,
                                    .autocast = TG_AUTOCAST_NONE};

tg_status tg_copy_(tg_tensor *dst, tg_tensor *src) {
    if (tg_unusable_(dst)) return tg_error_unusable_input("tg_copy_", dst, 0);
    if (tg_unusable_(src)) return tg_error_unusable_input("tg_copy_", src, 1);
    /* Shapes, dtypes and devices are checked by tg_copy_values_, which both paths reach. */
    if (src->requires_grad && tg_is_grad_enabled() && !tg_dtype_is_floating(dst->dtype))
        return tg_error("tg_copy_: a %s destination cannot receive a gradient from a source that requires grad",
                        tg_dtype_name(dst->dtype));
    tg_status status = TG_ERROR;
    TG_SCOPE {
        bool record = false;
        if (!tg_inplace_check("tg_copy_", dst, &src, 1, &record))
            status = record ? tg_inplace_commit(dst, tg_apply(&copy_fn, (tg_tensor *[]){dst, src}))
                            : tg_copy_values_(dst, src);
    }
    return status;
}

/* ---- fill_, and the random fills' recorded form ---- */

typedef struct {
    double value;
    tg_tensor *values; /* tg_inplace_overwrite's new values, read by forward only */
} overwrite_args;

tg_tensor *tg_overwrite_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const overwrite_args *a = tg_ctx_attrs(ctx);
    if (a->values) return tg_clone_values(a->values);
    tg_tensor *out = tg_empty(in[0]->shape, (tg_opts){.dtype = in[0]->dtype, .device = in[0]->storage->device});
    return out && !tg_fill_values_(out, a->value) ? out : NULL;
}

void tg_overwrite_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    (void)ctx;
    grad_in[0] = tg_zeros_like(g); /* the old value no longer matters */
}

static const tg_function fill_fn = TG_OVERWRITE_FUNCTION("fill_");

tg_status tg_inplace_overwrite(const tg_function *fn, tg_tensor *target, tg_tensor *values) {
    overwrite_args a = {0, values};
    return tg_inplace_commit(target, tg_apply_args(fn, &target, &a, sizeof a));
}

tg_status tg_fill_(tg_tensor *t, double value) {
    bool record = false;
    if (tg_inplace_check("tg_fill_", t, NULL, 0, &record) || tg_check_fill_value("tg_fill_", t->dtype, value))
        return TG_ERROR;
    if (!record) return tg_fill_values_(t, value);
    tg_status status = TG_ERROR;
    overwrite_args a = {value, NULL};
    TG_SCOPE { status = tg_inplace_commit(t, tg_apply_args(&fill_fn, &t, &a, sizeof a)); }
    return status;
}
