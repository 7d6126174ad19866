// The loader's worker threads: batches in the same order whatever num_workers and
// prefetch_factor, PyTorch's worker seeds for random transforms, a failing worker's
// error at its batch, freeing mid-epoch, persistent workers.
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

#include "test_util.h"
#include "core/rng_impl.h"

namespace {

class LoaderWorkersTest : public TgTest {};

// Sample i: x = [i, i * i] (float32), y = i (0-dim int64); fails for index `fail_at`;
// sleeps `delay_us` per sample (so that workers have batches in flight).
struct Squares {
    int64_t fail_at = -1;
    int delay_us = 0;
    std::atomic<int> calls{0};
};
tg_status squares_get(void *ctx, int64_t i, tg_tensor **x, tg_tensor **y) {
    Squares *s = (Squares *)ctx;
    s->calls++;
    if (s->delay_us) usleep(s->delay_us);
    if (i == s->fail_at) return tg_error("boom at %lld", (long long)i);
    float v[2] = {(float)i, (float)(i * i)};
    *x = tg_from_data(v, TG_SHAPE(2), tg_opts{TG_FLOAT32, TG_CPU, false});
    *y = tg_full(TG_SCALAR_SHAPE, (double)i, tg_opts{TG_INT64, TG_CPU, false});
    return TG_OK;
}

// Every batch of a pass: x's values, then y's.
std::vector<std::vector<double>> pass(tg_loader *ld) {
    std::vector<std::vector<double>> out;
    tg_tensor *bx, *by;
    TG_FOR_EACH_BATCH(ld, bx, by) {
        std::vector<double> v = values(bx);
        if (by) {
            std::vector<double> yv = values(by);
            v.insert(v.end(), yv.begin(), yv.end());
        }
        out.push_back(v);
    }
    return out;
}

TEST_F(LoaderWorkersTest, TensorDataSameBatchesForAnyWorkerCount) {
    std::vector<float> xs;
    std::vector<int64_t> ys;
    for (int i = 0; i < 37; i++) xs.push_back((float)i), xs.push_back((float)(100 + i)), ys.push_back(i);
    tg_tensor *x = tensor_f32(xs, TG_SHAPE(37, 2)), *y = tensor_i64(ys, TG_SHAPE(37));
    // Persistent workers draw no base seed after the first pass, so later epochs of the
    // loader's own generator differ from non-persistent ones (as PyTorch's): two references.
    std::vector<std::vector<std::vector<double>>> want[2];
    for (bool persistent : {false, true}) {
        for (int workers : {0, 1, 2, 3}) {
            if (workers == 0 && persistent) continue;
            for (int prefetch : {1, 2, 5}) {
                if (workers == 0 && prefetch > 1) continue;
                tg_loader_opts o = {};
                o.batch_size = 4;
                o.shuffle = true;
                o.seed = 1;
                o.num_workers = workers;
                o.prefetch_factor = prefetch;
                o.persistent_workers = persistent;
                tg_loader *ld = tg_loader_new(x, y, o);
                ASSERT_NE(ld, nullptr) << tg_last_error();
                std::vector<std::vector<std::vector<double>>> got = {pass(ld), pass(ld), pass(ld)};
                EXPECT_EQ(got[0].size(), 10u);
                if (want[persistent].empty()) want[persistent] = got;
                EXPECT_EQ(got, want[persistent])
                    << workers << " workers, prefetch " << prefetch << ", persistent " << persistent;
                tg_loader_free(ld);
            }
        }
    }
    EXPECT_EQ(want[1][0], want[0][0]); // the first epoch is the same
    EXPECT_NE(want[1][1], want[0][1]);
}

TEST_F(LoaderWorkersTest, DatasetSameBatchesForAnyWorkerCountWithSeek) {
    Squares s;
    tg_dataset ds = {23, squares_get, &s};
    std::vector<std::vector<double>> want;
    for (int workers : {0, 2, 3}) {
        tg_loader_opts o = {};
        o.batch_size = 5;
        o.shuffle = true;
        o.seed = 7;
        o.num_workers = workers;
        tg_loader *ld = tg_loader_new_dataset(ds, o);
        ASSERT_NE(ld, nullptr) << tg_last_error();
        std::vector<std::vector<double>> got = pass(ld);
        ASSERT_EQ(got.size(), 5u);
        if (want.empty()) {
            want = got;
            // The first batch's samples are (i, i^2) pairs, and y follows x.
            for (int k = 0; k < 5; k++) EXPECT_EQ(want[0][2 * k + 1], want[0][2 * k] * want[0][2 * k]);
            EXPECT_EQ(want[0][10], want[0][0]);
        }
        EXPECT_EQ(got, want) << workers << " workers";
        // Seeking mid-epoch restarts the workers at that batch.
        tg_loader_reset(ld, 0);
        tg_tensor *bx, *by;
        ASSERT_TRUE(tg_loader_next(ld, &bx, &by));
        ASSERT_EQ(tg_loader_seek(ld, 3), TG_OK);
        ASSERT_TRUE(tg_loader_next(ld, &bx, &by)) << tg_last_error();
        EXPECT_EQ(values(bx)[0], want[3][0]) << workers << " workers after a seek";
        tg_loader_free(ld);
    }
}

TEST_F(LoaderWorkersTest, FailingWorkerIsAnErrorAtItsBatch) {
    Squares s;
    s.fail_at = 13; // batch 3 of 4-sample batches: worker 3 % 2 = 1
    tg_loader_opts o = {};
    o.batch_size = 4;
    o.num_workers = 2;
    tg_loader *ld = tg_loader_new_dataset(tg_dataset{20, squares_get, &s}, o);
    ASSERT_NE(ld, nullptr);
    tg_tensor *bx, *by;
    for (int b = 0; b < 3; b++) ASSERT_TRUE(tg_loader_next(ld, &bx, &by)) << b << ": " << tg_last_error();
    EXPECT_FALSE(tg_loader_next(ld, &bx, &by));
    EXPECT_EQ(bx, nullptr);
    EXPECT_ERROR_CONTAINS("tg_loader_next: worker 1 failed on batch 3: tg_loader_next: sample 13: boom at 13");
    // As PyTorch: the failed batch is skipped and the pass goes on.
    ASSERT_TRUE(tg_loader_next(ld, &bx, &by)) << tg_last_error();
    EXPECT_EQ(values(by), (std::vector<double>{16, 17, 18, 19}));
    EXPECT_FALSE(tg_loader_next(ld, &bx, &by));
    tg_loader_free(ld);
}

TEST_F(LoaderWorkersTest, FreeMidEpochJoinsWorkers) {
    Squares s;
    s.delay_us = 2000;
    for (bool persistent : {false, true}) {
        tg_loader_opts o = {};
        o.batch_size = 2;
        o.num_workers = 3;
        o.prefetch_factor = 2;
        o.persistent_workers = persistent;
        tg_loader *ld = tg_loader_new_dataset(tg_dataset{1000, squares_get, &s}, o);
        ASSERT_NE(ld, nullptr);
        tg_tensor *bx, *by;
        ASSERT_TRUE(tg_loader_next(ld, &bx, &by));
        EXPECT_EQ(values(by), (std::vector<double>{0, 1}));
        tg_loader_free(ld); // batches in flight are dropped; no hang, no leak (TgTest checks)
    }
    // Bounded prefetch: the workers made at most 3 * 2 batches ahead, not the epoch.
    EXPECT_LT(s.calls.load(), 2 * (2 + 2 * 3 * 2 + 3 * 2) + 1);
}

// Random transforms in worker w draw from a generator seeded base_seed + w, where
// base_seed is the pass's draw from the loader's generator (PyTorch's workers).
TEST_F(LoaderWorkersTest, WorkerTransformsUseBaseSeedPlusWorkerId) {
    const int n = 12, batch = 3, workers = 2;
    std::vector<uint8_t> pix(n * 1 * 4 * 4);
    for (size_t i = 0; i < pix.size(); i++) pix[i] = (uint8_t)(i * 37 + 11);
    tg_tensor *x = tg_from_data(pix.data(), TG_SHAPE(n, 1, 4, 4), tg_opts{TG_UINT8, TG_CPU, false});
    tg_transform steps[] = {tg_transform_random_crop(4, 2, TG_CROP_PAD_CONSTANT),
                            tg_transform_random_horizontal_flip(0.5)};
    tg_compose c = tg_compose_of(2, steps);
    tg_loader_opts o = {};
    o.batch_size = batch;
    o.seed = 42; // unshuffled, own generator: the pass draws only the base seed from it
    o.transform = c;
    o.num_workers = workers;
    tg_loader *ld = tg_loader_new(x, nullptr, o);
    ASSERT_NE(ld, nullptr) << tg_last_error();
    std::vector<std::vector<double>> got = pass(ld);
    tg_loader_free(ld);
    // The expected batches, made here in order.
    tg_mt19937 g;
    tg_mt19937_seed(&g, 42);
    uint64_t base = tg_mt19937_next64(&g) % (1ull << 63);
    std::vector<tg_mt19937> gens(workers);
    for (int w = 0; w < workers; w++) tg_mt19937_seed(&gens[w], base + w);
    ASSERT_EQ(got.size(), 4u);
    bool any_differs_from_input = false;
    for (int b = 0; b < 4; b++) {
        std::vector<double> want;
        for (int k = 0; k < batch; k++) {
            int i = b * batch + k;
            tg_tensor *img = tg_from_data(pix.data() + i * 16, TG_SHAPE(1, 4, 4), tg_opts{TG_UINT8, TG_CPU, false});
            std::vector<double> v = values(tg_compose_apply(&c, img, &gens[b % workers]));
            any_differs_from_input |= v != values(img);
            want.insert(want.end(), v.begin(), v.end());
        }
        EXPECT_EQ(got[b], want) << "batch " << b;
    }
    EXPECT_TRUE(any_differs_from_input);
}

// Without workers the transforms draw from the default generator, after the pass's
// base seed, in sample order: tg_manual_seed gives torchvision's numbers.
TEST_F(LoaderWorkersTest, NoWorkersTransformsDrawFromDefaultGenerator) {
    std::vector<uint8_t> pix(6 * 3 * 3);
    for (size_t i = 0; i < pix.size(); i++) pix[i] = (uint8_t)(i * 5);
    tg_tensor *x = tg_from_data(pix.data(), TG_SHAPE(6, 3, 3), tg_opts{TG_UINT8, TG_CPU, false});
    tg_transform steps[] = {tg_transform_random_crop(3, 1, TG_CROP_PAD_REFLECT), tg_transform_to_tensor()};
    tg_loader_opts o = {};
    o.batch_size = 6;
    o.transform = tg_compose_of(2, steps);
    tg_loader *ld = tg_loader_new(x, nullptr, o);
    tg_manual_seed(3);
    std::vector<std::vector<double>> got = pass(ld);
    tg_loader_free(ld);
    tg_manual_seed(3);
    tg_rng_state *s = tg_rng_lock_cpu();
    (void)tg_mt19937_next64(&s->cpu); // the pass's base seed
    tg_rng_unlock_cpu();
    std::vector<double> want;
    for (int i = 0; i < 6; i++) {
        tg_tensor *img = tg_from_data(pix.data() + i * 9, TG_SHAPE(3, 3), tg_opts{TG_UINT8, TG_CPU, false});
        std::vector<double> v = values(tg_compose_apply(&o.transform, img, nullptr));
        want.insert(want.end(), v.begin(), v.end());
    }
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0], want);
}

