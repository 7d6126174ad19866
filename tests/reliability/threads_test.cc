// Thread safety as documented: separate threads with separate graphs train separate
// models at the same time without interfering, and error messages are per thread.
#include <thread>

#include "test_util.h"

namespace {

// Trains a small MLP for `steps` on data drawn from a fixed seed; returns the losses.
// Weights are set deterministically (not from the shared generator) so that the
// result does not depend on which thread draws first.
std::vector<double> train(int steps, double lr) {
    std::vector<double> losses;
    TG_SCOPE {
        tg_module *m = TG_NN_SEQUENTIAL(tg_nn_linear(8, 16, tg_linear_opts{}), tg_nn_tanh(),
                                        tg_nn_linear(16, 3, tg_linear_opts{}));
        int n = 0;
        tg_tensor *const *params = tg_parameters(m, &n);
        TG_NO_GRAD {
            for (int i = 0; i < n; i++) {
                tg_tensor *p = params[i];
                tg_tensor *v = tg_mul_scalar(tg_sin(tg_arange(0, (double)tg_numel(p), 1, tg_opts{})), 0.3);
                tg_copy_(p, tg_reshape(v, tg_shape_of(p)));
            }
        }
        tg_optim *opt = tg_sgd(m, tg_sgd_opts{lr, 0.9});
        tg_tensor *x = tg_reshape(tg_cos(tg_arange(0, 32 * 8, 1, tg_opts{})), TG_SHAPE(32, 8));
        std::vector<int64_t> labels(32);
        for (int i = 0; i < 32; i++) labels[i] = i % 3;
        tg_tensor *y = tensor_i64(labels, TG_SHAPE(32));
        for (int s = 0; s < steps; s++) {
            TG_SCOPE {
                tg_tensor *loss = tg_cross_entropy(tg_forward(m, x), y);
                tg_backward(loss);
                tg_optim_step(opt);
                tg_optim_zero_grad(opt);
                losses.push_back(tg_item(loss));
            }
        }
        tg_optim_free(opt);
        tg_module_free(m);
    }
    return losses;
}

} // namespace

TEST(Threads, TwoThreadsTrainSeparateModelsWithoutInterference) {
    long live = tg_live_tensors(), nodes = tg_live_graph_nodes();
    const std::vector<double> alone_a = train(300, 0.05), alone_b = train(300, 0.2);
    std::vector<double> a, b;
    std::thread ta([&] { a = train(300, 0.05); });
    std::thread tb([&] { b = train(300, 0.2); });
    ta.join();
    tb.join();
    EXPECT_EQ(a, alone_a); // bit for bit: nothing shared between the two runs
    EXPECT_EQ(b, alone_b);
    EXPECT_NE(a, b);
    EXPECT_LT(a.back(), a.front());
    EXPECT_EQ(tg_live_tensors(), live);
    EXPECT_EQ(tg_live_graph_nodes(), nodes);
}

TEST(Threads, ErrorsAndGradModeArePerThread) {
    tg_clear_error();
    std::string seen_in_thread;
    bool grad_in_thread = false;
    TG_NO_GRAD {
        std::thread t([&] {
            grad_in_thread = tg_is_grad_enabled(); // a new thread starts with grad on
            tg_zeros(TG_SHAPE(-5), tg_opts{});
            seen_in_thread = tg_last_error();
        });
        t.join();
    }
    EXPECT_TRUE(grad_in_thread);
    EXPECT_EQ(seen_in_thread, "tg_zeros: negative size -5 in shape [-5]");
    EXPECT_STREQ(tg_last_error(), "");
}
