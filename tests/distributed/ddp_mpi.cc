// DistributedDataParallel on 2 ranks (tests/distributed/run_mpi.sh): 2 ranks with batch 32
// each train exactly as 1 process with batch 64 over the same samples.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/distributed/dist_test_util.h"

namespace {

constexpr int kSamples = 256, kClasses = 5;

// A small LeNet-like net: conv, pool, two linears. Parameters (registration order):
// 0 conv.weight [4,1,3,3], 1 conv.bias, 2 fc1.weight [16,36], 3 fc1.bias, 4 fc2.weight [5,16], 5 fc2.bias.
tg_module *make_net(tg_dtype dtype) {
    tg_pool_opts pool = {};
    pool.kernel_size = 2;
    tg_module *net = TG_NN_SEQUENTIAL(tg_nn_conv2d(1, 4, 3, tg_conv_opts{}), tg_nn_relu(), tg_nn_max_pool2d(pool),
                                      tg_nn_flatten(1, -1), tg_nn_linear(36, 16, tg_linear_opts{}), tg_nn_relu(),
                                      tg_nn_linear(16, kClasses, tg_linear_opts{}));
    if (net && dtype != TG_FLOAT32) tg_module_cast(net, dtype);
    return net;
}

// The next batch, starting the next epoch when this one is over.
void next_batch(tg_loader *ld, tg_tensor **x, tg_tensor **y) {
    if (!tg_loader_next(ld, x, y)) tg_loader_next(ld, x, y);
}

double max_param_diff(tg_module *a, tg_module *b) {
    int na = 0, nb = 0;
    tg_tensor *const *pa = tg_parameters(a, &na);
    tg_tensor *const *pb = tg_parameters(b, &nb);
    double worst = na == nb ? 0 : INFINITY;
    for (int i = 0; i < na && i < nb; i++) {
        std::vector<double> va = values(pa[i]), vb = values(pb[i]);
        for (size_t k = 0; k < va.size(); k++) worst = std::fmax(worst, std::fabs(va[k] - vb[k]));
    }
    return worst;
}

tg_optim *make_optimizer(tg_module *net, bool adam) {
    if (adam) {
        tg_adam_opts o = {};
        o.lr = 1e-2;
        return tg_adam(net, o);
    }
    tg_sgd_opts o = {};
    o.lr = 0.1;
    o.momentum = 0.9;
    return tg_sgd(net, o);
}

// 20 steps of DDP (this rank's 32 samples of each batch of 64) against a reference
// trained on each rank alone with the whole batch of 64; returns the worst difference.
double train_both(tg_dtype dtype, bool adam, double bucket_cap_mb, int *num_buckets, double *moved) {
    int rank = tg_dist_rank();
    tg_manual_seed(3);
    tg_tensor *x = tg_randn(TG_SHAPE(kSamples, 1, 8, 8), tg_opts{dtype});
    tg_tensor *y = tg_randint(0, kClasses, TG_SHAPE(kSamples), tg_opts{TG_INT64});
    tg_manual_seed(11);
    tg_module *ref = make_net(dtype);
    tg_module *start = make_net(dtype); // the same initial weights, kept to see that training moved
    tg_manual_seed(11 + 1000 * rank);   // rank 1 starts elsewhere: DDP broadcasts rank 0's weights
    tg_module *net = make_net(dtype);
    tg_ddp_opts ddp_opts = {};
    ddp_opts.bucket_cap_mb = bucket_cap_mb;
    tg_ddp *ddp = tg_ddp_new(net, ddp_opts);
    EXPECT_NE(ddp, nullptr) << tg_last_error();
    EXPECT_EQ(max_param_diff(net, ref), 0.0) << "rank 0's weights were not broadcast";
    *num_buckets = tg_ddp_num_buckets(ddp);
    tg_optim *opt_ref = make_optimizer(ref, adam), *opt = make_optimizer(net, adam);
    tg_loader_opts whole = {}, shard = {};
    whole.batch_size = 64, whole.shuffle = true, whole.seed = 5, whole.world_size = 1;
    shard.batch_size = 32, shard.shuffle = true, shard.seed = 5, shard.world_size = 2, shard.rank = rank;
    tg_loader *ld_ref = tg_loader_new(x, y, whole), *ld = tg_loader_new(x, y, shard);
    for (int step = 0; step < 20 && ddp; step++) {
        TG_SCOPE {
            tg_tensor *bx, *by;
            next_batch(ld_ref, &bx, &by);
            tg_optim_zero_grad(opt_ref);
            EXPECT_EQ(tg_backward(tg_cross_entropy(tg_forward(ref, bx), by)), TG_OK);
            tg_optim_step(opt_ref);
            next_batch(ld, &bx, &by);
            EXPECT_EQ(tg_size(bx, 0), 32);
            tg_optim_zero_grad(opt);
            EXPECT_EQ(tg_backward(tg_cross_entropy(tg_ddp_forward(ddp, bx), by)), TG_OK) << tg_last_error();
            tg_optim_step(opt);
        }
    }
    tg_ddp_stats stats = tg_ddp_get_stats(ddp);
    EXPECT_EQ(stats.steps, 20);
    EXPECT_EQ(stats.bytes, 20.0 * tg_module_num_params(net) * tg_dtype_size(dtype));
    EXPECT_GE(stats.comm_s, stats.wait_s * 0.999);
    double diff = max_param_diff(net, ref);
    *moved = max_param_diff(ref, start);
    tg_loader_free(ld);
    tg_loader_free(ld_ref);
    tg_optim_free(opt);
    tg_optim_free(opt_ref);
    tg_ddp_free(ddp);
    tg_module_free(net);
    tg_module_free(start);
    tg_module_free(ref);
    return diff;
}

struct Case {
    tg_dtype dtype;
    bool adam;
    double bucket_cap_mb;
    double tolerance;
    int buckets;
};

class DdpEquivalence : public DistTest, public ::testing::WithParamInterface<Case> {};

TEST_P(DdpEquivalence, TwoRanksOfBatch32TrainAsOneOfBatch64) {
    Case c = GetParam();
    int buckets = 0;
    double moved = 0;
    double diff = train_both(c.dtype, c.adam, c.bucket_cap_mb, &buckets, &moved);
    EXPECT_EQ(buckets, c.buckets);
    EXPECT_LE(diff, c.tolerance) << "parameters after 20 steps differ";
    EXPECT_GT(moved, 1e-2) << "training did not move the weights: the comparison would be empty";
}

// Tiny buckets (0.0005 MB): two buckets, the second launched while the first is in flight.
INSTANTIATE_TEST_SUITE_P(SgdAndAdam, DdpEquivalence,
                         ::testing::Values(Case{TG_FLOAT64, false, 0, 1e-10, 1}, Case{TG_FLOAT64, true, 0, 1e-10, 1},
                                           Case{TG_FLOAT32, false, 0, 1e-5, 1}, Case{TG_FLOAT32, true, 0, 1e-5, 1},
                                           Case{TG_FLOAT64, true, 0.0005, 1e-10, 3},
                                           Case{TG_FLOAT32, false, 0.0005, 1e-5, 2}));

// PyTorch's order: parameters reversed, a bucket closed once it reaches the cap.
TEST_F(DistTest, BucketsFollowReverseParameterOrder) {
    tg_module *net = make_net(TG_FLOAT32);
    tg_ddp_opts opts = {};
    opts.bucket_cap_mb = 0.0005; // 524 bytes: fc2 (20 + 320 B) + fc1.bias (64 B) + fc1.weight closes it
    tg_ddp *ddp = tg_ddp_new(net, opts);
    ASSERT_NE(ddp, nullptr) << tg_last_error();
    ASSERT_EQ(tg_ddp_num_buckets(ddp), 2);
    int count = 0;
    const int *first = tg_ddp_bucket(ddp, 0, &count);
    EXPECT_EQ(std::vector<int>(first, first + count), (std::vector<int>{5, 4, 3, 2}));
    const int *second = tg_ddp_bucket(ddp, 1, &count);
    EXPECT_EQ(std::vector<int>(second, second + count), (std::vector<int>{1, 0}));
    EXPECT_EQ(tg_ddp_bucket(ddp, 2, &count), nullptr);
    EXPECT_EQ(count, 0);
    tg_ddp_free(ddp);
    tg_module_free(net);
}

// no_sync: the first micro-batch accumulates locally, the second reduces the sum.
TEST_F(DistTest, NoSyncAccumulatesLocallyThenReducesTheSum) {
    int rank = tg_dist_rank();
    tg_manual_seed(4);
    tg_tensor *x = tg_randn(TG_SHAPE(64, 1, 8, 8), tg_opts{TG_FLOAT64});
    tg_tensor *y = tg_randint(0, kClasses, TG_SHAPE(64), tg_opts{TG_INT64});
    // Micro-batches of 16: rank r uses [32r, 32r+16) then [32r+16, 32r+32).
    auto part = [&](tg_tensor *t, int k) { return tg_narrow(t, 0, 16 * k, 16); };
    tg_manual_seed(12);
    tg_module *net = make_net(TG_FLOAT64);
    tg_manual_seed(12);
    tg_module *ref = make_net(TG_FLOAT64);
    tg_ddp *ddp = tg_ddp_new(net, tg_ddp_opts{});
    ASSERT_NE(ddp, nullptr);
    tg_ddp_set_sync(ddp, false);
    ASSERT_EQ(tg_backward(tg_cross_entropy(tg_ddp_forward(ddp, part(x, 2 * rank)), part(y, 2 * rank))), TG_OK);
    // Local only: the reference's gradient of this rank's first micro-batch.
    ASSERT_EQ(tg_backward(tg_cross_entropy(tg_forward(ref, part(x, 2 * rank)), part(y, 2 * rank))), TG_OK);
    int n = 0;
    tg_tensor *const *p = tg_parameters(net, &n);
    tg_tensor *const *q = tg_parameters(ref, &n);
    for (int i = 0; i < n; i++) EXPECT_TRUE(tensor_near(tg_grad(p[i]), values(tg_grad(q[i])), 1e-15)) << i;
    tg_ddp_set_sync(ddp, true);
    ASSERT_EQ(tg_backward(tg_cross_entropy(tg_ddp_forward(ddp, part(x, 2 * rank + 1)), part(y, 2 * rank + 1))), TG_OK);
    // Reference: (sum of the 4 micro-batch gradients) / 2 ranks.
    for (int i = 0; i < n; i++) tg_zero_grad(q[i]);
    for (int k = 0; k < 4; k++)
        ASSERT_EQ(tg_backward(tg_mul_scalar(tg_cross_entropy(tg_forward(ref, part(x, k)), part(y, k)), 0.5)), TG_OK);
    for (int i = 0; i < n; i++) EXPECT_TRUE(tensor_near(tg_grad(p[i]), values(tg_grad(q[i])), 1e-12)) << i;
    tg_ddp_free(ddp);
    tg_module_free(net);
    tg_module_free(ref);
}

// BatchNorm: running statistics come from rank 0 before each forward (broadcast_buffers).
TEST_F(DistTest, BuffersAreBroadcastFromRankZeroBeforeForward) {
    tg_module *net =
        TG_NN_SEQUENTIAL(tg_nn_linear(3, 2, tg_linear_opts{}), tg_nn_batch_norm1d(2, tg_batch_norm_opts{}));
    ASSERT_NE(net, nullptr);
    tg_ddp *ddp = tg_ddp_new(net, tg_ddp_opts{});
    ASSERT_NE(ddp, nullptr);
    tg_tensor *mean = tg_module_get(net, "1.running_mean");
    ASSERT_NE(mean, nullptr);
    TG_NO_GRAD { tg_fill_(mean, 1.0 + tg_dist_rank()); }
    tg_eval(net);
    EXPECT_NE(tg_ddp_forward(ddp, tg_ones(TG_SHAPE(4, 3), tg_opts{})), nullptr);
    EXPECT_TRUE(tensor_near(mean, {1, 1}, 0));
    tg_ddp_free(ddp);
    tg_module_free(net);
}

// A parameter without a gradient leaves its bucket unreduced: the next forward says so.
TEST_F(DistTest, ParameterWithoutGradientIsReported) {
    tg_module *net = TG_NN_SEQUENTIAL(tg_nn_linear(3, 2, tg_linear_opts{}), tg_nn_linear(2, 1, tg_linear_opts{}));
    tg_ddp *ddp = tg_ddp_new(net, tg_ddp_opts{});
    ASSERT_NE(ddp, nullptr);
    tg_tensor *x = tg_ones(TG_SHAPE(4, 3), tg_opts{});
    ASSERT_EQ(tg_backward(tg_sum(tg_forward(tg_module_child(net, "0"), x))), TG_OK); // "1" gets none
    tg_clear_error();
    EXPECT_EQ(tg_ddp_forward(ddp, x), nullptr);
    EXPECT_ERROR_CONTAINS("gave gradients to 2 of 4 parameters ('1.weight' got none)");
    tg_ddp_free(ddp);
    tg_module_free(net);
}

// Checkpoints: rank 0 saves, every rank loads; training resumes from the same state.
TEST_F(DistTest, RankZeroSavesEveryRankLoads) {
    const char *tmp = getenv("TEST_TMPDIR");
    std::string path = std::string(tmp ? tmp : "/tmp") + "/ddp_checkpoint.tgc";
    tg_manual_seed(20 + tg_dist_rank()); // different weights per rank before loading
    tg_module *net = make_net(TG_FLOAT64);
    tg_optim *opt = make_optimizer(net, true);
    if (tg_dist_rank() == 0) {
        tg_checkpoint_info info = {};
        info.step = 7;
        ASSERT_EQ(tg_save_checkpoint(path.c_str(), net, opt, info), TG_OK) << tg_last_error();
    }
    ASSERT_EQ(tg_dist_barrier(), TG_OK);
    tg_checkpoint_info info = {};
    ASSERT_EQ(tg_load_checkpoint(path.c_str(), net, opt, &info), TG_OK) << tg_last_error();
    EXPECT_EQ(info.step, 7);
    // Every rank now holds rank 0's weights.
    int n = 0;
    tg_tensor *const *p = tg_parameters(net, &n);
    for (int i = 0; i < n; i++) {
        tg_tensor *mine = tg_clone(p[i]);
        tg_tensor *theirs = tg_clone(p[i]);
        ASSERT_EQ(tg_dist_broadcast(theirs, 0), TG_OK);
        EXPECT_TRUE(tensor_near(mine, values(theirs), 0)) << i;
    }
    tg_optim_free(opt);
    tg_module_free(net);
}

} // namespace

