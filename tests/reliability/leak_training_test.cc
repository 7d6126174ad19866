// Leak-free training (reliability issue): the seeds' MLP and LeNet train for 200
// steps; after every step the live tensors, storages and graph nodes are back to
// their baseline, and the process's resident memory stops growing once the caching
// allocator has warmed up: from the third step on, a step takes no storage block from
// the system (every block comes from the caching allocator's free lists).
#include <cstdio>

#include "test_util.h"

namespace {

long resident_kib() {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return resident * 4;
}

struct Counts {
    long tensors, storages, nodes;
    bool operator==(const Counts &o) const {
        return tensors == o.tensors && storages == o.storages && nodes == o.nodes;
    }
};
Counts counts() { return {tg_live_tensors(), tg_live_storages(), tg_live_graph_nodes()}; }

// Trains `model` on one fixed random batch (owned by the caller's scope); checks the
// counters after every step.
void train_checked(tg_module *model, tg_optim *opt, tg_shape batch_shape, int steps) {
    tg_manual_seed(7);
    tg_tensor *x = tg_randn(batch_shape, tg_opts{});
    tg_tensor *y = tg_randint(0, 10, TG_SHAPE(batch_shape.dims[0]), tg_opts{});
    Counts baseline = {};
    size_t system_allocs = 0;
    long rss_after_warmup = 0;
    double first_loss = 0, last_loss = 0;
    for (int step = 0; step < steps; step++) {
        TG_SCOPE {
            tg_tensor *loss = tg_cross_entropy(tg_forward(model, x), y);
            ASSERT_NE(loss, nullptr) << tg_last_error();
            ASSERT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
            ASSERT_EQ(tg_optim_step(opt), TG_OK) << tg_last_error();
            tg_optim_zero_grad(opt);
            last_loss = tg_item(loss);
            if (step == 0) first_loss = last_loss;
        }
        if (step == 1) { // step 0 creates the optimizer state
            baseline = counts();
            system_allocs = tg_cpu_memory_stats().system_allocs;
        }
        if (step > 1) {
            ASSERT_TRUE(counts() == baseline) << "step " << step << ": live objects changed";
            ASSERT_EQ(tg_cpu_memory_stats().system_allocs, system_allocs)
                << "step " << step << " allocated from the system";
        }
        if (step == 20) rss_after_warmup = resident_kib();
    }
    long growth_kib = resident_kib() - rss_after_warmup;
#ifndef __SANITIZE_ADDRESS__ // AddressSanitizer's quarantine holds freed memory on purpose
    EXPECT_LT(growth_kib, 2048) << "resident memory grew by " << growth_kib << " KiB over " << steps - 20 << " steps";
#else
    (void)growth_kib;
#endif
    EXPECT_LT(last_loss, first_loss); // it did train (memorising one batch)
}

} // namespace

TEST(LeakFreeTraining, Mlp200Steps) {
    Counts before = counts();
    TG_SCOPE {
        tg_module *mlp = TG_NN_SEQUENTIAL(tg_nn_flatten(1, -1), tg_nn_linear(784, 1024, tg_linear_opts{}), tg_nn_relu(),
                                          tg_nn_linear(1024, 512, tg_linear_opts{}), tg_nn_relu(),
                                          tg_nn_linear(512, 256, tg_linear_opts{}), tg_nn_relu(),
                                          tg_nn_linear(256, 128, tg_linear_opts{}), tg_nn_relu(),
                                          tg_nn_linear(128, 10, tg_linear_opts{}));
        tg_optim *adam = tg_adam(mlp, tg_adam_opts{1e-3});
        train_checked(mlp, adam, TG_SHAPE(16, 1, 28, 28), 200);
        tg_optim_free(adam);
        tg_module_free(mlp);
    }
    EXPECT_TRUE(counts() == before);
}

TEST(LeakFreeTraining, LeNetWithBatchNorm200Steps) {
    Counts before = counts();
    TG_SCOPE {
        tg_module *lenet = TG_NN_SEQUENTIAL(
            tg_nn_conv2d(1, 20, 5, tg_conv_opts{}), tg_nn_batch_norm2d(20, tg_batch_norm_opts{}), tg_nn_relu(),
            tg_nn_max_pool2d(tg_pool_opts{2}), tg_nn_conv2d(20, 50, 5, tg_conv_opts{}),
            tg_nn_batch_norm2d(50, tg_batch_norm_opts{}), tg_nn_relu(), tg_nn_max_pool2d(tg_pool_opts{2}),
            tg_nn_flatten(1, -1), tg_nn_linear(800, 500, tg_linear_opts{}), tg_nn_relu(),
            tg_nn_linear(500, 10, tg_linear_opts{}));
        tg_optim *sgd = tg_sgd(lenet, tg_sgd_opts{0.01, 0.9});
        train_checked(lenet, sgd, TG_SHAPE(8, 1, 28, 28), 200);
        tg_optim_free(sgd);
        tg_module_free(lenet);
    }
    EXPECT_TRUE(counts() == before);
}
