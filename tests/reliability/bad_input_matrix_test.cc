// The bad-input matrix (reliability issue): for every public op family and module,
// the inputs a user gets wrong. Each case must fail with NULL or a status, record a
// message naming the op and the offending values, leak nothing, and leave the
// library usable. docs/reliability.md reports the number of cases.
#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

struct BadInput {
    const char *what;
    std::vector<const char *> message_parts; // every one must appear in the message
    std::function<bool()> fails;             // runs the call; true when it returned NULL / an error status
};

tg_tensor *f32(tg_shape s) { return tg_zeros(s, tg_opts{}); }
tg_tensor *f64(tg_shape s) { return tg_zeros(s, tg_opts{TG_FLOAT64}); }
tg_tensor *i64(tg_shape s) { return tg_zeros(s, tg_opts{TG_INT64}); }
tg_tensor *leaf(tg_shape s) { return tg_requires_grad_(tg_ones(s, tg_opts{}), true); }
bool null(tg_tensor *t) { return t == nullptr; }
bool err(tg_status s) { return s != TG_OK; }

std::vector<BadInput> cases() {
    std::vector<BadInput> c = {
        // elementwise
        {"add NULL", {"add: input 1 is NULL"}, [] { return null(tg_add(f32(TG_SHAPE(2)), nullptr)); }},
        {"add broadcast", {"add", "[2, 3]", "[4]"}, [] { return null(tg_add(f32(TG_SHAPE(2, 3)), f32(TG_SHAPE(4)))); }},
        {"mul broadcast 3d",
         {"mul", "[2, 3, 4]", "[3, 3]"},
         [] { return null(tg_mul(f32(TG_SHAPE(2, 3, 4)), f32(TG_SHAPE(3, 3)))); }},
        {"log of int64", {"log", "int64"}, [] { return null(tg_log(i64(TG_SHAPE(2)))); }},
        {"where non-bool condition",
         {"tg_where", "bool", "float32"},
         [] { return null(tg_where(f32(TG_SHAPE(2)), f32(TG_SHAPE(2)), f32(TG_SHAPE(2)))); }},
        {"clamp without bounds", {"tg_clamp"}, [] { return null(tg_clamp(f32(TG_SHAPE(2)), NAN, NAN)); }},
        {"cast to no dtype",
         {"tg_cast", "not a tg_dtype"},
         [] { return null(tg_cast(f32(TG_SHAPE(2)), (tg_dtype)TG_NUM_DTYPES)); }},
        {"uniform_ on bfloat16",
         {"tg_uniform_", "bfloat16"},
         [] { return err(tg_uniform_(tg_ones(TG_SHAPE(2), tg_opts{TG_BFLOAT16}), 0, 1)); }},
        {"in-place shape", {"tg_add_", "[3]", "[2]"}, [] { return err(tg_add_(f32(TG_SHAPE(2)), f32(TG_SHAPE(3)))); }},
        // creation
        {"negative size", {"tg_zeros", "-3"}, [] { return null(tg_zeros(TG_SHAPE(2, -3), tg_opts{})); }},
        {"arange zero step", {"tg_arange", "step"}, [] { return null(tg_arange(0, 5, 0, tg_opts{})); }},
        {"item of many", {"tg_item", "[2, 2]"}, [] { return std::isnan(tg_item(f32(TG_SHAPE(2, 2)))); }},
        // reductions
        {"sum dim out of range",
         {"tg_sum", "dim 2", "2 dims"},
         [] { return null(tg_sum_dim(f32(TG_SHAPE(2, 3)), 2, false)); }},
        {"sum repeated dim",
         {"tg_sum", "twice"},
         [] {
             const int d[2] = {0, 0};
             return null(tg_sum_dims(f32(TG_SHAPE(2, 3)), d, 2, false));
         }},
        {"mean of int64", {"tg_mean", "int64"}, [] { return null(tg_mean(i64(TG_SHAPE(3)))); }},
        {"max_dim out of range", {"max", "dim"}, [] { return null(tg_max_dim(f32(TG_SHAPE(2)), 3, false, nullptr)); }},
        {"softmax dim out of range", {"softmax", "dim"}, [] { return null(tg_softmax(f32(TG_SHAPE(2, 3)), -3)); }},
        {"argmax dim out of range", {"argmax", "dim"}, [] { return null(tg_argmax(f32(TG_SHAPE(2, 3)), 2, false)); }},
        // shape
        {"view size", {"tg_view", "[4, -1]", "[6]"}, [] { return null(tg_view(f32(TG_SHAPE(6)), TG_SHAPE(4, -1))); }},
        {"view of a transpose",
         {"tg_view", "tg_reshape"},
         [] { return null(tg_view(tg_transpose(f32(TG_SHAPE(2, 3)), 0, 1), TG_SHAPE(6))); }},
        {"narrow past the end",
         {"tg_narrow", "start 2", "size 3"},
         [] { return null(tg_narrow(f32(TG_SHAPE(3)), 0, 2, 2)); }},
        {"expand incompatible",
         {"tg_expand", "[2, 3]", "[4, 3]"},
         [] { return null(tg_expand(f32(TG_SHAPE(2, 3)), TG_SHAPE(4, 3))); }},
        {"permute not a permutation",
         {"tg_permute"},
         [] {
             return null(tg_permute(f32(TG_SHAPE(2, 3)), (const int[]){1, 1}));
         }},
        {"cat mismatched shapes",
         {"cat", "[2, 3]", "[2, 4]"},
         [] {
             tg_tensor *t[2] = {f32(TG_SHAPE(2, 3)), f32(TG_SHAPE(2, 4))};
             return null(tg_cat(t, 2, 0));
         }},
        {"cat mismatched dtypes",
         {"cat", "float32", "float64"},
         [] {
             tg_tensor *t[2] = {f32(TG_SHAPE(2)), f64(TG_SHAPE(2))};
             return null(tg_cat(t, 2, 0));
         }},
        {"stack different shapes",
         {"stack", "[2]", "[3]"},
         [] {
             tg_tensor *t[2] = {f32(TG_SHAPE(2)), f32(TG_SHAPE(3))};
             return null(tg_stack(t, 2, 0));
         }},
        {"index_select out of range",
         {"index_select", "5"},
         [] {
             return null(tg_index_select(f32(TG_SHAPE(3, 2)), 0, tensor_i64({0, 5}, TG_SHAPE(2))));
         }},
        {"index_select float index",
         {"index_select", "float32"},
         [] { return null(tg_index_select(f32(TG_SHAPE(3, 2)), 0, f32(TG_SHAPE(2)))); }},
        {"gather out of range",
         {"gather", "7"},
         [] {
             return null(tg_gather(f32(TG_SHAPE(2, 3)), 1, tensor_i64({0, 7, 1, 2}, TG_SHAPE(2, 2))));
         }},
        {"one_hot out of range",
         {"one_hot", "3"},
         [] {
             return null(tg_one_hot(tensor_i64({0, 3}, TG_SHAPE(2)), 3));
         }},
        {"embedding out of range",
         {"embedding", "10"},
         [] {
             return null(tg_embedding(f32(TG_SHAPE(10, 4)), tensor_i64({1, 10}, TG_SHAPE(2)), tg_embedding_opts{}));
         }},
        // matmul / linear
        {"matmul rank 0", {"tg_matmul"}, [] { return null(tg_matmul(f32(TG_SCALAR_SHAPE), f32(TG_SHAPE(2)))); }},
        {"matmul inner sizes",
         {"tg_matmul", "[64, 784]", "[512, 10]"},
         [] { return null(tg_matmul(f32(TG_SHAPE(64, 784)), f32(TG_SHAPE(512, 10)))); }},
        {"matmul dtypes",
         {"tg_matmul", "float32", "float64"},
         [] { return null(tg_matmul(f32(TG_SHAPE(2, 2)), f64(TG_SHAPE(2, 2)))); }},
        {"matmul int64",
         {"tg_matmul", "int64"},
         [] { return null(tg_matmul(i64(TG_SHAPE(2, 2)), i64(TG_SHAPE(2, 2)))); }},
        {"linear weight",
         {"tg_linear", "[3, 5]"},
         [] { return null(tg_linear(f32(TG_SHAPE(4, 4)), f32(TG_SHAPE(3, 5)), nullptr)); }},
        {"linear bias",
         {"tg_linear", "[7]"},
         [] { return null(tg_linear(f32(TG_SHAPE(4, 5)), f32(TG_SHAPE(3, 5)), f32(TG_SHAPE(7)))); }},
        // conv / pool / norm
        {"conv2d rank",
         {"tg_conv2d", "[12, 12]"},
         [] { return null(tg_conv2d(f32(TG_SHAPE(12, 12)), f32(TG_SHAPE(50, 20, 5, 5)), nullptr, tg_conv_opts{})); }},
        {"conv2d channels",
         {"tg_conv2d", "[64, 10, 12, 12]", "[50, 20, 5, 5]"},
         [] {
             return null(
                 tg_conv2d(f32(TG_SHAPE(64, 10, 12, 12)), f32(TG_SHAPE(50, 20, 5, 5)), nullptr, tg_conv_opts{}));
         }},
        {"conv2d empty output",
         {"tg_conv2d"},
         [] { return null(tg_conv2d(f32(TG_SHAPE(1, 1, 3, 3)), f32(TG_SHAPE(1, 1, 5, 5)), nullptr, tg_conv_opts{})); }},
        {"conv2d groups",
         {"tg_conv2d", "groups"},
         [] {
             return null(tg_conv2d(f32(TG_SHAPE(1, 4, 8, 8)), f32(TG_SHAPE(6, 2, 3, 3)), nullptr,
                                   tg_conv_opts{1, 0, 1, 3, false}));
         }},
        {"conv2d negative padding",
         {"tg_conv2d", "padding"},
         [] {
             return null(tg_conv2d(f32(TG_SHAPE(1, 1, 8, 8)), f32(TG_SHAPE(1, 1, 3, 3)), nullptr,
                                   tg_conv_opts{1, -1, 1, 1, false}));
         }},
        {"max_pool2d kernel too large",
         {"max_pool2d"},
         [] {
             return null(tg_max_pool2d(f32(TG_SHAPE(1, 1, 2, 2)), tg_pool_opts{3, 0, 0, false, false}, nullptr));
         }},
        {"max_pool2d zero kernel",
         {"max_pool2d", "kernel"},
         [] {
             return null(tg_max_pool2d(f32(TG_SHAPE(1, 1, 4, 4)), tg_pool_opts{0, 0, 0, false, false}, nullptr));
         }},
        {"avg_pool2d rank",
         {"avg_pool2d"},
         [] {
             return null(tg_avg_pool2d(f32(TG_SHAPE(4, 4)), tg_pool_opts{2, 0, 0, false, false}));
         }},
        {"batch_norm running stats size",
         {"batch_norm", "[3]"},
         [] {
             return null(tg_batch_norm(f32(TG_SHAPE(4, 2, 3, 3)), f32(TG_SHAPE(3)), f32(TG_SHAPE(3)), nullptr, nullptr,
                                       true, 0.1, 1e-5));
         }},
        {"layer_norm too many dims",
         {"layer_norm"},
         [] { return null(tg_layer_norm(f32(TG_SHAPE(2, 3)), 3, nullptr, nullptr, 1e-5)); }},
        // losses
        {"cross_entropy target out of range",
         {"cross_entropy", "10"},
         [] {
             return null(tg_cross_entropy(f32(TG_SHAPE(2, 10)), tensor_i64({3, 10}, TG_SHAPE(2))));
         }},
        {"cross_entropy float target",
         {"cross_entropy", "float32"},
         [] { return null(tg_cross_entropy(f32(TG_SHAPE(2, 10)), f32(TG_SHAPE(2)))); }},
        {"cross_entropy batch mismatch",
         {"cross_entropy", "[3]"},
         [] { return null(tg_cross_entropy(f32(TG_SHAPE(2, 10)), i64(TG_SHAPE(3)))); }},
        {"mse_loss broadcast",
         {"mse_loss", "[2, 3]", "[4]"},
         [] { return null(tg_mse_loss(f32(TG_SHAPE(2, 3)), f32(TG_SHAPE(4)))); }},
        // random
        {"dropout p", {"dropout", "1.5"}, [] { return null(tg_dropout(f32(TG_SHAPE(3)), 1.5, true)); }},
        {"randint empty range", {"randint", "5"}, [] { return null(tg_randint(5, 5, TG_SHAPE(2), tg_opts{})); }},
        // autograd
        {"backward non-scalar",
         {"tg_backward", "[2]"},
         [] { return err(tg_backward(tg_mul_scalar(leaf(TG_SHAPE(2)), 2))); }},
        {"backward without graph",
         {"tg_backward", "does not require grad"},
         [] { return err(tg_backward(f32(TG_SHAPE(1)))); }},
        {"backward twice",
         {"second time"},
         [] {
             tg_tensor *y = tg_sum(tg_exp(leaf(TG_SHAPE(2))));
             return tg_backward(y) == TG_OK && err(tg_backward(y));
         }},
        {"backward NULL", {"tg_backward: input 0 is NULL"}, [] { return err(tg_backward(nullptr)); }},
        {"requires_grad on int",
         {"tg_requires_grad_", "int64"},
         [] { return null(tg_requires_grad_(i64(TG_SHAPE(1)), true)); }},
        // losses, math, sorting, indexing, padding, einsum (issue 19)
        {"bce input outside [0, 1]",
         {"tg_binary_cross_entropy", "between 0 and 1"},
         [] { return null(tg_binary_cross_entropy(tg_full(TG_SHAPE(2), 1.5, tg_opts{}), f32(TG_SHAPE(2)))); }},
        {"batchmean outside kl_div",
         {"tg_mse_loss", "batchmean"},
         [] {
             return null(tg_mse_loss_opts(f32(TG_SHAPE(2)), f32(TG_SHAPE(2)), tg_loss_opts{TG_REDUCTION_BATCHMEAN}));
         }},
        {"integer fmod by zero",
         {"fmod", "division by zero"},
         [] { return null(tg_fmod(i64(TG_SHAPE(2)), i64(TG_SHAPE(2)))); }},
        {"cumprod dim", {"tg_cumprod", "dim 2"}, [] { return null(tg_cumprod(f32(TG_SHAPE(2, 3)), 2)); }},
        {"topk k too large",
         {"tg_topk", "k 4", "size 3"},
         [] { return null(tg_topk(f32(TG_SHAPE(2, 3)), 4, 1, true, true, nullptr)); }},
        {"reflect pad too wide",
         {"tg_pad", "(3, 0)", "[1, 2, 3]", "reflect"},
         [] {
             int64_t p[2] = {3, 0};
             return null(tg_pad(f32(TG_SHAPE(1, 2, 3)), p, 2, TG_PAD_REFLECT, 0));
         }},
        {"repeat_interleave negative",
         {"tg_repeat_interleave", "-2"},
         [] { return null(tg_repeat_interleave(f32(TG_SHAPE(2)), -2, 0)); }},
        {"index_put out of bounds",
         {"tg_index_put", "index 5", "size 2"},
         [] {
             tg_tensor *idx[1] = {tg_full(TG_SHAPE(1), 5, tg_opts{TG_INT64})};
             return null(tg_index_put(f32(TG_SHAPE(2)), idx, 1, f32(TG_SHAPE(1)), false));
         }},
        {"masked_select non-bool mask",
         {"tg_masked_select", "bool", "float32"},
         [] { return null(tg_masked_select(f32(TG_SHAPE(2)), f32(TG_SHAPE(2)))); }},
        {"einsum size mismatch",
         {"tg_einsum", "ij,jk->ik", "4 and 3"},
         [] {
             tg_tensor *ops[2] = {f32(TG_SHAPE(3, 4)), f32(TG_SHAPE(3, 4))};
             return null(tg_einsum("ij,jk->ik", ops, 2));
         }},
        // io / data
        {"safetensors missing file",
         {"/nonexistent/x.safetensors"},
         [] {
             tg_tensor_map *m = tg_safetensors_load("/nonexistent/x.safetensors");
             return m == nullptr;
         }},
        {"mnist missing dir",
         {"/nonexistent/mnist"},
         [] {
             tg_mnist d = tg_mnist_load("/nonexistent/mnist", TG_MNIST_TRAIN);
             bool failed = d.images == nullptr;
             tg_release(d.images);
             tg_release(d.labels);
             return failed;
         }},
    };
    // Modules: constructed and freed inside the case.
    c.push_back({"linear module input features", {"[4, 7]"}, [] {
                     tg_module *m = tg_nn_linear(5, 3, tg_linear_opts{});
                     bool failed = null(tg_forward(m, f32(TG_SHAPE(4, 7))));
                     tg_module_free(m);
                     return failed;
                 }});
    c.push_back({"conv2d module channels", {"Conv2d(1, 4, kernel_size=3)", "[2, 3, 8, 8]"}, [] {
                     tg_module *m = tg_nn_conv2d(1, 4, 3, tg_conv_opts{});
                     bool failed = null(tg_forward(m, f32(TG_SHAPE(2, 3, 8, 8))));
                     tg_module_free(m);
                     return failed;
                 }});
    c.push_back({"batch_norm2d module channels", {"BatchNorm2d(4)", "[2, 3, 5, 5]"}, [] {
                     tg_module *m = tg_nn_batch_norm2d(4, tg_batch_norm_opts{});
                     bool failed = null(tg_forward(m, f32(TG_SHAPE(2, 3, 5, 5))));
                     tg_module_free(m);
                     return failed;
                 }});
    c.push_back({"sequential forward NULL", {"input 0 is NULL"}, [] {
                     tg_module *m = TG_NN_SEQUENTIAL(tg_nn_relu(), tg_nn_flatten(1, -1));
                     bool failed = null(tg_forward(m, nullptr));
                     tg_module_free(m);
                     return failed;
                 }});
    if (tg_cuda_available()) {
        c.push_back(
            {"device mismatch", {"cpu", "cuda:0"}, [] {
                 return null(tg_add(f32(TG_SHAPE(2)), tg_zeros(TG_SHAPE(2), tg_opts{TG_FLOAT32, tg_cuda(0), false})));
             }});
        c.push_back({"matmul device mismatch", {"tg_matmul", "cuda:0"}, [] {
                         return null(tg_matmul(f32(TG_SHAPE(2, 2)),
                                               tg_zeros(TG_SHAPE(2, 2), tg_opts{TG_FLOAT32, tg_cuda(0), false})));
                     }});
    } else {
        c.push_back({"cuda tensor without a device", {"cuda:0"}, [] {
                         return null(tg_zeros(TG_SHAPE(2), tg_opts{TG_FLOAT32, tg_cuda(0), false}));
                     }});
    }
    return c;
}

} // namespace

