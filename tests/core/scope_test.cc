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

TEST_F(TgTest, ScopeReturnHandsToParent) {
    long before = tg_live_tensors();
    tg_tensor *kept = nullptr;
    TG_SCOPE {
        TG_SCOPE {
            tg_tensor *tmp = tg_ones(TG_SHAPE(4), tg_opts{});
            kept = tg_scope_return(tg_mul_scalar(tmp, 3));
        }
        EXPECT_EQ(tg_live_tensors(), before + 1); // tmp freed, kept alive
        EXPECT_TRUE(tensor_near(kept, {3, 3, 3, 3}, 0));
    }
    EXPECT_EQ(tg_live_tensors(), before); // freed with the outer scope
}

TEST(TgScope, ReturnFromOutermostScopeGivesOwnershipToCaller) {
    long before = tg_live_tensors();
    tg_tensor *t = nullptr;
    TG_SCOPE { t = tg_scope_return(tg_zeros(TG_SHAPE(2), tg_opts{})); }
    EXPECT_EQ(tg_live_tensors(), before + 1);
    tg_release(t);
    EXPECT_EQ(tg_live_tensors(), before);
}

TEST(TgScope, OutsideAnyScopeTheCallerOwns) {
    long before = tg_live_tensors(), storages = tg_live_storages();
    tg_tensor *t = tg_zeros(TG_SHAPE(3), tg_opts{});
    tg_tensor *v = tg_view(t, TG_SHAPE(3, 1));
    EXPECT_EQ(tg_live_storages(), storages + 1); // one storage shared by the view
    tg_release(t);
    EXPECT_EQ(tg_live_tensors(), before + 1);
    EXPECT_EQ(tg_live_storages(), storages + 1); // the view keeps it alive
    tg_release(v);
    EXPECT_EQ(tg_live_tensors(), before);
    EXPECT_EQ(tg_live_storages(), storages);
}

TEST_F(TgTest, RetainKeepsPastScope) {
    long before = tg_live_tensors();
    tg_tensor *t = nullptr;
    TG_SCOPE { t = tg_retain(tg_ones(TG_SHAPE(2), tg_opts{})); }
    EXPECT_EQ(tg_live_tensors(), before + 1);
    EXPECT_TRUE(tensor_near(t, {1, 1}, 0));
    tg_release(t);
    EXPECT_EQ(tg_live_tensors(), before);
}

TEST_F(TgTest, NestedScopesUnwindInOrder) {
    int depth = tg_scope_depth();
    TG_SCOPE {
        EXPECT_EQ(tg_scope_depth(), depth + 1);
        TG_SCOPE { EXPECT_EQ(tg_scope_depth(), depth + 2); }
        EXPECT_EQ(tg_scope_depth(), depth + 1);
    }
    EXPECT_EQ(tg_scope_depth(), depth);
}

TEST_F(TgTest, GraphIsFreedWithItsLastTensor) {
    long nodes = tg_live_graph_nodes();
    TG_SCOPE {
        tg_tensor *x = tg_requires_grad_(tg_ones(TG_SHAPE(3), tg_opts{}), true);
        tg_tensor *y = tg_exp(tg_mul(x, x));
        EXPECT_EQ(tg_live_graph_nodes(), nodes + 2);
        (void)y;
    }
    EXPECT_EQ(tg_live_graph_nodes(), nodes);
}