// persistent_workers: only the first pass draws a base seed from the default generator.
TEST_F(LoaderWorkersTest, PersistentWorkersDrawOneBaseSeed) {
    tg_tensor *x = tensor_f32({1, 2, 3, 4}, TG_SHAPE(4));
    for (bool persistent : {false, true}) {
        tg_loader_opts o = {};
        o.batch_size = 2;
        o.num_workers = 1;
        o.persistent_workers = persistent;
        tg_loader *ld = tg_loader_new(x, nullptr, o);
        tg_manual_seed(5);
        for (int e = 0; e < 3; e++) EXPECT_EQ(pass(ld).size(), 2u);
        double after = values(tg_randint(0, 1000000, TG_SHAPE(1), tg_opts{TG_INT64, TG_CPU, false}))[0];
        tg_loader_free(ld);
        tg_manual_seed(5);
        tg_rng_state *s = tg_rng_lock_cpu();
        for (int e = 0; e < (persistent ? 1 : 3); e++) (void)tg_mt19937_next64(&s->cpu);
        tg_rng_unlock_cpu();
        double want = values(tg_randint(0, 1000000, TG_SHAPE(1), tg_opts{TG_INT64, TG_CPU, false}))[0];
        EXPECT_EQ(after, want) << "persistent " << persistent;
        // PyTorch 1.13: torch.manual_seed(5); three passes of DataLoader(num_workers=2,
        // persistent_workers=...); torch.randint(0, 1000000, (1,)).item(). (Its workers
        // reported torch.initial_seed() = 4095051218741643470 + worker id in every pass
        // when persistent, a new base each pass otherwise.)
        EXPECT_EQ(after, persistent ? 766767 : 403792);
    }
}

TEST_F(LoaderWorkersTest, OptionErrors) {
    tg_tensor *x = tensor_f32({1, 2}, TG_SHAPE(2));
    tg_loader_opts o = {};
    o.persistent_workers = true;
    EXPECT_EQ(tg_loader_new(x, nullptr, o), nullptr);
    EXPECT_ERROR_CONTAINS("persistent_workers needs num_workers > 0");
    o = {};
    o.num_workers = -1;
    EXPECT_EQ(tg_loader_new(x, nullptr, o), nullptr);
    EXPECT_ERROR_CONTAINS("num_workers -1");
    EXPECT_EQ(tg_loader_new_dataset(tg_dataset{3, nullptr, nullptr}, tg_loader_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("get is NULL");
    // pin_memory is accepted (a no-op without a pinned allocator, as PyTorch without CUDA).
    o = {};
    o.pin_memory = true;
    o.num_workers = 1;
    tg_loader *ld = tg_loader_new(x, nullptr, o);
    ASSERT_NE(ld, nullptr);
    EXPECT_EQ(pass(ld).size(), 2u);
    tg_loader_free(ld);
}

} // namespace