TEST(BadInputMatrix, EveryCaseFailsCleanly) {
    std::vector<BadInput> all = cases();
    int checked = 0;
    for (const BadInput &c : all) {
        SCOPED_TRACE(c.what);
        long tensors = tg_live_tensors(), storages = tg_live_storages(), nodes = tg_live_graph_nodes();
        tg_clear_error();
        bool failed = false;
        TG_SCOPE { failed = c.fails(); }
        EXPECT_TRUE(failed) << "the call succeeded";
        std::string msg = tg_last_error();
        EXPECT_FALSE(msg.empty()) << "no message recorded";
        for (const char *part : c.message_parts)
            EXPECT_NE(msg.find(part), std::string::npos) << "message \"" << msg << "\" lacks \"" << part << "\"";
        EXPECT_EQ(tg_live_tensors(), tensors) << "leaked tensors";
        EXPECT_EQ(tg_live_storages(), storages) << "leaked storages";
        EXPECT_EQ(tg_live_graph_nodes(), nodes) << "leaked graph nodes";
        // Still usable: a small computation with a gradient works.
        TG_SCOPE {
            tg_tensor *x = leaf(TG_SHAPE(3));
            EXPECT_EQ(tg_backward(tg_sum(tg_mul(x, x))), TG_OK);
            EXPECT_TRUE(tensor_near(tg_grad(x), {2, 2, 2}, 0));
        }
        checked++;
    }
    RecordProperty("cases", checked);
    printf("bad-input matrix: %d cases\n", checked);
    EXPECT_GE(checked, 60);
}
