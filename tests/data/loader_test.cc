// The batch loader: batch shapes, drop_last, every sample once per epoch, shuffle
// determinism for a seed (PyTorch's DataLoader order, so every machine agrees), ownership.
#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "test_util.h"

namespace {

class LoaderTest : public TgTest {};

// x [n, 2] with row i = (i, 1000 + i); y [n] = 10 * i (int64).
struct Data {
    tg_tensor *x, *y;
};
Data make_data(int64_t n) {
    std::vector<float> xs;
    std::vector<int64_t> ys;
    for (int64_t i = 0; i < n; i++) {
        xs.push_back((float)i);
        xs.push_back((float)(1000 + i));
        ys.push_back(10 * i);
    }
    return {tensor_f32(xs, TG_SHAPE(n, 2)), tensor_i64(ys, TG_SHAPE(n))};
}

// The sample ids of one epoch, batch by batch, checking that x and y stay paired.
std::vector<std::vector<int64_t>> epoch_ids(tg_loader *ld, int64_t epoch) {
    std::vector<std::vector<int64_t>> out;
    tg_loader_reset(ld, epoch);
    tg_tensor *bx, *by;
    TG_FOR_EACH_BATCH(ld, bx, by) {
        std::vector<double> xv = values(bx), yv = values(by);
        std::vector<int64_t> ids;
        EXPECT_EQ(xv.size(), 2 * yv.size());
        for (size_t i = 0; i < yv.size(); i++) {
            ids.push_back((int64_t)xv[2 * i]);
            EXPECT_EQ(xv[2 * i + 1], 1000 + xv[2 * i]);
            EXPECT_EQ(yv[i], 10 * xv[2 * i]);
        }
        out.push_back(ids);
    }
    return out;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>> &batches) {
    std::vector<int64_t> v;
    for (auto &b : batches) v.insert(v.end(), b.begin(), b.end());
    return v;
}

TEST_F(LoaderTest, SequentialBatchesAndShapes) {
    Data d = make_data(10);
    tg_loader *ld = tg_loader_new(d.x, d.y, tg_loader_opts{4});
    ASSERT_NE(ld, nullptr) << tg_last_error();
    EXPECT_EQ(tg_loader_num_batches(ld), 3);
    EXPECT_EQ(tg_loader_num_samples(ld), 10);
    tg_tensor *bx, *by;
    std::vector<std::vector<int64_t>> shapes;
    while (tg_loader_next(ld, &bx, &by)) {
        EXPECT_EQ(tg_dtype_of(bx), TG_FLOAT32);
        EXPECT_EQ(tg_dtype_of(by), TG_INT64);
        EXPECT_TRUE(tg_is_contiguous(bx));
        EXPECT_FALSE(tg_same_storage(bx, d.x)); // a copy, not a view
        shapes.push_back(dims(bx));
        EXPECT_EQ(dims(by), (std::vector<int64_t>{dims(bx)[0]}));
    }
    EXPECT_EQ(bx, nullptr);
    EXPECT_EQ(by, nullptr);
    EXPECT_EQ(shapes, (std::vector<std::vector<int64_t>>{{4, 2}, {4, 2}, {2, 2}}));
    auto ids = epoch_ids(ld, 0);
    EXPECT_EQ(ids, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
    EXPECT_FALSE(tg_has_error());
    tg_loader_free(ld);
}

// As iterating a DataLoader again: the pass after the end of an epoch is the next
// epoch, in that epoch's order, without tg_loader_reset.
TEST_F(LoaderTest, EachPassIsTheNextEpoch) {
    Data d = make_data(23);
    tg_loader *ld = tg_loader_new(d.x, d.y, tg_loader_opts{5, true, 9});
    tg_loader *ref = tg_loader_new(d.x, d.y, tg_loader_opts{5, true, 9});
    ASSERT_TRUE(ld && ref) << tg_last_error();
    for (int64_t epoch = 0; epoch < 3; epoch++) {
        std::vector<int64_t> ids;
        tg_tensor *bx, *by;
        TG_FOR_EACH_BATCH(ld, bx, by) {
            std::vector<double> xv = values(bx);
            for (size_t i = 0; i < xv.size(); i += 2) ids.push_back((int64_t)xv[i]);
        }
        EXPECT_EQ(tg_loader_epoch(ld), epoch);
        EXPECT_EQ(ids, flat(epoch_ids(ref, epoch))) << "epoch " << epoch;
    }
    // tg_loader_reset still jumps anywhere, and the passes go on from there.
    tg_loader_reset(ld, 7);
    EXPECT_EQ(flat(epoch_ids(ref, 7)), flat(epoch_ids(ld, 7)));
    tg_tensor *bx, *by;
    ASSERT_TRUE(tg_loader_next(ld, &bx, &by));
    EXPECT_EQ(tg_loader_epoch(ld), 8);
    // A loader with no full batch never yields one, pass after pass.
    tg_loader *none = tg_loader_new(d.x, d.y, tg_loader_opts{50, false, 0, true, TG_CPU});
    for (int i = 0; i < 3; i++) EXPECT_FALSE(tg_loader_next(none, &bx, &by));
    EXPECT_FALSE(tg_has_error());
    tg_loader_free(none);
    tg_loader_free(ld);
    tg_loader_free(ref);
}

TEST_F(LoaderTest, DropLast) {
    Data d = make_data(10);
    tg_loader *ld = tg_loader_new(d.x, d.y, tg_loader_opts{4, true, 3, true, TG_CPU});
    ASSERT_NE(ld, nullptr);
    EXPECT_EQ(tg_loader_num_batches(ld), 2);
    auto b = epoch_ids(ld, 0);
    ASSERT_EQ(b.size(), 2u);
    for (auto &batch : b) EXPECT_EQ(batch.size(), 4u);
    std::set<int64_t> seen;
    for (int64_t id : flat(b)) EXPECT_TRUE(seen.insert(id).second) << "sample " << id << " twice";
    tg_loader_free(ld);

    // Exact multiple: nothing dropped; fewer samples than a batch: no batch at all.
    Data e = make_data(8);
    ld = tg_loader_new(e.x, e.y, tg_loader_opts{4, false, 0, true, TG_CPU});
    EXPECT_EQ(tg_loader_num_batches(ld), 2);
    EXPECT_EQ(flat(epoch_ids(ld, 0)).size(), 8u);
    tg_loader_free(ld);
    ld = tg_loader_new(e.x, e.y, tg_loader_opts{9, false, 0, true, TG_CPU});
    EXPECT_EQ(tg_loader_num_batches(ld), 0);
    EXPECT_TRUE(epoch_ids(ld, 0).empty());
    tg_loader_free(ld);
}

TEST_F(LoaderTest, ShuffleVisitsEverySampleOncePerEpoch) {
    Data d = make_data(101);
    tg_loader *ld = tg_loader_new(d.x, d.y, tg_loader_opts{16, true, 42});
    ASSERT_NE(ld, nullptr);
    std::vector<int64_t> all(101);
    std::iota(all.begin(), all.end(), 0);
    std::vector<std::vector<int64_t>> orders;
    for (int epoch = 0; epoch < 4; epoch++) {
        auto batches = epoch_ids(ld, epoch);
        EXPECT_EQ((int64_t)batches.size(), tg_loader_num_batches(ld));
        EXPECT_EQ(batches.back().size(), 101u % 16);
        std::vector<int64_t> ids = flat(batches);
        orders.push_back(ids);
        std::sort(ids.begin(), ids.end());
        EXPECT_EQ(ids, all) << "epoch " << epoch;
    }
    // Different epochs, different orders; none is the identity.
    for (int i = 0; i < 4; i++) {
        EXPECT_NE(orders[i], all);
        for (int j = 0; j < i; j++) EXPECT_NE(orders[i], orders[j]);
    }
    tg_loader_free(ld);
}

TEST_F(LoaderTest, ShuffleIsDeterministicForASeed) {
    Data d = make_data(50);
    tg_loader *a = tg_loader_new(d.x, d.y, tg_loader_opts{7, true, 1234});
    tg_loader *b = tg_loader_new(d.x, d.y, tg_loader_opts{7, true, 1234});
    tg_loader *c = tg_loader_new(d.x, d.y, tg_loader_opts{7, true, 1235});
    // Epoch 3 of a fresh loader equals epoch 3 reached after other epochs (resumable).
    epoch_ids(a, 0);
    epoch_ids(a, 1);
    EXPECT_EQ(epoch_ids(a, 3), epoch_ids(b, 3));
    EXPECT_EQ(epoch_ids(a, 0), epoch_ids(b, 0));
    EXPECT_NE(flat(epoch_ids(a, 0)), flat(epoch_ids(c, 0)));
    // Independent of the global RNG.
    tg_manual_seed(99);
    auto before = epoch_ids(a, 5);
    tg_manual_seed(7);
    EXPECT_EQ(epoch_ids(a, 5), before);
    tg_loader_free(a);
    tg_loader_free(b);
    tg_loader_free(c);
}

// The order is PyTorch's: DataLoader(shuffle=True, generator=torch.Generator().manual_seed(seed))
// (tests/fixtures/gen_random.py), epoch after epoch, from the loader and on its own.
TEST_F(LoaderTest, ShuffleIsPyTorchsDataLoaderOrder) {
    static const std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/random.txt");
    auto expected = [&](const std::string &name) {
        std::vector<int64_t> v;
        for (double e : fixture_tensor(fx, name).data) v.push_back((int64_t)e);
        return v;
    };
    for (auto [n, seed] : {std::pair<int64_t, uint64_t>{10, 1}, {1000, 5}}) {
        Data d = make_data(n);
        tg_loader *ld = tg_loader_new(d.x, d.y, tg_loader_opts{n, true, seed});
        for (int epoch = 0; epoch < 3; epoch++) {
            std::string name =
                "loader_" + std::to_string(n) + "_seed" + std::to_string(seed) + ".epoch" + std::to_string(epoch);
            EXPECT_EQ(flat(epoch_ids(ld, epoch)), expected(name)) << name;
            std::vector<int64_t> p((size_t)n);
            tg_random_permutation(p.data(), n, seed, (uint64_t)epoch);
            EXPECT_EQ(p, expected(name)) << name;
        }
        tg_loader_free(ld);
    }
    std::vector<int64_t> p(60000), every61;
    tg_random_permutation(p.data(), 60000, 1, 0);
    for (size_t i = 0; i < p.size(); i += 61) every61.push_back(p[i]);
    EXPECT_EQ(every61, expected("loader_60000_seed1.epoch0_every61"));
}

// Seed 0: DataLoader(shuffle=True) without a generator. tg_manual_seed, a draw for the
// model, two passes, an unshuffled loader and a last draw: PyTorch's numbers throughout.
TEST_F(LoaderTest, SeedZeroDrawsFromTheDefaultGeneratorAsDataLoader) {
    static const std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/random.txt");
    auto expected = [&](const std::string &name) { return fixture_tensor(fx, name).data; };
    Data d = make_data(10), e = make_data(6);
    tg_manual_seed(3);
    tg_loader *ld = tg_loader_new(d.x, d.y, tg_loader_opts{4, true, 0});
    tg_loader *plain = tg_loader_new(e.x, e.y, tg_loader_opts{4});
    ASSERT_TRUE(ld && plain) << tg_last_error();
    auto pass = [](tg_loader *l) {
        std::vector<double> ids;
        tg_tensor *bx, *by;
        TG_FOR_EACH_BATCH(l, bx, by) {
            std::vector<double> xv = values(bx);
            for (size_t i = 0; i < xv.size(); i += 2) ids.push_back(xv[i]);
        }
        return ids;
    };
    EXPECT_EQ(values(tg_rand(TG_SHAPE(5), tg_opts{})), expected("default_loader.before"));
    EXPECT_EQ(pass(ld), expected("default_loader.epoch0"));
    EXPECT_EQ(values(tg_rand(TG_SHAPE(2), tg_opts{})), expected("default_loader.between"));
    EXPECT_EQ(pass(ld), expected("default_loader.epoch1"));
    EXPECT_EQ(pass(plain), expected("default_loader.plain"));
    EXPECT_EQ(values(tg_rand(TG_SHAPE(3), tg_opts{})), expected("default_loader.after"));
    tg_loader_free(ld);
    tg_loader_free(plain);
}

TEST_F(LoaderTest, UnlabelledNonContiguousAndBatchSizeDefault) {
    // x is a transposed view: [3, 2] read in logical order.
    tg_tensor *base = tensor_f32({0, 1, 2, 10, 11, 12}, TG_SHAPE(2, 3));
    int64_t st[2] = {1, 3};
    tg_tensor *x = tg_as_strided(base, TG_SHAPE(3, 2), st, 0);
    tg_loader *ld = tg_loader_new(x, nullptr, tg_loader_opts{});
    ASSERT_NE(ld, nullptr);
    EXPECT_EQ(tg_loader_num_batches(ld), 3); // batch_size 0 means 1
    tg_tensor *bx, *by = (tg_tensor *)1;
    std::vector<std::vector<double>> rows;
    while (tg_loader_next(ld, &bx, &by)) {
        EXPECT_EQ(by, nullptr);
        EXPECT_EQ(dims(bx), (std::vector<int64_t>{1, 2}));
        rows.push_back(values(bx));
    }
    EXPECT_EQ(rows, (std::vector<std::vector<double>>{{0, 10}, {1, 11}, {2, 12}}));
    tg_loader_free(ld);
}

TEST_F(LoaderTest, RetainsDataSet) {
    long before = tg_live_tensors();
    tg_loader *ld;
    tg_scope_begin();
    Data d = make_data(5);
    ld = tg_loader_new(d.x, d.y, tg_loader_opts{2});
    tg_scope_end(); // the caller's references are gone; the loader's remain
    EXPECT_EQ(tg_live_tensors(), before + 2);
    auto ids = epoch_ids(ld, 0);
    EXPECT_EQ(flat(ids), (std::vector<int64_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(tg_live_tensors(), before + 2); // per-batch scopes freed every batch
    tg_loader_free(ld);
    EXPECT_EQ(tg_live_tensors(), before);
}

TEST_F(LoaderTest, Errors) {
    Data d = make_data(5);
    tg_tensor *y4 = tensor_i64({1, 2, 3, 4}, TG_SHAPE(4));
    EXPECT_EQ(tg_loader_new(d.x, y4, tg_loader_opts{2}), nullptr);
    EXPECT_ERROR_CONTAINS("x has 5 samples but y has 4");
    EXPECT_EQ(tg_loader_new(d.x, d.y, tg_loader_opts{-1}), nullptr);
    EXPECT_ERROR_CONTAINS("batch_size -1 is negative");
    tg_clear_error(); // a NULL input does not overwrite a pending message
    EXPECT_EQ(tg_loader_new(nullptr, d.y, tg_loader_opts{2}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_loader_new: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_loader_new(tg_full(TG_SCALAR_SHAPE, 1, tg_opts{}), nullptr, tg_loader_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("0-dim x");
    int64_t bad = 5;
    EXPECT_EQ(tg_take_samples(d.x, &bad, 1), nullptr);
    EXPECT_ERROR_CONTAINS("index 5 is out of range for 5 samples");
    int64_t idx[3] = {4, 0, 4};
    EXPECT_TRUE(tensor_near(tg_take_samples(d.y, idx, 3), {40, 0, 40}, 0));
    tg_loader_free(nullptr);
}

TEST_F(LoaderTest, MoveToDevice) {
    if (!tg_cuda_available()) GTEST_SKIP() << "no CUDA device";
    Data d = make_data(6);
    tg_loader *ld = tg_loader_new(d.x, d.y, tg_loader_opts{4, true, 5, false, tg_cuda(0)});
    tg_tensor *bx, *by;
    int64_t seen = 0;
    TG_FOR_EACH_BATCH(ld, bx, by) {
        EXPECT_EQ(tg_device_of(bx).kind, TG_DEVICE_CUDA);
        EXPECT_EQ(tg_device_of(by).kind, TG_DEVICE_CUDA);
        seen += tg_size(bx, 0);
    }
    EXPECT_EQ(seen, 6);
    tg_loader_free(ld);
    // A data set already on the GPU: gathered there (same order as on the host),
    // batches stay there.
    tg_tensor *gx = tg_tensor_to(d.x, tg_cuda(0));
    tg_tensor *gy = tg_tensor_to(d.y, tg_cuda(0));
    tg_loader *host = tg_loader_new(d.x, d.y, tg_loader_opts{4, true, 5});
    ld = tg_loader_new(gx, gy, tg_loader_opts{4, true, 5});
    ASSERT_NE(ld, nullptr) << tg_last_error();
    tg_loader_reset(ld, 0);
    TG_SCOPE {
        ASSERT_TRUE(tg_loader_next(ld, &bx, &by));
        EXPECT_EQ(tg_device_of(bx).kind, TG_DEVICE_CUDA);
    }
    EXPECT_EQ(epoch_ids(ld, 1), epoch_ids(host, 1));
    tg_loader_free(ld);
    tg_loader_free(host);
}

} // namespace

TEST_F(LoaderTest, SeekResumesMidEpochAndEndsItEarly) {
    Data d = make_data(50);
    tg_loader *ld = tg_loader_new(d.x, d.y, tg_loader_opts{7, true, 42});
    std::vector<std::vector<int64_t>> full = epoch_ids(ld, 2); // 8 batches: 7 x 7 + 1
    ASSERT_EQ(full.size(), 8u);
    // Resuming at batch 5 of epoch 2 gives batches 5.. of the uninterrupted epoch.
    tg_loader_reset(ld, 2);
    ASSERT_EQ(tg_loader_seek(ld, 5), TG_OK);
    std::vector<std::vector<int64_t>> rest;
    tg_tensor *bx, *by;
    TG_FOR_EACH_BATCH(ld, bx, by) {
        std::vector<int64_t> ids;
        for (double label : values(by)) ids.push_back((int64_t)label / 10); // make_data: y = 10 * id
        rest.push_back(ids);
    }
    EXPECT_EQ(rest, std::vector<std::vector<int64_t>>(full.begin() + 5, full.end()));
    // Ending early from inside the loop: seek past the end, then continue.
    tg_loader_reset(ld, 2);
    int seen = 0;
    TG_FOR_EACH_BATCH(ld, bx, by) {
        if (++seen == 3) tg_loader_seek(ld, tg_loader_num_batches(ld));
    }
    EXPECT_EQ(seen, 3);
    tg_clear_error();
    EXPECT_EQ(tg_loader_seek(ld, -1), TG_ERROR);
    EXPECT_STREQ(tg_last_error(), "tg_loader_seek: batch -1 is negative");
    tg_loader_free(ld);
}

// ---- sharding across ranks: torch.utils.data.DistributedSampler ----

TEST_F(TgTest, DistributedIndicesMatchPyTorch) {
    auto fixtures = load_fixtures("tests/fixtures/distributed_sampler.txt");
    struct Case {
        int64_t n;
        int world;
        bool shuffle;
        uint64_t seed;
        bool drop_last;
    };
    int checked = 0;
    for (Case c : {Case{10, 3, true, 0, false}, Case{10, 3, true, 0, true}, Case{10, 3, false, 0, false},
                   Case{100, 4, true, 7, false}, Case{5, 8, true, 3, false}, Case{5, 8, true, 3, true},
                   Case{64, 2, true, 1, false}}) {
        for (int64_t epoch : {0, 1, 5}) {
            std::vector<int64_t> all;
            for (int rank = 0; rank < c.world; rank++) {
                char name[128];
                snprintf(name, sizeof name, "n%lld_w%d_s%d_seed%llu_d%d_e%lld_r%d", (long long)c.n, c.world, c.shuffle,
                         (unsigned long long)c.seed, c.drop_last, (long long)epoch, rank);
                const FixtureTensor &want = fixture_tensor(fixtures, name);
                std::vector<int64_t> got(c.n + c.world);
                int64_t count =
                    tg_distributed_indices(got.data(), c.n, c.world, rank, c.shuffle, c.seed, epoch, c.drop_last);
                ASSERT_EQ(count, (int64_t)want.data.size()) << name;
                EXPECT_EQ(tg_distributed_indices(nullptr, c.n, c.world, rank, c.shuffle, c.seed, epoch, c.drop_last),
                          count);
                for (int64_t i = 0; i < count; i++) EXPECT_EQ(got[i], (int64_t)want.data[i]) << name << " at " << i;
                all.insert(all.end(), got.begin(), got.begin() + count);
                checked++;
            }
            // Disjoint shards when no padding is needed.
            if (c.drop_last || c.n % c.world == 0) {
                std::sort(all.begin(), all.end());
                EXPECT_EQ(std::unique(all.begin(), all.end()), all.end());
            }
        }
    }
    EXPECT_EQ(checked, 93);
    EXPECT_EQ(tg_distributed_indices(nullptr, 10, 2, 2, true, 0, 0, false), 0); // rank out of range
}

// Two sharded loaders see the batches of one DistributedSampler each; together the
// samples of the epoch's permutation.
TEST_F(TgTest, ShardedLoaderDeliversThisRanksShard) {
    tg_tensor *x = tg_arange(0, 10, 1, (tg_opts){.dtype = TG_FLOAT64});
    auto fixtures = load_fixtures("tests/fixtures/distributed_sampler.txt");
    for (int rank = 0; rank < 3; rank++) {
        tg_loader *ld = tg_loader_new(
            x, nullptr, (tg_loader_opts){.batch_size = 3, .shuffle = true, .world_size = 3, .rank = rank});
        ASSERT_NE(ld, nullptr);
        EXPECT_EQ(tg_loader_num_batches(ld), 2); // 4 samples per rank (10 padded to 12)
        for (int64_t epoch : {0, 1}) {
            char name[128];
            snprintf(name, sizeof name, "n10_w3_s1_seed0_d0_e%lld_r%d", (long long)epoch, rank);
            std::vector<double> seen;
            tg_tensor *bx, *by;
            TG_FOR_EACH_BATCH(ld, bx, by) {
                for (double v : values(bx)) seen.push_back(v);
            }
            EXPECT_EQ(seen, fixture_tensor(fixtures, name).data) << name;
        }
        tg_loader_free(ld);
    }
    tg_clear_error();
    EXPECT_EQ(tg_loader_new(x, nullptr, (tg_loader_opts){.world_size = 2, .rank = 2}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_loader_new: rank 2 is not in [0, world_size 2)");
    tg_clear_error();
    EXPECT_EQ(tg_loader_new(x, nullptr, (tg_loader_opts){.world_size = -1}), nullptr);
    EXPECT_ERROR_CONTAINS("rank 0 is not in [0, world_size -1)");
}
