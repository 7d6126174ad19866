// A user's custom op, written exactly as outside code would: public header only.
#include <gtest/gtest.h>

#include <cmath>

#include "tapegrad.h"

namespace {

// swish(x) = x * sigmoid(x), with its own backward formula (DESIGN.md's example).
tg_tensor *swish_forward(tg_ctx *ctx, tg_tensor *const *in) {
    tg_ctx_save(ctx, in[0]);
    return tg_mul(in[0], tg_sigmoid(in[0]));
}
void swish_backward(tg_ctx *ctx, tg_tensor *grad, tg_tensor **grad_in) {
    tg_tensor *x = tg_ctx_saved(ctx, 0), *s = tg_sigmoid(x);
    grad_in[0] = tg_mul(grad, tg_add(s, tg_mul(x, tg_mul(s, tg_rsub_scalar(s, 1.0)))));
}
const tg_function swish = {.name = "swish",
                           .num_inputs = 1,
                           .forward = swish_forward,
                           .backward = swish_backward,
                           .num_outputs = 1,
                           .low_precision = TG_LOW_PRECISION_REFUSE,
                           .autocast = TG_AUTOCAST_NONE};

tg_tensor *swish_fn(tg_tensor *const *in, void *) { return tg_apply(&swish, in); }

// A custom op with its own CPU kernel (no ops inside forward) and a scalar argument.
typedef struct {
    double alpha;
} scaled_cube_args;
tg_tensor *scaled_cube_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const scaled_cube_args *a = (const scaled_cube_args *)tg_ctx_attrs(ctx);
    tg_tensor *x = tg_contiguous(in[0]);
    tg_tensor *out = tg_empty_like(x);
    const double *src = (const double *)tg_data_ptr(x);
    double *dst = (double *)tg_data_ptr(out);
    for (int64_t i = 0; i < tg_numel(x); i++) dst[i] = a->alpha * src[i] * src[i] * src[i];
    tg_ctx_save(ctx, in[0]);
    return out;
}
void scaled_cube_backward(tg_ctx *ctx, tg_tensor *grad, tg_tensor **grad_in) {
    const scaled_cube_args *a = (const scaled_cube_args *)tg_ctx_attrs(ctx);
    tg_tensor *x = tg_ctx_saved(ctx, 0);
    grad_in[0] = tg_mul(grad, tg_mul_scalar(tg_mul(x, x), 3 * a->alpha));
}
const tg_function scaled_cube = {.name = "scaled_cube",
                                 .num_inputs = 1,
                                 .forward = scaled_cube_forward,
                                 .backward = scaled_cube_backward,
                                 .num_outputs = 1,
                                 .low_precision = TG_LOW_PRECISION_REFUSE,
                                 .autocast = TG_AUTOCAST_NONE};
tg_tensor *scaled_cube_fn(tg_tensor *const *in, void *) {
    scaled_cube_args args = {0.5};
    return tg_apply_args(&scaled_cube, in, &args, sizeof args);
}

} // namespace

TEST(CustomOp, SwishPassesGradcheckToSecondOrder) {
    long live = tg_live_tensors();
    TG_SCOPE {
        double data[6] = {-2, -0.5, 0, 0.3, 1, 3};
        tg_tensor *x =
            tg_requires_grad_(tg_from_data(data, TG_SHAPE(2, 3), (tg_opts){TG_FLOAT64, TG_CPU, false}), true);
        tg_tensor *xt = tg_transpose(x, 0, 1);
        EXPECT_EQ(tg_gradcheck(swish_fn, 1, &x, nullptr), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradcheck(swish_fn, 1, &xt, nullptr), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(swish_fn, 1, &x, nullptr), TG_OK) << tg_last_error();
        tg_tensor *y = tg_apply(&swish, &x);
        EXPECT_STREQ(tg_grad_fn_name(y), "swish");
        EXPECT_NEAR(tg_item(tg_narrow(tg_flatten(y, 0, -1), 0, 4, 1)), 1.0 / (1.0 + std::exp(-1.0)), 1e-12);
    }
    EXPECT_EQ(tg_live_tensors(), live);
}

TEST(CustomOp, OwnKernelWithArgumentsPassesGradcheck) {
    long live = tg_live_tensors();
    TG_SCOPE {
        double data[4] = {-1.5, 0.2, 0.7, 2};
        tg_tensor *x = tg_requires_grad_(tg_from_data(data, TG_SHAPE(4), (tg_opts){TG_FLOAT64, TG_CPU, false}), true);
        EXPECT_EQ(tg_gradcheck(scaled_cube_fn, 1, &x, nullptr), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_gradgradcheck(scaled_cube_fn, 1, &x, nullptr), TG_OK) << tg_last_error();
    }
    EXPECT_EQ(tg_live_tensors(), live);
}
