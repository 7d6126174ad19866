// Gradients that never alias (docs/design.md, "Gradients and in-place writes"): each
// case as a user hits it, with PyTorch 1.13's values (tests/fixtures/gen_aliasing.py)
// or its error, or by hand where PyTorch 1.13 itself aliases.
#include <cstdint>
#include <string>
#include <thread>

#include "tests/test_util.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/aliasing.txt");
    return f;
}
const std::vector<double> &expected(const std::string &name) { return fixture_tensor(fx(), name).data; }

std::vector<int64_t> strides_of(tg_tensor *t) { return {tg_strides(t), tg_strides(t) + tg_ndim(t)}; }

// ---- a leaf's .grad ----

TEST_F(TgTest, LeafGradientIsNeverAStrideZeroView) {
    tg_tensor *p = tensor_f64({1, 2, 3}, TG_SHAPE(3), true);
    ASSERT_EQ(tg_backward(tg_sum(p)), TG_OK); // sum's gradient is an expanded (stride 0) one
    EXPECT_EQ(strides_of(tg_grad(p)), std::vector<int64_t>{1});
    ASSERT_EQ(tg_backward(tg_sum(p)), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(p), expected("sum_twice_grad"), 0)); // [2, 2, 2], not [4, 4, 4]
    tg_clip_grad_norm_params(&p, 1, 1.0, 2.0);
    EXPECT_TRUE(tensor_near(tg_grad(p), expected("sum_twice_clipped"), 1e-15));
}

TEST_F(TgTest, TwoLeavesNeverShareAGradientStorage) {
    tg_tensor *p = tensor_f64({1, 2, 3, 4, 5, 6}, TG_SHAPE(2, 3), true);
    tg_tensor *q = tensor_f64({0.5, -1, 2, 3, -2, 1.5}, TG_SHAPE(2, 3), true);
    tg_tensor *c = tensor_f64({1, -2, 3, 0.5, 4, -1.5}, TG_SHAPE(6));
    for (int i = 0; i < 2; i++) {
        tg_tensor *sum = tg_add(tg_reshape(p, TG_SHAPE(6)), tg_reshape(q, TG_SHAPE(6)));
        ASSERT_EQ(tg_backward(tg_sum(tg_mul(sum, c))), TG_OK) << tg_last_error();
        EXPECT_FALSE(tg_same_storage(tg_grad(p), tg_grad(q)));
    }
    // 2c each. PyTorch 1.13 adopts both reshape views of one gradient and reaches 3c.
    std::vector<double> two_c = {2, -4, 6, 1, 8, -3};
    EXPECT_TRUE(tensor_near(tg_grad(p), two_c, 0));
    EXPECT_TRUE(tensor_near(tg_grad(q), two_c, 0));
}

TEST_F(TgTest, TheCallersGradientIsNeverAdoptedOrWritten) {
    tg_tensor *p = tensor_f64({1, 2, 3, 4, 5, 6}, TG_SHAPE(2, 3), true);
    tg_tensor *g = tensor_f64({1, -1, 2, -2, 3, -3}, TG_SHAPE(6));
    for (int i = 0; i < 2; i++) ASSERT_EQ(tg_backward_with(tg_reshape(p, TG_SHAPE(6)), .gradient = g), TG_OK);
    EXPECT_TRUE(tensor_near(g, {1, -1, 2, -2, 3, -3}, 0)) << "the caller's tensor changed";
    EXPECT_FALSE(tg_same_storage(tg_grad(p), g));
    EXPECT_TRUE(tensor_near(tg_grad(p), {2, -2, 4, -4, 6, -6}, 0));
    // A leaf as the root: its gradient is the caller's tensor itself.
    tg_tensor *leaf = tensor_f64({1, 2}, TG_SHAPE(2), true);
    tg_tensor *g2 = tensor_f64({5, 7}, TG_SHAPE(2));
    for (int i = 0; i < 2; i++) ASSERT_EQ(tg_backward_with(leaf, .gradient = g2), TG_OK);
    EXPECT_TRUE(tensor_near(g2, {5, 7}, 0));
    EXPECT_TRUE(tensor_near(tg_grad(leaf), {10, 14}, 0));
}

