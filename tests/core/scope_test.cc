#include "test_util.h"

TEST_F(TgTest, ScopeReleasesTemporaries) {
    long before = tg_live_tensors();
    TG_SCOPE {
        tg_tensor *a = tg_zeros(TG_SHAPE(2, 3), tg_opts{});
        tg_tensor *b = tg_ones(TG_SHAPE(2, 3), tg_opts{});
        EXPECT_EQ(tg_live_tensors(), before + 2);
        (void)a, (void)b;
    }
    EXPECT_EQ(tg_live_tensors(), before);
}
