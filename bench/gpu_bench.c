/* GPU benchmarks (twin: bench/gpu_bench_torch.py), run by tools/gpu_check.sh on a
 * machine with a CUDA device:
 *   matmul_4096       float32 GEMM n = 4096, TF32 off and on            TFLOP/s
 *   add_256M          c = a + b over 2^28 float32 (3 x 1 GiB moved)     GB/s
 *   copy_256M         tg_copy_ of 2^28 float32 (cudaMemcpy D2D)         GB/s (the bound for add)
 *   matmul_4096_bf16, matmul_4096_fp16   the same GEMM on bfloat16 / float16
 *                     inputs (Tensor Cores, float32 accumulation)       TFLOP/s
 *   mlp_step_B        784-1024-512-256-128-10 ReLU MLP, cross entropy,
 *                     backward and Adam step at batch B = 64 and 4096   ms/step
 *   lenet_bn_step_64  tutorial 04's LeNet-BN, SGD momentum 0.9          ms/step
 *   ..._amp_bf16, ..._amp_fp16   the same steps with forward and loss under
 *                     autocast (fp16: through a GradScaler, as tutorials 02/04)
 * Each number is the median of several timed runs after a warm-up, with
 * tg_cuda_synchronize() around the timed region. Prints RESULT lines like the
 * other benchmarks; without a CUDA device prints a SKIPPED line and exits 0. */
#include <string.h>

#include "bench/bench_util.h"
#include "tapegrad.h"

#define REPS 10

static tg_opts on_gpu(tg_dtype dtype) { return (tg_opts){.dtype = dtype, .device = tg_cuda(0)}; }

static void result(const char *name, double seconds, double value, const char *unit) {
    printf("RESULT {\"bench\": \"%s\", \"impl\": \"tapegrad\", \"seconds\": %.6g, \"unit_value\": %.4g, "
           "\"unit\": \"%s\"}\n",
           name, seconds, value, unit);
    fflush(stdout);
}

/* kind: "" (float32), "tf32", "bf16" or "fp16" */
static void bench_matmul(const char *kind) {
    const int n = 4096;
    double times[REPS];
    tg_dtype dtype = !strcmp(kind, "bf16") ? TG_BFLOAT16 : !strcmp(kind, "fp16") ? TG_FLOAT16 : TG_FLOAT32;
    tg_manual_seed(0);
    tg_tensor *a = tg_randn(TG_SHAPE(n, n), on_gpu(TG_FLOAT32)), *b = tg_randn(TG_SHAPE(n, n), on_gpu(TG_FLOAT32));
    if (dtype != TG_FLOAT32) {
        tg_tensor *a16 = tg_cast(a, dtype), *b16 = tg_cast(b, dtype);
        tg_release(a), tg_release(b);
        a = a16, b = b16;
    }
    tg_set_allow_tf32(!strcmp(kind, "tf32"));
    for (int r = 0; r < REPS + 1; r++) {
        tg_cuda_synchronize();
        double start = bench_now();
        TG_SCOPE {
            tg_matmul(a, b);
            tg_cuda_synchronize();
        }
        if (r > 0) times[r - 1] = bench_now() - start;
    }
    tg_set_allow_tf32(false);
    double median = bench_median(times, REPS);
    char name[32];
    snprintf(name, sizeof name, "matmul_4096%s%s", *kind ? "_" : "", kind);
    result(name, median, 2.0 * n * n * (double)n / median * 1e-12, "TFLOP/s");
    tg_release(a);
    tg_release(b);
}

static void bench_add_and_copy(void) {
    const int64_t n = (int64_t)1 << 28;
    double add_times[REPS], copy_times[REPS];
    tg_tensor *a = tg_full(TG_SHAPE(n), 1, on_gpu(TG_FLOAT32)), *b = tg_full(TG_SHAPE(n), 2, on_gpu(TG_FLOAT32));
    tg_tensor *dst = tg_empty(TG_SHAPE(n), on_gpu(TG_FLOAT32));
    if (!a || !b || !dst) {
        printf("SKIPPED add_256M: %s\n", tg_last_error());
        tg_release(a), tg_release(b), tg_release(dst);
        return;
    }
    for (int r = 0; r < REPS + 1; r++) {
        tg_cuda_synchronize();
        double start = bench_now();
        TG_SCOPE {
            tg_add(a, b);
            tg_cuda_synchronize();
        }
        if (r > 0) add_times[r - 1] = bench_now() - start;
        start = bench_now();
        tg_copy_(dst, a);
        tg_cuda_synchronize();
        if (r > 0) copy_times[r - 1] = bench_now() - start;
    }
    double add = bench_median(add_times, REPS), copy = bench_median(copy_times, REPS);
    result("add_256M", add, 3.0 * 4 * (double)n / add * 1e-9, "GB/s");
    result("copy_256M", copy, 2.0 * 4 * (double)n / copy * 1e-9, "GB/s");
    tg_release(a);
    tg_release(b);
    tg_release(dst);
}

static tg_module *make_mlp(void) {
    const int64_t sizes[] = {784, 1024, 512, 256, 128, 10};
    tg_module *layers[9];
    int count = 0;
    for (int i = 0; i < 5; i++) {
        layers[count++] = tg_nn_linear(sizes[i], sizes[i + 1], (tg_linear_opts){0});
        if (i < 4) layers[count++] = tg_nn_relu();
    }
    return tg_nn_sequential(count, layers);
}

