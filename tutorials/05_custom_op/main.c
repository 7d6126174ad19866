/* Lesson 05: your own op. bias_swish(x, b, beta) = z * sigmoid(beta * z), z = x + b,
 * with a CPU kernel (a C loop), a CUDA kernel (swish.cu, when CUDA is compiled in),
 * a backward formula, registered through tg_function + tg_apply_args, proved with
 * gradcheck and gradgradcheck, then used inside a user-defined module and trained.
 * README.md walks through this file. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tapegrad.h"
#include "tutorials/common/common.h"
#ifdef TUT_WITH_CUDA
#include "tutorials/05_custom_op/swish_cuda.h"
#endif

/* ---- 1. the kernels ---- */

/* The op's non-tensor argument, copied into the graph node by tg_apply_args. */
typedef struct {
    double beta;
} swish_args;

/* CPU: contiguous x, y [rows, cols], b [cols]; one version per float type. */
static void bias_swish_cpu_f32(const float *x, const float *b, float *y, int64_t rows, int64_t cols, float beta) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            float z = x[r * cols + c] + b[c];
            y[r * cols + c] = z / (1.0f + expf(-beta * z));
        }
}
static void bias_swish_cpu_f64(const double *x, const double *b, double *y, int64_t rows, int64_t cols, double beta) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            double z = x[r * cols + c] + b[c];
            y[r * cols + c] = z / (1.0 + exp(-beta * z));
        }
}

/* ---- 2. forward: check, pick the kernel, save what backward needs ---- */

static tg_tensor *bias_swish_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const swish_args *args = tg_ctx_attrs(ctx);
    tg_tensor *x = in[0], *b = in[1];
    char xs[64], bs[64];
    if (tg_ndim(x) != 2 || tg_ndim(b) != 1 || tg_size(b, 0) != tg_size(x, 1)) {
        tg_error("bias_swish: x must be [N, F] and b [F], got %s and %s", tg_shape_str(tg_shape_of(x), xs, sizeof xs),
                 tg_shape_str(tg_shape_of(b), bs, sizeof bs));
        return NULL;
    }
    tg_dtype dt = tg_dtype_of(x);
    if (dt != tg_dtype_of(b) || (dt != TG_FLOAT32 && dt != TG_FLOAT64)) {
        tg_error("bias_swish: x and b must both be float32 or float64, got %s and %s", tg_dtype_name(dt),
                 tg_dtype_name(tg_dtype_of(b)));
        return NULL;
    }
    if (!tg_device_equal(tg_device_of(x), tg_device_of(b))) {
        tg_error("bias_swish: x and b are on different devices");
        return NULL;
    }
    tg_ctx_save(ctx, x); /* backward recomputes z = x + b from these */
    tg_ctx_save(ctx, b);
    /* Kernels want contiguous memory; temporaries made here die with forward's scope. */
    x = tg_contiguous(x);
    b = tg_contiguous(b);
    tg_tensor *y = tg_empty_like(x);
    int64_t rows = tg_size(x, 0), cols = tg_size(x, 1);
    tg_device device = tg_device_of(x);
    if (device.kind == TG_DEVICE_CPU) {
        if (dt == TG_FLOAT32)
            bias_swish_cpu_f32(tg_data_ptr(x), tg_data_ptr(b), tg_data_ptr(y), rows, cols, (float)args->beta);
        else bias_swish_cpu_f64(tg_data_ptr(x), tg_data_ptr(b), tg_data_ptr(y), rows, cols, args->beta);
    } else {
#ifdef TUT_WITH_CUDA
        char err[256];
        /* On tapegrad's stream, so it runs after the kernels that made x and before those that read y. */
        if (tut_bias_swish_cuda(tg_cuda_stream(device.index), tg_data_ptr(x), tg_data_ptr(b), tg_data_ptr(y), rows,
                                cols, args->beta, dt == TG_FLOAT64, err, sizeof err)) {
            tg_error("%s", err);
            return NULL;
        }
#else
        tg_error("bias_swish: this build has no CUDA kernel for it (built without CUDA)");
        return NULL;
#endif
    }
    return y;
}

/* ---- 3. backward: with ops, so it runs on any device and is itself differentiable ----
 * d/dz [z s(bz)] = s + b z s (1 - s), s = sigmoid(beta z); db sums dz over the rows. */