TEST_F(TgTest, GradientLayoutFollowsTheParameter) {
    // A transposed (dense, non-contiguous) leaf gets its gradient in its own strides,
    // as PyTorch's layout contract; a contiguous gradient is copied into that layout.
    tg_tensor *base = tensor_f64({1, 2, 3, 4, 5, 6}, TG_SHAPE(3, 2));
    int64_t st[2] = {1, 2};
    tg_tensor *p = tg_requires_grad_(tg_as_strided(base, TG_SHAPE(2, 3), st, 0), true);
    tg_tensor *c = tensor_f64({1, 2, 3, 4, 5, 6}, TG_SHAPE(2, 3));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(p, c))), TG_OK) << tg_last_error();
    EXPECT_EQ(strides_of(tg_grad(p)), (std::vector<int64_t>{1, 2}));
    EXPECT_TRUE(tensor_near(tg_grad(p), {1, 2, 3, 4, 5, 6}, 0));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(p, c))), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(p), {2, 4, 6, 8, 10, 12}, 0));
}

TEST_F(TgTest, CreateGraphCopiesTheFirstGradientToo) {
    tg_tensor *p = tensor_f64({1, 2, 3}, TG_SHAPE(3), true);
    ASSERT_EQ(tg_backward_with(tg_sum(p), .create_graph = true), TG_OK);
    EXPECT_EQ(strides_of(tg_grad(p)), std::vector<int64_t>{1});
    ASSERT_EQ(tg_backward(tg_sum(p)), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(p), {2, 2, 2}, 0));
    tg_zero_grad(p);
}

// ---- in-place writes: recorded, or refused ----

TEST_F(TgTest, CopyIntoANonLeafIsRecordedAsPyTorchsCopy) {
    tg_tensor *x = tensor_f64({1, 2}, TG_SHAPE(2), true);
    tg_tensor *src = tensor_f64({3, 4}, TG_SHAPE(2), true);
    tg_tensor *y = tg_mul_scalar(x, 2);
    ASSERT_EQ(tg_copy_(y, src), TG_OK) << tg_last_error();
    EXPECT_STREQ(tg_grad_fn_name(y), "copy_");
    EXPECT_TRUE(tensor_near(y, {3, 4}, 0));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, y))), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), expected("copy_x_grad"), 0)); // zeros: the old value is gone
    EXPECT_TRUE(tensor_near(tg_grad(src), expected("copy_src_grad"), 0));
}

TEST_F(TgTest, CopyIntoABufferCarriesTheGradientBackThroughBroadcastAndCast) {
    tg_tensor *buf = tg_zeros(TG_SHAPE(2, 3), tg_opts{TG_FLOAT32, TG_CPU, false});
    tg_tensor *s = tensor_f64({1, 2, 3}, TG_SHAPE(3), true);
    ASSERT_EQ(tg_copy_(buf, s), TG_OK) << tg_last_error();
    EXPECT_TRUE(tg_requires_grad(buf));
    tg_tensor *cw = tensor_f32({1, 2, 3, 4, 5, 6}, TG_SHAPE(2, 3));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(buf, cw))), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(tg_grad(s)), TG_FLOAT64);
    EXPECT_TRUE(tensor_near(tg_grad(s), expected("copy_broadcast_src_grad"), 0));
}

TEST_F(TgTest, FillIntoANonLeafIsRecorded) {
    tg_tensor *x = tensor_f64({1, 2}, TG_SHAPE(2), true);
    tg_tensor *y = tg_mul_scalar(x, 2);
    ASSERT_EQ(tg_fill_(y, 1.5), TG_OK) << tg_last_error();
    EXPECT_STREQ(tg_grad_fn_name(y), "fill_");
    tg_tensor *loss = tg_sum(tg_mul(y, y));
    EXPECT_TRUE(tensor_near(loss, expected("fill_loss"), 0));
    ASSERT_EQ(tg_backward(loss), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), expected("fill_x_grad"), 0));
}

