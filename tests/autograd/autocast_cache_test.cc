// Autocast's cast cache (autograd/autocast.h), torch.autocast(cache_enabled=True): a
// float32 leaf that requires grad is cast once per outermost region, so the gradients
// of its uses meet at one bfloat16 cast and are summed in bfloat16 there. A weight w = 1
// used by two products with x1 = 1 and x2 = 2^-9 gets 1 + 2^-9 summed in bfloat16 (1.0)
// with the cache and 1.001953125 (each use widened, summed in float32) without it:
// PyTorch 1.13 gives those two numbers (cache_enabled True / False), and 1.001953125 for
// a non-leaf and for uses in two separate regions.
#include "test_util.h"

namespace {

class AutocastCacheTest : public TgTest {
  protected:
    tg_tensor *w = nullptr, *x1 = nullptr, *x2 = nullptr;
    void SetUp() override {
        TgTest::SetUp();
        w = tg_requires_grad_(tg_ones(TG_SHAPE(1, 1), tg_opts{}), true);
        x1 = tg_ones(TG_SHAPE(1, 1), tg_opts{});
        x2 = tg_full(TG_SHAPE(1, 1), 0x1p-9, tg_opts{});
    }
    double grad_of_two_uses(tg_tensor *weight) {
        tg_tensor *loss = nullptr;
        TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) { loss = tg_sum(tg_add(tg_matmul(weight, x1), tg_matmul(weight, x2))); }
        EXPECT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
        EXPECT_EQ(tg_dtype_of(tg_grad(w)), TG_FLOAT32);
        return tg_item(tg_grad(w));
    }
};

TEST_F(AutocastCacheTest, ALeafUsedTwiceIsCastOnceAsPyTorch) {
    EXPECT_TRUE(tg_is_autocast_cache_enabled());
    EXPECT_EQ(grad_of_two_uses(w), 1.0);
}

TEST_F(AutocastCacheTest, CacheDisabledCastsAtEachUse) {
    EXPECT_TRUE(tg_set_autocast_cache_enabled(false));
    EXPECT_FALSE(tg_is_autocast_cache_enabled());
    EXPECT_EQ(grad_of_two_uses(w), 1.001953125);
    EXPECT_FALSE(tg_set_autocast_cache_enabled(true));
}

TEST_F(AutocastCacheTest, NonLeafIsNotCached) { EXPECT_EQ(grad_of_two_uses(tg_mul_scalar(w, 1.0)), 1.001953125); }

TEST_F(AutocastCacheTest, EmptiedWhenTheOutermostRegionEndsKeptByNestedOnes) {
    tg_tensor *a = nullptr, *b = nullptr;
    TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) { a = tg_matmul(w, x1); }
    TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) { b = tg_matmul(w, x2); }
    ASSERT_EQ(tg_backward(tg_sum(tg_add(a, b))), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_item(tg_grad(w)), 1.001953125); /* two regions, two casts */

    tg_zero_grad(w);
    TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) {
        a = tg_matmul(w, x1);
        TG_AUTOCAST_IF(TG_DEVICE_CPU, TG_BFLOAT16, false) {
            TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) { b = tg_matmul(w, x2); }
        }
    }
    ASSERT_EQ(tg_backward(tg_sum(tg_add(a, b))), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_item(tg_grad(w)), 1.0); /* one region: one cast */
}

TEST_F(AutocastCacheTest, CastAgainAfterAnInPlaceWriteAndAfterNoGrad) {
    TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) {
        EXPECT_EQ(tg_item(tg_matmul(w, x1)), 1.0);
        TG_NO_GRAD { ASSERT_EQ(tg_mul_scalar_(w, 3.0), TG_OK) << tg_last_error(); }
        EXPECT_EQ(tg_item(tg_matmul(w, x1)), 3.0); /* PyTorch's cache would give 1 here */
    }
    tg_tensor *loss = nullptr;
    TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) {
        TG_NO_GRAD { EXPECT_FALSE(tg_requires_grad(tg_matmul(w, x1))); }
        loss = tg_sum(tg_matmul(w, x1)); /* the no_grad cast has no graph: cast again */
    }
    ASSERT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_item(tg_grad(w)), 1.0);
}

} // namespace