static void bias_swish_backward(tg_ctx *ctx, tg_tensor *grad, tg_tensor **grad_in) {
    double beta = ((const swish_args *)tg_ctx_attrs(ctx))->beta;
    tg_tensor *x = tg_ctx_saved(ctx, 0), *b = tg_ctx_saved(ctx, 1);
    tg_tensor *z = tg_add(x, b);
    tg_tensor *s = tg_sigmoid(tg_mul_scalar(z, beta));
    tg_tensor *dz = tg_mul(grad, tg_add(s, tg_mul(tg_mul_scalar(z, beta), tg_mul(s, tg_rsub_scalar(s, 1.0)))));
    if (tg_ctx_needs_input_grad(ctx, 0)) grad_in[0] = dz;
    if (tg_ctx_needs_input_grad(ctx, 1)) grad_in[1] = tg_sum_dim(dz, 0, false); /* [N, F] -> [F] */
}

/* ---- 4. registration: a tg_function and a friendly wrapper ---- */

/* For tg_onnx_export (--export-onnx): the op as ONNX nodes, z = Add(x, b), then
 * Mul(z, Sigmoid(Mul(z, beta))); without it the export names bias_swish as an op with
 * no ONNX mapping. onnx/graph.h has the calls. */
static tg_status bias_swish_onnx(tg_onnx_op *op) {
    const swish_args *args = tg_onnx_attrs(op);
    const char *z = tg_onnx_value(op), *bz = tg_onnx_value(op), *s = tg_onnx_value(op);
    const char *beta = tg_onnx_const_scalar(op, tg_dtype_of(tg_onnx_input(op, 0)), args->beta);
    bool ok =
        tg_onnx_add_node(op, "Add", 2, (const char *[]){tg_onnx_input_name(op, 0), tg_onnx_input_name(op, 1)}, 1, &z) &&
        tg_onnx_add_node(op, "Mul", 2, (const char *[]){z, beta}, 1, &bz) && /* beta NULL: refused there */
        tg_onnx_add_node(op, "Sigmoid", 1, &bz, 1, &s) &&
        tg_onnx_add_node(op, "Mul", 2, (const char *[]){z, s}, 1, (const char *[]){tg_onnx_output_name(op, 0)});
    return ok ? TG_OK : TG_ERROR;
}

static const tg_function bias_swish_fn = {.name = "bias_swish",
                                          .num_inputs = 2,
                                          .forward = bias_swish_forward,
                                          .backward = bias_swish_backward,
                                          .onnx = bias_swish_onnx};

/* bias_swish(x [N, F], b [F], beta): a new reference, recorded for autograd like any op. */
static tg_tensor *bias_swish(tg_tensor *x, tg_tensor *b, double beta) {
    swish_args args = {beta};
    return tg_apply_args(&bias_swish_fn, (tg_tensor *[]){x, b}, &args, sizeof args);
}

/* ---- 5. proof: gradcheck and gradgradcheck in float64 ---- */

static tg_tensor *check_fn(tg_tensor *const *in, void *user) { return bias_swish(in[0], in[1], *(double *)user); }

static void prove(tg_device device) {
    char where[16];
    tg_device_str(device, where);
    double beta = 1.5;
    TG_SCOPE {
        tg_opts f64 = {.dtype = TG_FLOAT64, .device = device};
        tg_tensor *x = tg_requires_grad_(tg_randn(TG_SHAPE(4, 5), f64), true);
        tg_tensor *b = tg_requires_grad_(tg_randn(TG_SHAPE(5), f64), true);
        /* The same maths with built-in ops, as a reference for the forward. */
        tg_tensor *z = tg_add(x, b);
        tg_tensor *ref = tg_mul(z, tg_sigmoid(tg_mul_scalar(z, beta)));
        double diff = tg_item(tg_max(tg_abs(tg_sub(bias_swish(x, b, beta), ref))));
        printf("forward on %s: max |bias_swish - z*sigmoid(beta z)| = %.3g\n", where, diff);

        tg_gradcheck_opts opts = {.user = &beta};
        tg_status first = tg_gradcheck(check_fn, 2, (tg_tensor *[]){x, b}, &opts);
        printf("gradcheck: %s on %s (the 20 x 25 Jacobian entries vs central differences)\n",
               first == TG_OK ? "ok" : "FAILED", where);
        tg_gradcheck_opts opts2 = {.user = &beta};
        tg_status second = tg_gradgradcheck(check_fn, 2, (tg_tensor *[]){x, b}, &opts2);
        printf("gradgradcheck: %s on %s (the backward's own gradient, with create_graph)\n",
               second == TG_OK ? "ok" : "FAILED", where);
        if (first != TG_OK || second != TG_OK) tg_error("bias_swish: the gradient checks failed");
    }
}

/* ---- 6. a user module that uses the op ----
 * SwishMLP: fc1 (no bias) -> bias_swish(., bias1, beta) -> fc2. */
typedef struct {
    double beta;
} swish_mlp_state;