TEST_F(TgTest, RandomFillIntoANonLeafIsRecorded) {
    tg_tensor *x = tensor_f64({1, 2, 3}, TG_SHAPE(3), true);
    tg_tensor *y = tg_mul_scalar(x, 2);
    tg_manual_seed(3);
    ASSERT_EQ(tg_normal_(y, 0, 1), TG_OK) << tg_last_error();
    EXPECT_STREQ(tg_grad_fn_name(y), "normal_");
    tg_manual_seed(3);
    tg_tensor *drawn = tg_randn(TG_SHAPE(3), tg_opts{TG_FLOAT64, TG_CPU, false});
    EXPECT_TRUE(tensor_near(y, values(drawn), 0)) << "the same draw as into a fresh tensor";
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, y))), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(x), {0, 0, 0}, 0));
}

TEST_F(TgTest, InPlaceArithmeticOnANonLeafIsRecorded) {
    tg_tensor *x = tensor_f64({1, -2, 3}, TG_SHAPE(3), true);
    tg_tensor *b = tensor_f64({0.5, 4, -1}, TG_SHAPE(3), true);
    tg_tensor *y = tg_mul_scalar(x, 2);
    ASSERT_EQ(tg_mul_(y, b), TG_OK) << tg_last_error();
    ASSERT_EQ(tg_add_scaled_(y, b, 3.0), TG_OK) << tg_last_error();
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, y))), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), expected("mul_add_x_grad"), 1e-12));
    EXPECT_TRUE(tensor_near(tg_grad(b), expected("mul_add_b_grad"), 1e-12));
}

TEST_F(TgTest, MultiplyingANonLeafByItselfReadsItsOldValue) {
    // y = 2x; y *= y; sum(y): d/dx (2x)^2 = 8x. (PyTorch 1.13's backward fails here,
    // as its mul_ saved the y it then overwrote.)
    tg_tensor *x = tensor_f64({1, -2, 3}, TG_SHAPE(3), true);
    tg_tensor *y = tg_mul_scalar(x, 2);
    ASSERT_EQ(tg_mul_(y, y), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(y, {4, 16, 36}, 0));
    ASSERT_EQ(tg_backward(tg_sum(y)), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), {8, -16, 24}, 0));
}

TEST_F(TgTest, EveryInPlaceEntryPointRefusesALeafThatRequiresGrad) {
    tg_tensor *x = tensor_f64({1, 2, 3}, TG_SHAPE(3), true);
    tg_tensor *b = tensor_f64({1, 1, 1}, TG_SHAPE(3));
    uint64_t v0 = tg_version(x);
    for (auto run : std::vector<std::pair<std::string, tg_status (*)(tg_tensor *, tg_tensor *)>>{
             {"tg_copy_", [](tg_tensor *t, tg_tensor *s) { return tg_copy_(t, s); }},
             {"tg_fill_", [](tg_tensor *t, tg_tensor *) { return tg_fill_(t, 0); }},
             {"tg_add_", [](tg_tensor *t, tg_tensor *s) { return tg_add_(t, s); }},
             {"tg_mul_", [](tg_tensor *t, tg_tensor *s) { return tg_mul_(t, s); }},
             {"tg_mul_scalar_", [](tg_tensor *t, tg_tensor *) { return tg_mul_scalar_(t, 2); }},
             {"tg_add_scaled_", [](tg_tensor *t, tg_tensor *s) { return tg_add_scaled_(t, s, 2); }},
             {"tg_uniform_", [](tg_tensor *t, tg_tensor *) { return tg_uniform_(t, 0, 1); }},
             {"tg_normal_", [](tg_tensor *t, tg_tensor *) { return tg_normal_(t, 0, 1); }},
             {"tg_bernoulli_", [](tg_tensor *t, tg_tensor *) { return tg_bernoulli_(t, 0.5); }},
         }) {
        tg_clear_error();
        EXPECT_EQ(run.second(x, b), TG_ERROR) << run.first;
        EXPECT_ERROR_CONTAINS(run.first +
                              ": a leaf Variable that requires grad is being used in an in-place operation");
    }
    EXPECT_TRUE(tensor_near(x, {1, 2, 3}, 0));
    EXPECT_EQ(tg_version(x), v0);
    TG_NO_GRAD {
        EXPECT_EQ(tg_copy_(x, b), TG_OK);
        EXPECT_EQ(tg_fill_(x, 4), TG_OK);
    }
    EXPECT_TRUE(tensor_near(x, {4, 4, 4}, 0));
    EXPECT_EQ(tg_version(x), v0 + 2);
    EXPECT_TRUE(tg_is_leaf(x));
}