namespace {

// SyncBatchNorm on 2 ranks of 4 samples equals BatchNorm2d on the 8 samples in one
// process: outputs, running statistics, parameter gradients (averaged by DDP) and input
// gradients (each rank's backward carries the whole loss through the statistics).
TEST_F(DistTest, SyncBatchNormEqualsBatchNormOverTheGlobalBatch) {
    int rank = tg_dist_rank();
    tg_manual_seed(30);
    tg_tensor *x_all = tg_add_scalar(tg_mul_scalar(tg_randn(TG_SHAPE(8, 3, 2, 2), tg_opts{TG_FLOAT64}), 2.0), 0.5);
    tg_tensor *w_out = tg_randn(TG_SHAPE(8, 3, 2, 2), tg_opts{TG_FLOAT64}); // a loss that weighs every output
    tg_module *bn = tg_nn_batch_norm2d(3, tg_batch_norm_opts{});
    tg_module *sync = tg_nn_sync_batch_norm(3, tg_batch_norm_opts{});
    ASSERT_NE(sync, nullptr) << tg_last_error();
    tg_module_cast(bn, TG_FLOAT64);
    tg_module_cast(sync, TG_FLOAT64);
    tg_ddp *ddp = tg_ddp_new(sync, tg_ddp_opts{});
    ASSERT_NE(ddp, nullptr);
    for (int step = 0; step < 2; step++) {
        tg_tensor *x_ref = tg_requires_grad_(tg_clone(x_all), true);
        tg_tensor *y_ref = tg_forward(bn, x_ref);
        ASSERT_EQ(tg_backward(tg_div_scalar(tg_sum(tg_mul(y_ref, w_out)), 8)), TG_OK); // mean over 8 samples
        tg_tensor *x = tg_requires_grad_(tg_clone(tg_narrow(x_all, 0, 4 * rank, 4)), true);
        tg_tensor *y = tg_ddp_forward(ddp, x);
        ASSERT_NE(y, nullptr) << tg_last_error();
        EXPECT_TRUE(tensor_near(y, values(tg_narrow(y_ref, 0, 4 * rank, 4)), 1e-12)) << "step " << step;
        ASSERT_EQ(tg_backward(tg_div_scalar(tg_sum(tg_mul(y, tg_narrow(w_out, 0, 4 * rank, 4))), 4)), TG_OK)
            << tg_last_error();
        for (const char *name : {"weight", "bias"}) {
            EXPECT_TRUE(
                tensor_near(tg_grad(tg_module_get(sync, name)), values(tg_grad(tg_module_get(bn, name))), 1e-12))
                << name;
            tg_zero_grad(tg_module_get(sync, name));
            tg_zero_grad(tg_module_get(bn, name));
        }
        // d(mean of the rank losses)/dx = d(L_0 + L_1)/dx / 2 in the reference; each rank
        // differentiates L_0 + L_1 through the statistics, its own half directly.
        EXPECT_TRUE(
            tensor_near(tg_mul_scalar(tg_grad(x), 0.5), values(tg_narrow(tg_grad(x_ref), 0, 4 * rank, 4)), 1e-12));
        for (const char *name : {"running_mean", "running_var"})
            EXPECT_TRUE(tensor_near(tg_module_get(sync, name), values(tg_module_get(bn, name)), 1e-12)) << name;
    }
    tg_eval(sync);
    tg_eval(bn);
    tg_tensor *probe = tg_narrow(x_all, 0, 0, 2);
    EXPECT_TRUE(tensor_near(tg_forward(sync, probe), values(tg_forward(bn, probe)), 1e-12));
    tg_clear_error();
    EXPECT_EQ(tg_forward(sync, tg_zeros(TG_SHAPE(2, 4), tg_opts{TG_FLOAT64})), nullptr);
    EXPECT_ERROR_CONTAINS("SyncBatchNorm(3): the input must be [N, C, ...] with 3 channels in dim 1");
    tg_ddp_free(ddp);
    tg_module_free(sync);
    tg_module_free(bn);
}

} // namespace

