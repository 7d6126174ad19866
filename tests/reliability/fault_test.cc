// Fault handling: an allocation that fails in the middle of a training step is an
// error with a message; the tensors already made stay intact, nothing leaks, and the
// next step works.
#include "test_util.h"

TEST(Faults, FailedAllocationMidStepLeavesTheModelUsable) {
    long live = tg_live_tensors(), storages = tg_live_storages(), nodes = tg_live_graph_nodes();
    TG_SCOPE {
        tg_manual_seed(3);
        tg_module *m = TG_NN_SEQUENTIAL(tg_nn_linear(20, 30, tg_linear_opts{}), tg_nn_relu(),
                                        tg_nn_linear(30, 4, tg_linear_opts{}));
        tg_optim *opt = tg_adam(m, tg_adam_opts{1e-2});
        tg_tensor *x = tg_randn(TG_SHAPE(16, 20), tg_opts{});
        tg_tensor *y = tg_randint(0, 4, TG_SHAPE(16), tg_opts{});
        tg_tensor *w0 = tg_clone(tg_module_get(m, "0.weight"));
        // Fail the k-th allocation of a step, for every k until a step goes through.
        int failures = 0;
        for (long k = 0; k < 200; k++) {
            bool ok = false;
            tg_clear_error();
            TG_SCOPE {
                tg_debug_fail_allocations_after(k);
                tg_tensor *loss = tg_cross_entropy(tg_forward(m, x), y);
                ok = loss && tg_backward(loss) == TG_OK;
                tg_debug_fail_allocations_after(-1);
                if (!ok) {
                    EXPECT_NE(std::string(tg_last_error()).find("out of memory"), std::string::npos) << tg_last_error();
                    failures++;
                }
            }
            tg_debug_fail_allocations_after(-1);
            tg_optim_zero_grad(opt);
            // The parameters were not touched by the failed attempt.
            EXPECT_TRUE(tensor_near(tg_module_get(m, "0.weight"), values(w0), 0));
            if (ok) break;
        }
        EXPECT_GT(failures, 5);
        // And training goes on normally.
        double first = 0, last = 0;
        for (int s = 0; s < 30; s++) {
            TG_SCOPE {
                tg_tensor *loss = tg_cross_entropy(tg_forward(m, x), y);
                ASSERT_EQ(tg_backward(loss), TG_OK);
                ASSERT_EQ(tg_optim_step(opt), TG_OK);
                tg_optim_zero_grad(opt);
                if (s == 0) first = tg_item(loss);
                last = tg_item(loss);
            }
        }
        EXPECT_LT(last, first);
        tg_optim_free(opt);
        tg_module_free(m);
    }
    EXPECT_EQ(tg_live_tensors(), live);
    EXPECT_EQ(tg_live_storages(), storages);
    EXPECT_EQ(tg_live_graph_nodes(), nodes);
}