TEST_F(TgTest, RecordingAWriteIntoAViewOrItsBaseIsRefused) {
    tg_tensor *x = tensor_f64({1, 2, 3, 4}, TG_SHAPE(4), true);
    tg_tensor *y = tg_mul_scalar(x, 2);
    tg_tensor *v = tg_narrow(y, 0, 1, 2);
    tg_tensor *src = tensor_f64({9, 9}, TG_SHAPE(2));
    EXPECT_EQ(tg_copy_(v, src), TG_ERROR);
    EXPECT_ERROR_CONTAINS(
        "tg_copy_: cannot record an in-place write into a tensor of shape [2] that shares its storage");
    tg_clear_error();
    EXPECT_EQ(tg_fill_(y, 0), TG_ERROR); // v would keep the old history
    EXPECT_ERROR_CONTAINS("tg_fill_: cannot record an in-place write into a tensor of shape [4]");
    EXPECT_TRUE(tensor_near(y, {2, 4, 6, 8}, 0));
    // Without a graph to keep right, writing through a view is fine.
    TG_NO_GRAD { EXPECT_EQ(tg_copy_(v, src), TG_OK); }
    EXPECT_TRUE(tensor_near(y, {2, 9, 9, 8}, 0));
}

TEST_F(TgTest, PartialOverlapIsRefusedAsInPyTorch) {
    tg_tensor *x = tensor_f64({1, 2, 3, 4}, TG_SHAPE(2, 2));
    EXPECT_EQ(tg_add_(x, tg_transpose(x, 0, 1)), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_add_: unsupported operation: some elements of the input tensor (input 1) and the "
                          "written-to tensor refer to a single memory location");
    tg_clear_error();
    tg_tensor *flat = tg_view(x, TG_SHAPE(4));
    EXPECT_EQ(tg_copy_(tg_narrow(flat, 0, 0, 3), tg_narrow(flat, 0, 1, 3)), TG_ERROR); // x[0:3] = x[1:4]
    EXPECT_ERROR_CONTAINS("tg_copy_: unsupported operation: some elements");
    EXPECT_TRUE(tensor_near(x, {1, 2, 3, 4}, 0));
    ASSERT_EQ(tg_add_(x, x), TG_OK) << tg_last_error(); // the identical tensor is fine
    EXPECT_TRUE(tensor_near(x, expected("self_add"), 0));
}

