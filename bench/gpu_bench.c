/* GPU benchmarks (twin: bench/gpu_bench_torch.py), run by tools/gpu_check.sh on a
 * machine with a CUDA device:
 *   matmul_4096       float32 GEMM n = 4096, TF32 off and on            TFLOP/s
 *   add_256M          c = a + b over 2^28 float32 (3 x 1 GiB moved)     GB/s
 *   copy_256M         tg_copy_ of 2^28 float32 (cudaMemcpy D2D)         GB/s (the bound for add)
 *   mlp_step_B        784-1024-512-256-128-10 ReLU MLP, cross entropy,
 *                     backward and Adam step at batch B = 64 and 4096   ms/step
 * Each number is the median of several timed runs after a warm-up, with
 * tg_cuda_synchronize() around the timed region. Prints RESULT lines like the
 * other benchmarks; without a CUDA device prints a SKIPPED line and exits 0. */
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

static void bench_matmul(bool tf32) {
    const int n = 4096;
    double times[REPS];
    tg_manual_seed(0);
    tg_tensor *a = tg_randn(TG_SHAPE(n, n), on_gpu(TG_FLOAT32)), *b = tg_randn(TG_SHAPE(n, n), on_gpu(TG_FLOAT32));
    tg_set_allow_tf32(tf32);
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
    result(tf32 ? "matmul_4096_tf32" : "matmul_4096", median, 2.0 * n * n * (double)n / median * 1e-12, "TFLOP/s");
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

static void bench_mlp(int batch) {
    const int64_t sizes[] = {784, 1024, 512, 256, 128, 10};
    tg_module *layers[9];
    int count = 0;
    tg_manual_seed(0);
    for (int i = 0; i < 5; i++) {
        layers[count++] = tg_nn_linear(sizes[i], sizes[i + 1], (tg_linear_opts){0});
        if (i < 4) layers[count++] = tg_nn_relu();
    }
    tg_module *model = tg_nn_sequential(count, layers);
    if (!model || tg_module_to(model, tg_cuda(0))) {
        printf("SKIPPED mlp_step_%d: %s\n", batch, tg_last_error());
        return;
    }
    tg_optim *opt = tg_adam(model, (tg_adam_opts){.lr = 1e-3});
    tg_tensor *x = tg_rand(TG_SHAPE(batch, 784), on_gpu(TG_FLOAT32));
    tg_tensor *y = tg_randint(0, 10, TG_SHAPE(batch), on_gpu(TG_INT64));
    double times[REPS], loss = 0;
    for (int r = 0; r < REPS + 3; r++) { /* three warm-up steps fill the allocator's cache */
        tg_cuda_synchronize();
        double start = bench_now();
        TG_SCOPE {
            tg_tensor *l = tg_cross_entropy(tg_forward(model, x), y);
            tg_backward(l);
            tg_optim_step(opt);
            tg_optim_zero_grad(opt);
            tg_cuda_synchronize();
            if (r == REPS + 2) loss = tg_item(l);
        }
        if (r >= 3) times[r - 3] = bench_now() - start;
    }
    double median = bench_median(times, REPS);
    char name[32];
    snprintf(name, sizeof name, "mlp_step_%d", batch);
    printf("RESULT {\"bench\": \"%s\", \"impl\": \"tapegrad\", \"seconds\": %.6g, \"unit_value\": %.4g, "
           "\"unit\": \"ms/step\", \"loss\": %.4f, \"cuda_mallocs\": %ld}\n",
           name, median, median * 1e3, loss, tg_cuda_memory_stats(0).num_mallocs);
    tg_release(x);
    tg_release(y);
    tg_optim_free(opt);
    tg_module_free(model);
}

int main(void) {
    if (!tg_cuda_available()) {
        printf("SKIPPED gpu_bench: no CUDA device (%s)\n", tg_build_info());
        return 0;
    }
    printf("# %s\n", tg_build_info());
    bench_matmul(false);
    bench_matmul(true);
    bench_add_and_copy();
    bench_mlp(64);
    bench_mlp(4096);
    if (tg_has_error()) printf("# last error: %s\n", tg_last_error());
    return 0;
}