namespace {

// Steps of DDP training on this rank's shard, starting the next epoch when one ends.
void train_steps(tg_ddp *ddp, tg_optim *opt, tg_loader *ld, int steps) {
    for (int i = 0; i < steps; i++) {
        TG_SCOPE {
            tg_tensor *bx, *by;
            next_batch(ld, &bx, &by);
            tg_optim_zero_grad(opt);
            ASSERT_EQ(tg_backward(tg_cross_entropy(tg_ddp_forward(ddp, bx), by)), TG_OK) << tg_last_error();
            ASSERT_EQ(tg_optim_step(opt), TG_OK);
        }
    }
}

// A DDP run checkpointed by rank 0 after 6 steps and resumed on every rank from the file
// (model, Adam state, position in the sharded data) takes the same 6 next steps, bit for bit.
TEST_F(DistTest, ResumeFromARankZeroCheckpointIsExact) {
    const char *tmp = getenv("TEST_TMPDIR");
    std::string path = std::string(tmp ? tmp : "/tmp") + "/ddp_resume.tgc";
    tg_manual_seed(40);
    tg_tensor *x = tg_randn(TG_SHAPE(128, 1, 8, 8), tg_opts{TG_FLOAT64});
    tg_tensor *y = tg_randint(0, kClasses, TG_SHAPE(128), tg_opts{TG_INT64});
    tg_loader_opts shard = {};
    shard.batch_size = 16, shard.shuffle = true, shard.seed = 9, shard.world_size = 2, shard.rank = tg_dist_rank();
    const int64_t batches = 4; // 64 samples per rank in batches of 16

    tg_manual_seed(41);
    tg_module *a = make_net(TG_FLOAT64);
    tg_ddp *ddp_a = tg_ddp_new(a, tg_ddp_opts{});
    tg_optim *opt_a = make_optimizer(a, true);
    tg_loader *ld_a = tg_loader_new(x, y, shard);
    ASSERT_EQ(tg_loader_num_batches(ld_a), batches);
    train_steps(ddp_a, opt_a, ld_a, 6);
    if (tg_dist_rank() == 0) {
        tg_checkpoint_info info = {};
        info.step = 6;
        ASSERT_EQ(tg_save_checkpoint(path.c_str(), a, opt_a, info), TG_OK) << tg_last_error();
    }
    ASSERT_EQ(tg_dist_barrier(), TG_OK);
    train_steps(ddp_a, opt_a, ld_a, 6);

    tg_manual_seed(99); // other weights: the checkpoint must bring everything back
    tg_module *b = make_net(TG_FLOAT64);
    tg_ddp *ddp_b = tg_ddp_new(b, tg_ddp_opts{});
    tg_optim *opt_b = make_optimizer(b, true);
    tg_checkpoint_info info = {};
    ASSERT_EQ(tg_load_checkpoint(path.c_str(), b, opt_b, &info), TG_OK) << tg_last_error();
    ASSERT_EQ(info.step, 6);
    tg_loader *ld_b = tg_loader_new(x, y, shard);
    tg_loader_reset(ld_b, info.step / batches);
    ASSERT_EQ(tg_loader_seek(ld_b, info.step % batches), TG_OK);
    train_steps(ddp_b, opt_b, ld_b, 6);
    EXPECT_EQ(max_param_diff(a, b), 0.0);

    tg_loader_free(ld_b);
    tg_loader_free(ld_a);
    tg_optim_free(opt_b);
    tg_optim_free(opt_a);
    tg_ddp_free(ddp_b);
    tg_ddp_free(ddp_a);
    tg_module_free(b);
    tg_module_free(a);
}

} // namespace