TEST_F(TgTest, WritingATensorThatReachesAnElementTwiceIsRefused) {
    tg_tensor *one = tensor_f64({1}, TG_SHAPE(1));
    tg_tensor *e = tg_expand(one, TG_SHAPE(3));
    EXPECT_EQ(tg_fill_(e, 2), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_fill_: unsupported operation: more than one element of the written-to tensor (shape [3]");
    tg_clear_error();
    EXPECT_EQ(tg_add_(e, tensor_f64({1, 2, 3}, TG_SHAPE(3))), TG_ERROR);
    EXPECT_ERROR_CONTAINS("tg_add_: unsupported operation: more than one element");
    EXPECT_TRUE(tensor_near(one, {1}, 0));
}

TEST_F(TgTest, ASourceThatMayInterleaveWithTheTargetIsReadFromACopy) {
    // x[0:3] += reversed(x[0:3]): read in place, the last element would see the first's new value.
    tg_tensor *x = tensor_f64({1, 2, 3}, TG_SHAPE(3));
    int64_t back[1] = {-1};
    tg_tensor *reversed = tg_as_strided(x, TG_SHAPE(3), back, 2);
    ASSERT_EQ(tg_add_(x, reversed), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(x, {4, 4, 4}, 0));
}

// ---- views: one checked constructor ----

TEST_F(TgTest, ViewsRefuseShapesAndOffsetsThatOverflow) {
    tg_tensor *x = tg_zeros(TG_SHAPE(12), tg_opts{});
    EXPECT_EQ(tg_view(x, TG_SHAPE((int64_t(1) << 62) + 3, 4)), nullptr); // the product wraps to 12
    EXPECT_ERROR_CONTAINS("tg_view: shape [4611686018427387907, 4] is invalid for a tensor of shape [12]");
    tg_clear_error();
    EXPECT_EQ(tg_reshape(x, TG_SHAPE(-1, (int64_t(1) << 62) + 3, 4)), nullptr);
    EXPECT_ERROR_CONTAINS("tg_reshape: shape");
    tg_clear_error();
    EXPECT_EQ(tg_narrow(x, 0, 2, INT64_MAX), nullptr);
    EXPECT_ERROR_CONTAINS("tg_narrow: start 2 + length 9223372036854775807 exceeds size 12 of dim 0");
    tg_clear_error();
    tg_tensor *one = tg_zeros(TG_SHAPE(1), tg_opts{});
    int64_t huge[1] = {int64_t(1) << 62};
    EXPECT_EQ(tg_as_strided(one, TG_SHAPE(2), huge, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_as_strided: view of shape [2] at offset 0 reaches elements [0, 4611686018427387904] "
                          "outside the storage of 1 elements");
    tg_clear_error();
    EXPECT_EQ(tg_as_strided(one, TG_SHAPE(3), huge, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_as_strided: view of shape [3] with strides up to 4611686018427387904 overflows");
    tg_clear_error();
    int64_t unit[1] = {1};
    EXPECT_EQ(tg_as_strided(one, TG_SHAPE(1), unit, -1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_as_strided: negative storage offset -1");
    tg_clear_error();
    EXPECT_EQ(tg_expand(tg_zeros(TG_SHAPE(1, 1), tg_opts{}), TG_SHAPE(int64_t(1) << 62, int64_t(1) << 62)), nullptr);
    EXPECT_ERROR_CONTAINS("expand: shape [4611686018427387904, 4611686018427387904] has too many elements");
}

TEST_F(TgTest, ViewsRefuseMoreThanTheDimensionLimit) {
    tg_tensor *x = tg_zeros(TG_SHAPE(1), tg_opts{});
    tg_shape nine = {};
    nine.ndim = TG_MAX_DIMS + 1; // a malformed shape, as a caller's bug would make
    EXPECT_EQ(tg_view(x, nine), nullptr);
    EXPECT_ERROR_CONTAINS("tg_view: 9 dims requested, at most 8 are supported");
    tg_clear_error();
    EXPECT_EQ(tg_expand(x, nine), nullptr);
    EXPECT_ERROR_CONTAINS("tg_expand: a tensor of shape [1] cannot be expanded to [9 dims]");
    tg_clear_error();
    EXPECT_EQ(tg_as_strided(x, nine, tg_strides(x), 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_as_strided: 9 dims requested, at most 8 are supported");
}

// ---- the state of one backward call ----

TEST_F(TgTest, ARetainedGraphRunsAgainOnAnotherThread) {
    tg_tensor *x = tensor_f64({1, 2, 3}, TG_SHAPE(3), true);
    tg_tensor *z = tg_sum(tg_mul(x, x));
    ASSERT_EQ(tg_backward_with(z, .retain_graph = true), TG_OK);
    tg_status other = TG_ERROR;
    std::thread([&] { other = tg_backward_with(z, .retain_graph = true); }).join();
    EXPECT_EQ(other, TG_OK);
    ASSERT_EQ(tg_backward(z), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(x), {6, 12, 18}, 0)); // 3 x 2x: none was skipped
}

struct Nested {
    tg_tensor *x, *y;
    tg_tensor *inner_grad;
    tg_status inner_status;
    bool inside;
    std::string other_thread_error;
};

tg_tensor *nested_grad_of(tg_tensor *grad, void *user) {
    Nested *n = static_cast<Nested *>(user);
    if (n->inside) return grad; // the inner backward runs this hook too
    n->inside = true;
    // A second backward inside the first, through y's node, which the first is running
    // (recorded with grad mode on: a backward runs its hooks with it off).
    bool was = tg_set_grad_enabled(true);
    tg_tensor *z2 = tg_sum(tg_mul_scalar(n->y, 3));
    tg_set_grad_enabled(was);
    n->inner_status = tg_grad_of(&z2, nullptr, 1, &n->x, 1, &n->inner_grad, tg_backward_opts{nullptr, true, false});
    tg_retain(n->inner_grad); // outlives the hook's scope
    n->inside = false;
    return grad;
}

TEST_F(TgTest, ABackwardInsideABackwardHasItsOwnState) {
    Nested n = {};
    n.x = tensor_f64({1, -2, 3}, TG_SHAPE(3), true);
    n.y = tg_mul(n.x, n.x);
    ASSERT_EQ(tg_register_hook(n.y, nested_grad_of, &n), TG_OK);
    ASSERT_EQ(tg_backward(tg_sum(n.y)), TG_OK) << tg_last_error();
    ASSERT_EQ(n.inner_status, TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(n.inner_grad, {6, -12, 18}, 0)); // d/dx sum(3x^2)
    EXPECT_TRUE(tensor_near(tg_grad(n.x), {2, -4, 6}, 0));
    tg_release(n.inner_grad);
}

tg_tensor *backward_from_another_thread(tg_tensor *grad, void *user) {
    Nested *n = static_cast<Nested *>(user);
    std::thread([n] {
        tg_tensor *z2 = tg_sum(n->y); // no scope on this thread: released below
        n->inner_status = tg_backward_with(z2, .retain_graph = true);
        n->other_thread_error = tg_last_error();
        tg_release(z2);
    }).join();
    return grad;
}

TEST_F(TgTest, ABackwardOnAGraphThatAnotherThreadIsRunningIsRefused) {
    Nested n = {};
    n.x = tensor_f64({1, -2, 3}, TG_SHAPE(3), true);
    n.y = tg_mul(n.x, n.x);
    ASSERT_EQ(tg_register_hook(n.y, backward_from_another_thread, &n), TG_OK);
    ASSERT_EQ(tg_backward_with(tg_sum(n.y), .retain_graph = true), TG_OK) << tg_last_error();
    EXPECT_EQ(n.inner_status, TG_ERROR);
    EXPECT_NE(n.other_thread_error.find("tg_backward: node 'mul' (#"), std::string::npos) << n.other_thread_error;
    EXPECT_NE(n.other_thread_error.find("is in a backward running on another thread"), std::string::npos);
    EXPECT_TRUE(tensor_near(tg_grad(n.x), {2, -4, 6}, 0));
}

// ---- clone ----

TEST_F(TgTest, CloneIsDifferentiableAsTorchClone) {
    tg_tensor *x = tensor_f64({1, -2, 3}, TG_SHAPE(3), true);
    tg_tensor *y = tg_clone(x);
    EXPECT_STREQ(tg_grad_fn_name(y), "clone");
    EXPECT_FALSE(tg_same_storage(x, y));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(tg_mul(y, y), x))), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(x), expected("clone_x_grad"), 0));
    tg_gradcheck_opts o = {};
    auto fn = [](tg_tensor *const *in, void *) { return tg_mul(tg_clone(tg_transpose(in[0], 0, 1)), in[0]); };
    tg_tensor *sq = tensor_f64({1, 2, 3, 4}, TG_SHAPE(2, 2), true);
    EXPECT_EQ(tg_gradcheck(fn, 1, &sq, &o), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_gradgradcheck(fn, 1, &sq, &o), TG_OK) << tg_last_error();
}

} // namespace