static tg_tensor *swish_mlp_forward(tg_module *self, tg_tensor *x) {
    swish_mlp_state *s = tg_module_state(self);
    tg_tensor *h = tg_forward(tg_module_child(self, "fc1"), x);
    h = bias_swish(h, tg_module_param(self, "bias1"), s->beta);
    return tg_forward(tg_module_child(self, "fc2"), h);
}

static void swish_mlp_repr(tg_module *self, char *buf, size_t size) {
    snprintf(buf, size, "beta=%g", ((swish_mlp_state *)tg_module_state(self))->beta);
}

static const tg_module_type swish_mlp_type = {
    .name = "SwishMLP", .forward = swish_mlp_forward, .extra_repr = swish_mlp_repr};

static tg_module *swish_mlp_new(int64_t in, int64_t hidden, int64_t out, double beta) {
    tg_module *m = tg_module_new(&swish_mlp_type, sizeof(swish_mlp_state));
    ((swish_mlp_state *)tg_module_state(m))->beta = beta;
    tg_register_module(m, "fc1", tg_nn_linear(in, hidden, (tg_linear_opts){.no_bias = true}));
    TG_SCOPE { tg_register_parameter(m, "bias1", tg_zeros(TG_SHAPE(hidden), (tg_opts){0})); }
    tg_register_module(m, "fc2", tg_nn_linear(hidden, out, (tg_linear_opts){0}));
    return m;
}

int main(int argc, char **argv) {
    tut_args args = {.options = TUT_OPT_TRAINING, .epochs = 1, .batch_size = 64, .lr = 1e-3, .seed = 1};
    tut_parse_args(argc, argv, "Lesson 05: a custom op (bias + swish) with CPU and CUDA kernels, checked and trained.",
                   &args, NULL, 0);
    tg_manual_seed(args.seed);
#ifdef TUT_WITH_CUDA
    printf("CUDA kernel: compiled in (%s)%s\n", tg_build_info(),
           tg_cuda_available() ? "" : "; no GPU here, so only the CPU kernel runs");
#else
    printf("CUDA kernel: not compiled in (CPU-only build); the CPU kernel runs\n");
#endif

    printf("\n== the op, checked ==\n");
    prove(TG_CPU);
    if (args.device.kind == TG_DEVICE_CUDA) prove(args.device);

    printf("\n== the op inside a model ==\n");
    tut_data data = tut_load_data(&args, false);
    tg_manual_seed(args.seed);
    tg_module *model = swish_mlp_new(784, 128, 10, 1.0);
    tg_to(model, args.device);
    tg_module_print(model, TG_SHAPE(args.batch_size, 784), stdout);
    tg_optim *opt = tg_adam(model, (tg_adam_opts){.lr = args.lr});
    tg_loader *loader = tg_loader_new(
        data.train_x, data.train_y,
        (tg_loader_opts){.batch_size = args.batch_size, .shuffle = true, .seed = args.seed, .device = args.device});
    int64_t step = 0;
    /* --max-steps may end the run before --epochs: no epoch starts without a step left */
    for (int epoch = 0; epoch < args.epochs && !(args.max_steps && step >= args.max_steps); epoch++) {
        tut_progress bar;
        tut_progress_begin(&bar, epoch, args.epochs, tg_loader_num_batches(loader), args.batch_size);
        tg_tensor *x, *y;
        TG_FOR_EACH_BATCH(loader, x, y) {
            if (args.max_steps && step >= args.max_steps) break; /* the batch's scope ends on the way out */
            tg_tensor *loss = tg_cross_entropy(tg_forward(model, x), y);
            if (step == 0) printf("the loss's graph goes through: %s <- ... <- bias_swish\n", tg_grad_fn_name(loss));
            tg_backward(loss); /* runs bias_swish_backward among the built-in backwards */
            tg_optim_step(opt);
            tg_optim_zero_grad(opt);
            tut_progress_update(&bar, tg_item(loss));
            step++;
        }
        double train_loss = tut_progress_end(&bar);
        tut_eval test = tut_evaluate(model, data.test_x, data.test_y, 1000, args.device);
        printf("epoch %d: train loss %.4f, test loss %.4f, test accuracy %.2f%%\n", epoch + 1, train_loss, test.loss,
               test.accuracy);
    }
    /* --export-onnx: the model with bias_swish written by its mapping (bias_swish_onnx) */
    int exported = tut_export_onnx(model, TG_SHAPE(1, 784), TG_FLOAT32, &args, NULL);
    tg_loader_free(loader);
    tg_optim_free(opt);
    tg_module_free(model);
    tut_data_free(&data);
    printf("live tensors at exit: %ld\n", tg_live_tensors());
    return exported;
}
