// tg_adamw_decay_groups: nanoGPT's split (matrices decayed, vectors not, frozen
// parameters left out) and one AdamW step that decays only group 0.
#include <cmath>
#include <vector>

#include "tapegrad.h"
#include "test_util.h"

class DecayGroupsTest : public TgTest {};

TEST_F(DecayGroupsTest, MatricesDecayVectorsDoNot) {
    tg_manual_seed(1);
    tg_module *m = TG_NN_SEQUENTIAL(tg_nn_embedding(10, 4, tg_embedding_opts{}),
                                    tg_nn_layer_norm(TG_SHAPE(4), tg_layer_norm_opts{}),
                                    tg_nn_linear(4, 3, tg_linear_opts{}), tg_nn_linear(3, 2, tg_linear_opts{}));
    ASSERT_NE(m, nullptr) << tg_last_error();
    tg_requires_grad_(tg_module_get(m, "3.weight"), false); // frozen: in neither group
    tg_optim *opt = tg_adamw_decay_groups(m, tg_adamw_opts{.lr = 0.1, .weight_decay = 0.5});
    ASSERT_NE(opt, nullptr) << tg_last_error();
    ASSERT_EQ(tg_optim_num_groups(opt), 2);
    std::vector<tg_tensor *> want = {tg_module_get(m, "0.weight"), tg_module_get(m, "2.weight"),
                                     tg_module_get(m, "1.weight"), tg_module_get(m, "1.bias"),
                                     tg_module_get(m, "2.bias"),   tg_module_get(m, "3.bias")};
    ASSERT_EQ(tg_optim_num_params(opt), 6);
    for (int i = 0; i < 6; i++) EXPECT_EQ(tg_optim_param(opt, i), want[(size_t)i]) << i;
    EXPECT_EQ(tg_optim_group_num_params(opt, 0), 2);
    EXPECT_EQ(tg_optim_group_opts(opt, 0).weight_decay, 0.5);
    EXPECT_EQ(tg_optim_group_opts(opt, 1).weight_decay, 0.0);
    EXPECT_EQ(tg_optim_group_opts(opt, 1).lr, 0.1);

    // Adam's first step moves each element by lr * g / (|g| + eps): with g = 1, lr; AdamW
    // first multiplies a decayed parameter by 1 - lr * weight_decay
    std::vector<std::vector<double>> before;
    for (tg_tensor *p : want) {
        before.push_back(values(p));
        tg_set_grad(p, tg_ones_like(p));
    }
    ASSERT_EQ(tg_optim_step(opt), TG_OK) << tg_last_error();
    for (size_t i = 0; i < want.size(); i++) {
        std::vector<double> expect = before[i];
        for (double &v : expect) v = (i < 2 ? v * (1 - 0.1 * 0.5) : v) - 0.1 / (1 + 1e-8);
        EXPECT_TRUE(tensor_near(want[i], expect, 1e-6)) << i;
    }
    tg_optim_free(opt);
    // defaults: AdamW's 1e-2 on the matrices
    opt = tg_adamw_decay_groups(m, tg_adamw_opts{});
    ASSERT_NE(opt, nullptr) << tg_last_error();
    EXPECT_EQ(tg_optim_group_opts(opt, 0).weight_decay, 1e-2);
    tg_optim_free(opt);
    tg_clear_error();
    EXPECT_EQ(tg_adamw_decay_groups(nullptr, tg_adamw_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_adamw_decay_groups: model is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_adamw_decay_groups(m, tg_adamw_opts{.lr = -1}), nullptr);
    EXPECT_ERROR_CONTAINS("AdamW");
    tg_module_free(m);
}
