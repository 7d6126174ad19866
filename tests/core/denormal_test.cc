// Subnormal flushing (core/denormal.h), as torch.set_flush_denormal: off by default
// (IEEE subnormals, PyTorch's results), on for the calling thread and for the pool's
// workers running that thread's loops, and off again, checked on a product whose exact
// result is subnormal, computed on one thread and split over the pool.
#include <cfloat>
#include <cmath>

#include "test_util.h"

namespace {

class Denormal : public TgTest {
  protected:
    void TearDown() override {
        tg_set_flush_denormal(false);
        tg_set_num_threads(threads_);
        TgTest::TearDown();
    }
    int threads_ = tg_get_num_threads();
};

// x * y for n elements with x = 2^-70 and y = 2^-70: 2^-140, a float32 subnormal (exact).
std::vector<double> subnormal_products(int64_t n) {
    tg_tensor *x = tg_full(TG_SHAPE(n), std::ldexp(1.0, -70), (tg_opts){TG_FLOAT32});
    return values(tg_mul(x, x));
}

TEST_F(Denormal, OffByDefaultOnForTheCallerAndItsPoolThenOffAgain) {
    ASSERT_FALSE(tg_get_flush_denormal());
    const double subnormal = std::ldexp(1.0, -140);
    ASSERT_LT(subnormal, FLT_MIN);
    for (int threads : {1, 2, 4}) {
        tg_set_num_threads(threads);
        for (int64_t n : {(int64_t)1, (int64_t)1 << 20}) { // one element; enough to be split
            for (double v : subnormal_products(n))
                ASSERT_EQ(v, subnormal) << n << " elements, " << threads << " threads";
            ASSERT_TRUE(tg_set_flush_denormal(true));
            ASSERT_TRUE(tg_get_flush_denormal());
            for (double v : subnormal_products(n))
                ASSERT_EQ(v, 0.0) << n << " elements flushed, " << threads << " threads";
            ASSERT_TRUE(tg_set_flush_denormal(false));
            ASSERT_FALSE(tg_get_flush_denormal());
            for (double v : subnormal_products(n))
                ASSERT_EQ(v, subnormal) << n << " elements again, " << threads << " threads";
        }
    }
}

// A subnormal input reads as zero while flushing (DAZ): 2^-140 * 2^100 is 2^-40 in IEEE.
TEST_F(Denormal, SubnormalInputsReadAsZeroWhileFlushing) {
    tg_tensor *tiny = tg_full(TG_SHAPE(1 << 20), std::ldexp(1.0, -140), (tg_opts){TG_FLOAT32});
    tg_tensor *big = tg_full(TG_SHAPE(1 << 20), std::ldexp(1.0, 100), (tg_opts){TG_FLOAT32});
    tg_set_num_threads(2);
    for (double v : values(tg_mul(tiny, big))) ASSERT_EQ(v, std::ldexp(1.0, -40));
    ASSERT_TRUE(tg_set_flush_denormal(true));
    for (double v : values(tg_mul(tiny, big))) ASSERT_EQ(v, 0.0);
}

} // namespace