/* tutorials/04_batchnorm_gpu's model */
static tg_module *make_lenet_bn(void) {
    tg_pool_opts pool2 = {.kernel_size = 2};
    return TG_NN_SEQUENTIAL(tg_nn_conv2d(1, 20, 5, (tg_conv_opts){0}), tg_nn_batch_norm2d(20, (tg_batch_norm_opts){0}),
                            tg_nn_relu(), tg_nn_max_pool2d(pool2), tg_nn_conv2d(20, 50, 5, (tg_conv_opts){0}),
                            tg_nn_batch_norm2d(50, (tg_batch_norm_opts){0}), tg_nn_relu(), tg_nn_max_pool2d(pool2),
                            tg_nn_flatten(1, -1), tg_nn_linear(800, 500, (tg_linear_opts){0}), tg_nn_relu(),
                            tg_nn_linear(500, 10, (tg_linear_opts){0}));
}

/* Median time of a training step of `model` ("mlp": Adam; "lenet_bn": SGD momentum 0.9)
 * at `batch`, float32 (amp NULL) or with forward and loss under autocast to "bf16" /
 * "fp16"; fp16 steps through a GradScaler, bf16 does not need one (as PyTorch). */
static void bench_step(const char *model_name, int batch, const char *amp) {
    bool lenet = !strcmp(model_name, "lenet_bn");
    tg_dtype amp_dtype = amp && !strcmp(amp, "fp16") ? TG_FLOAT16 : TG_BFLOAT16;
    char name[48];
    snprintf(name, sizeof name, "%s_step_%d%s%s", model_name, batch, amp ? "_amp_" : "", amp ? amp : "");
    tg_manual_seed(0);
    tg_module *model = lenet ? make_lenet_bn() : make_mlp();
    if (!model || tg_module_to(model, tg_cuda(0))) {
        printf("SKIPPED %s: %s\n", name, tg_last_error());
        tg_module_free(model);
        return;
    }
    tg_optim *opt =
        lenet ? tg_sgd(model, (tg_sgd_opts){.lr = 0.01, .momentum = 0.9}) : tg_adam(model, (tg_adam_opts){.lr = 1e-3});
    tg_grad_scaler *scaler =
        tg_grad_scaler_new(opt, (tg_grad_scaler_opts){.disabled = amp_dtype != TG_FLOAT16 || !amp});
    tg_tensor *x = tg_rand(lenet ? TG_SHAPE(batch, 1, 28, 28) : TG_SHAPE(batch, 784), on_gpu(TG_FLOAT32));
    tg_tensor *y = tg_randint(0, 10, TG_SHAPE(batch), on_gpu(TG_INT64));
    int64_t mallocs_before = tg_cuda_memory_stats(0).num_mallocs, mallocs_warm = 0;
    double times[REPS], loss = 0;
    for (int r = 0; r < REPS + 3; r++) { /* three warm-up steps fill the allocator's cache */
        tg_cuda_synchronize();
        if (r == 3) mallocs_warm = tg_cuda_memory_stats(0).num_mallocs;
        double start = bench_now();
        TG_SCOPE {
            tg_tensor *l = NULL;
            TG_AUTOCAST_IF(TG_DEVICE_CUDA, amp_dtype, amp != NULL) { l = tg_cross_entropy(tg_forward(model, x), y); }
            tg_backward(tg_grad_scaler_scale(scaler, l));
            tg_grad_scaler_step(scaler, opt, NULL);
            tg_grad_scaler_update(scaler);
            tg_optim_zero_grad(opt);
            tg_cuda_synchronize();
            if (r == REPS + 2) loss = tg_item(l);
        }
        if (r >= 3) times[r - 3] = bench_now() - start;
    }
    double median = bench_median(times, REPS);
    /* cuda_mallocs: those of this model (weights, optimizer state, first steps); warm:
     * those of the timed steps, which the caching allocator should make 0 */
    printf("RESULT {\"bench\": \"%s\", \"impl\": \"tapegrad\", \"seconds\": %.6g, \"unit_value\": %.4g, "
           "\"unit\": \"ms/step\", \"loss\": %.4f, \"cuda_mallocs\": %ld, \"cuda_mallocs_timed\": %ld}\n",
           name, median, median * 1e3, loss, (long)(mallocs_warm - mallocs_before),
           (long)(tg_cuda_memory_stats(0).num_mallocs - mallocs_warm));
    fflush(stdout);
    tg_release(x);
    tg_release(y);
    tg_grad_scaler_free(scaler);
    tg_optim_free(opt);
    tg_module_free(model);
}

int main(void) {
    if (!tg_cuda_available()) {
        printf("SKIPPED gpu_bench: no CUDA device (%s)\n", tg_build_info());
        return 0;
    }
    printf("# %s\n", tg_build_info());
    bench_matmul("");
    bench_matmul("tf32");
    bench_matmul("bf16");
    bench_matmul("fp16");
    bench_add_and_copy();
    const char *amps[] = {NULL, "bf16", "fp16"};
    for (int a = 0; a < 3; a++) {
        bench_step("mlp", 64, amps[a]);
        bench_step("mlp", 4096, amps[a]);
        bench_step("lenet_bn", 64, amps[a]);
    }
    if (tg_has_error()) printf("# last error: %s\n", tg_last_error());
    return 0;
}
