// Copying shape ops: cat, stack, index_select, gather, scatter_add, index_add,
// one_hot, embedding. PyTorch fixtures, gradcheck/gradgradcheck, index errors.
#include "tests/ops/op_fixture.h"

namespace {

tg_tensor *gc_cat(tg_tensor *const *in, void *) { return tg_cat(in, 2, 1); }
tg_tensor *gc_cat_t(tg_tensor *const *in, void *) {
    tg_tensor *parts[] = {tg_transpose(in[0], 0, 1), in[1]};
    return tg_cat(parts, 2, 0);
}
tg_tensor *gc_stack(tg_tensor *const *in, void *) { return tg_stack(in, 3, -1); }

// The index is a fixed int64 tensor passed through `user`.
tg_tensor *gc_index_select(tg_tensor *const *in, void *index) { return tg_index_select(in[0], 1, (tg_tensor *)index); }
tg_tensor *gc_index_select_t(tg_tensor *const *in, void *index) {
    return tg_index_select(tg_transpose(in[0], 0, 1), 0, (tg_tensor *)index);
}
tg_tensor *gc_gather(tg_tensor *const *in, void *index) { return tg_gather(in[0], 1, (tg_tensor *)index); }
tg_tensor *gc_gather_narrow(tg_tensor *const *in, void *index) {
    return tg_gather(tg_narrow(in[0], 1, 1, 3), 0, (tg_tensor *)index);
}
tg_tensor *gc_scatter_add(tg_tensor *const *in, void *index) {
    return tg_scatter_add(in[0], 1, (tg_tensor *)index, in[1]);
}
tg_tensor *gc_index_add(tg_tensor *const *in, void *index) { return tg_index_add(in[0], 0, (tg_tensor *)index, in[1]); }
tg_tensor *gc_embedding(tg_tensor *const *in, void *index) {
    return tg_embedding(in[0], (tg_tensor *)index, tg_embedding_opts{});
}
// Products make the second derivative non-trivial.
tg_tensor *gc_gather_sq(tg_tensor *const *in, void *index) {
    tg_tensor *g = tg_gather(in[0], 1, (tg_tensor *)index);
    return tg_mul(g, g);
}
tg_tensor *gc_embedding_sq(tg_tensor *const *in, void *index) {
    tg_tensor *e = tg_embedding(in[0], (tg_tensor *)index, tg_embedding_opts{});
    return tg_mul(e, e);
}

// padding_idx 2. Finite differences see the padding row in the output, which the
// gradient ignores by design, so the padding positions (index 2) are masked out of
// the output; the other rows are checked, to second order.
tg_tensor *gc_embedding_pad_sq(tg_tensor *const *in, void *index) {
    tg_embedding_opts o = {};
    o.use_padding_idx = true;
    o.padding_idx = 2;
    tg_tensor *idx = (tg_tensor *)index;
    tg_tensor *e = tg_embedding(in[0], idx, o);
    tg_tensor *keep = tg_cast(tg_unsqueeze(tg_ne(idx, tg_full(TG_SCALAR_SHAPE, 2, tg_opts{TG_INT64})), -1), TG_FLOAT64);
    return tg_mul(tg_mul(e, e), keep);
}

tg_embedding_opts padding(int64_t idx) {
    tg_embedding_opts o = {};
    o.use_padding_idx = true;
    o.padding_idx = idx;
    return o;
}

tg_status gradcheck_with(tg_gradcheck_fn fn, tg_tensor *x, tg_tensor *index, bool second = false) {
    tg_gradcheck_opts o = {};
    o.user = index;
    return second ? tg_gradgradcheck(fn, 1, &x, &o) : tg_gradcheck(fn, 1, &x, &o);
}

} // namespace

TEST_F(TgTest, CatStackMatchPyTorch) {
    check_fixture_both("cat1",
                       [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_cat(in.data(), 2, 1); });
    check_fixture_both("cat0_3",
                       [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_cat(in.data(), 3, 0); });
    check_fixture_both("stack0",
                       [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_stack(in.data(), 2, 0); });
    check_fixture_both("stack_last",
                       [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_stack(in.data(), 3, -1); });
}

TEST_F(TgTest, IndexSelectGatherMatchPyTorch) {
    check_fixture_both("index_select0", [](const std::vector<tg_tensor *> &in, tg_tensor **) {
        return tg_index_select(in[0], 0, in[1]);
    });
    check_fixture_both("index_select1", [](const std::vector<tg_tensor *> &in, tg_tensor **) {
        return tg_index_select(in[0], 1, in[1]);
    });
    check_fixture_both("gather1",
                       [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_gather(in[0], 1, in[1]); });
    check_fixture_both("gather0",
                       [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_gather(in[0], 0, in[1]); });
}

TEST_F(TgTest, OneHotEmbeddingMatchPyTorch) {
    check_fixture("one_hot", TG_FLOAT32,
                  [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_one_hot(in[0], 4); });
    check_fixture("one_hot_infer", TG_FLOAT32,
                  [](const std::vector<tg_tensor *> &in, tg_tensor **) { return tg_one_hot(in[0], -1); });
    check_fixture_both("embedding", [](const std::vector<tg_tensor *> &in, tg_tensor **) {
        return tg_embedding(in[0], in[1], tg_embedding_opts{});
    });
    check_fixture_both("embedding_pad", [](const std::vector<tg_tensor *> &in, tg_tensor **) {
        return tg_embedding(in[0], in[1], padding(2));
    });
    check_fixture_both("embedding_pad_neg", [](const std::vector<tg_tensor *> &in, tg_tensor **) {
        return tg_embedding(in[0], in[1], padding(-1));
    });
}

TEST_F(TgTest, EmbeddingPaddingIdx) {
    // padding_idx 0 (a valid index, hence the flag): row 0 is returned but gets no gradient.
    tg_tensor *w = tensor_f64({1, 2, 3, 4, 5, 6}, TG_SHAPE(3, 2), true);
    tg_tensor *idx = tensor_i64({0, 2, 0, 1}, TG_SHAPE(2, 2));
    tg_tensor *e = tg_embedding(w, idx, padding(0));
    ASSERT_NE(e, nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(e, {1, 2, 5, 6, 1, 2, 3, 4}, 0));
    tg_tensor *g = tensor_f64({1, 2, 3, 4, 5, 6, 7, 8}, TG_SHAPE(2, 2, 2), true);
    tg_tensor *grad_w = nullptr;
    tg_backward_opts create = {};
    create.create_graph = true;
    ASSERT_EQ(tg_grad_of(&e, &g, 1, &w, 1, &grad_w, create), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(grad_w, {0, 0, 7, 8, 3, 4}, 0));
    // Double backward masks the padding positions too (PyTorch's embedding_dense_double_backward):
    // d(sum(grad_w * v))/dg is v's rows at the indices, zero where the index is padding_idx.
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(grad_w, tensor_f64({1, 10, 100, 1000, 1e4, 1e5}, TG_SHAPE(3, 2))))), TG_OK)
        << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(g), {0, 0, 1e4, 1e5, 0, 0, 100, 1000}, 0));
    // int32 indices, and a weight that does not require grad (no masking needed).
    int32_t i32[] = {2, 1};
    tg_tensor *i32t = tg_from_data(i32, TG_SHAPE(2), tg_opts{TG_INT32});
    tg_tensor *e32 = tg_embedding(w, i32t, padding(-1));
    ASSERT_NE(e32, nullptr) << tg_last_error();
    ASSERT_EQ(tg_backward(tg_sum(e32)), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(w), {0, 0, 1, 1, 0, 0}, 0));
    EXPECT_TRUE(tensor_near(tg_embedding(tg_detach(w), idx, padding(0)), {1, 2, 5, 6, 1, 2, 3, 4}, 0));
}

TEST_F(TgTest, CatManyTensors) {
    // More tensors than one op node takes inputs: cat'ed in groups, same result.
    std::vector<tg_tensor *> parts;
    std::vector<double> expected;
    for (int i = 0; i < 19; i++) {
        parts.push_back(tensor_f64({(double)i, (double)i + 0.5}, TG_SHAPE(2, 1), true));
    }
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 19; i++) expected.push_back(i + 0.5 * r);
    tg_tensor *c = tg_cat(parts.data(), (int)parts.size(), 1);
    EXPECT_EQ(dims(c), (std::vector<int64_t>{2, 19}));
    EXPECT_TRUE(tensor_near(c, expected, 0));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul_scalar(c, 3))), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(parts[17]), {3, 3}, 0));
    tg_tensor *s = tg_stack(parts.data(), (int)parts.size(), 0);
    EXPECT_EQ(dims(s), (std::vector<int64_t>{19, 2, 1}));
}

TEST_F(TgTest, ScatterAddIndexAdd) {
    // torch.scatter_add / index_add with repeated indices accumulate.
    tg_tensor *t = tensor_f64({1, 1, 1, 1, 1, 1}, TG_SHAPE(2, 3));
    tg_tensor *idx = tensor_i64({0, 0, 2, 1}, TG_SHAPE(2, 2));
    tg_tensor *src = tensor_f64({1, 2, 3, 4}, TG_SHAPE(2, 2));
    EXPECT_TRUE(tensor_near(tg_scatter_add(t, 1, idx, src), {4, 1, 1, 1, 5, 4}, 0));
    tg_tensor *rows = tensor_i64({1, 1}, TG_SHAPE(2));
    tg_tensor *src_rows = tensor_f64({1, 2, 3, 4, 5, 6}, TG_SHAPE(2, 3));
    EXPECT_TRUE(tensor_near(tg_index_add(t, 0, rows, src_rows), {1, 1, 1, 6, 8, 10}, 0));
    // Embedding gradients accumulate into repeated rows.
    tg_tensor *w = tensor_f64({1, 2, 3, 4, 5, 6}, TG_SHAPE(3, 2), true);
    tg_tensor *e = tg_embedding(w, tensor_i64({2, 0, 2}, TG_SHAPE(3)), tg_embedding_opts{});
    ASSERT_EQ(tg_backward(tg_sum(e)), TG_OK);
    EXPECT_TRUE(tensor_near(tg_grad(w), {1, 1, 0, 0, 2, 2}, 0));
    // int32 indices work for index_select and embedding.
    int32_t i32[] = {1, 0};
    tg_tensor *i32t = tg_from_data(i32, TG_SHAPE(2), tg_opts{TG_INT32});
    EXPECT_TRUE(tensor_near(tg_index_select(w, 0, i32t), {3, 4, 1, 2}, 0));
}

TEST_F(TgTest, GatherFamilyGradcheck) {
    EXPECT_GRADCHECK(gc_cat, rand64(TG_SHAPE(2, 3), 1), rand64(TG_SHAPE(2, 2), 2));
    EXPECT_GRADCHECK(gc_cat_t, rand64(TG_SHAPE(3, 2), 3), rand64(TG_SHAPE(4, 3), 4));
    EXPECT_GRADCHECK(gc_stack, rand64(TG_SHAPE(2, 3), 5), rand64(TG_SHAPE(2, 3), 6), rand64(TG_SHAPE(2, 3), 7));
    EXPECT_GRADGRADCHECK(gc_cat, rand64(TG_SHAPE(2, 3), 1), rand64(TG_SHAPE(2, 2), 2));

    tg_tensor *idx1 = tensor_i64({3, 0, 3, 1}, TG_SHAPE(4));
    EXPECT_EQ(gradcheck_with(gc_index_select, rand64(TG_SHAPE(2, 4, 3), 8), idx1), TG_OK) << tg_last_error();
    EXPECT_EQ(gradcheck_with(gc_index_select_t, rand64(TG_SHAPE(3, 5), 9), idx1), TG_OK) << tg_last_error();
    EXPECT_EQ(gradcheck_with(gc_index_select, rand64(TG_SHAPE(2, 4, 3), 8), idx1, true), TG_OK) << tg_last_error();

    tg_tensor *gidx = tensor_i64({0, 3, 3, 2, 2, 2, 1, 0}, TG_SHAPE(4, 2));
    EXPECT_EQ(gradcheck_with(gc_gather, rand64(TG_SHAPE(4, 5), 10), gidx), TG_OK) << tg_last_error();
    tg_tensor *gidx0 = tensor_i64({0, 2, 1, 1, 0, 0}, TG_SHAPE(2, 3));
    EXPECT_EQ(gradcheck_with(gc_gather_narrow, rand64(TG_SHAPE(3, 5), 11), gidx0), TG_OK) << tg_last_error();
    EXPECT_EQ(gradcheck_with(gc_gather_sq, rand64(TG_SHAPE(4, 5), 12), gidx, true), TG_OK) << tg_last_error();

    tg_tensor *emb_idx = tensor_i64({4, 0, 4, 2}, TG_SHAPE(2, 2));
    EXPECT_EQ(gradcheck_with(gc_embedding, rand64(TG_SHAPE(5, 3), 13), emb_idx), TG_OK) << tg_last_error();
    EXPECT_EQ(gradcheck_with(gc_embedding_sq, rand64(TG_SHAPE(5, 3), 14), emb_idx, true), TG_OK) << tg_last_error();
    tg_tensor *pad_idx = tensor_i64({4, 2, 2, 0, 4, 1}, TG_SHAPE(2, 3));
    EXPECT_EQ(gradcheck_with(gc_embedding_pad_sq, rand64(TG_SHAPE(5, 3), 17), pad_idx), TG_OK) << tg_last_error();
    EXPECT_EQ(gradcheck_with(gc_embedding_pad_sq, rand64(TG_SHAPE(5, 3), 18), pad_idx, true), TG_OK) << tg_last_error();

    tg_gradcheck_opts o = {};
    o.user = gidx;
    tg_tensor *sa_in[] = {rand64(TG_SHAPE(4, 5), 15), rand64(TG_SHAPE(4, 2), 16)};
    EXPECT_EQ(tg_gradcheck(gc_scatter_add, 2, sa_in, &o), TG_OK) << tg_last_error();
    EXPECT_EQ(tg_gradgradcheck(gc_scatter_add, 2, sa_in, &o), TG_OK) << tg_last_error();
    o.user = tensor_i64({2, 0, 2}, TG_SHAPE(3));
    tg_tensor *ia_in[] = {rand64(TG_SHAPE(3, 2), 17), rand64(TG_SHAPE(3, 2), 18)};
    EXPECT_EQ(tg_gradcheck(gc_index_add, 2, ia_in, &o), TG_OK) << tg_last_error();
}

TEST_F(TgTest, GatherFamilyErrors) {
    tg_tensor *x = tg_ones(TG_SHAPE(5, 3), tg_opts{});
    tg_clear_error();
    EXPECT_EQ(tg_index_select(x, 0, tensor_i64({1, 7}, TG_SHAPE(2))), nullptr);
    EXPECT_ERROR_CONTAINS("tg_index_select: index 7 is out of range for dim 0 of size 5 (shape [5, 3])");
    tg_clear_error();
    EXPECT_EQ(tg_index_select(x, 1, tensor_i64({-1}, TG_SHAPE(1))), nullptr);
    EXPECT_ERROR_CONTAINS("tg_index_select: index -1 is out of range for dim 1 of size 3");
    tg_clear_error();
    EXPECT_EQ(tg_index_select(x, 0, tg_ones(TG_SHAPE(2), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_index_select: index must be int64 or int32, got float32");
    tg_clear_error();
    EXPECT_EQ(tg_index_select(x, 0, tensor_i64({0, 1}, TG_SHAPE(1, 2))), nullptr);
    EXPECT_ERROR_CONTAINS("tg_index_select: index must be 1-D, got shape [1, 2]");
    tg_clear_error();
    EXPECT_EQ(tg_index_select(x, 2, tensor_i64({0}, TG_SHAPE(1))), nullptr);
    EXPECT_ERROR_CONTAINS("tg_index_select: dim 2 out of range");

    tg_clear_error();
    EXPECT_EQ(tg_gather(x, 1, tensor_i64({0, 3}, TG_SHAPE(1, 2))), nullptr);
    EXPECT_ERROR_CONTAINS("tg_gather: index 3 is out of range for dim 1 of size 3 (shape [5, 3])");
    tg_clear_error();
    EXPECT_EQ(tg_gather(x, 1, tensor_i64({0, 1}, TG_SHAPE(2))), nullptr);
    EXPECT_ERROR_CONTAINS("tg_gather: index [2] must have as many dims as the input [5, 3]");
    tg_clear_error();
    // Along dim itself the index may be longer than the input (PyTorch's rule).
    EXPECT_NE(tg_gather(x, 1, tensor_i64({0, 0, 0, 0, 0, 0, 0, 0}, TG_SHAPE(2, 4))), nullptr);
    EXPECT_EQ(tg_gather(x, 0, tensor_i64({0, 0, 0, 0}, TG_SHAPE(1, 4))), nullptr);
    EXPECT_ERROR_CONTAINS("tg_gather: index [1, 4] is larger than the input [5, 3] in dim 1");
    tg_clear_error();
    int32_t i32[] = {0};
    EXPECT_EQ(tg_gather(x, 0, tg_from_data(i32, TG_SHAPE(1, 1), tg_opts{TG_INT32})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_gather: index must be int64, got int32");
    tg_clear_error();
    EXPECT_EQ(tg_scatter_add(x, 0, tensor_i64({9}, TG_SHAPE(1, 1)), tg_ones(TG_SHAPE(1, 1), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_scatter_add: index 9 is out of range for dim 0 of size 5");
    tg_clear_error();
    EXPECT_EQ(tg_scatter_add(x, 0, tensor_i64({1}, TG_SHAPE(1, 1)), tg_ones(TG_SHAPE(1, 2), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_scatter_add: src [1, 2] must have the index's shape [1, 1]");
    tg_clear_error();
    EXPECT_EQ(tg_index_add(x, 0, tensor_i64({1}, TG_SHAPE(1)), tg_ones(TG_SHAPE(2, 3), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_index_add: src must have shape [1, 3]");
    tg_clear_error();
    EXPECT_EQ(tg_index_add(x, 0, tensor_i64({6}, TG_SHAPE(1)), tg_ones(TG_SHAPE(1, 3), tg_opts{})), nullptr);
    EXPECT_ERROR_CONTAINS("tg_index_add: index 6 is out of range for dim 0 of size 5");

    tg_clear_error();
    EXPECT_EQ(tg_embedding(x, tensor_i64({2, 5}, TG_SHAPE(2)), tg_embedding_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_embedding: index 5 is out of range for dim 0 of size 5");
    tg_clear_error();
    EXPECT_EQ(tg_embedding(tg_ones(TG_SHAPE(5), tg_opts{}), tensor_i64({2}, TG_SHAPE(1)), tg_embedding_opts{}),
              nullptr);
    EXPECT_ERROR_CONTAINS("tg_embedding: weight must be 2-D");
    tg_clear_error();
    EXPECT_EQ(tg_embedding(x, tg_ones(TG_SHAPE(2), tg_opts{}), tg_embedding_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_embedding: index must be int64 or int32, got float32");
    tg_clear_error();
    EXPECT_EQ(tg_embedding(x, tensor_i64({2}, TG_SHAPE(1)), padding(5)), nullptr);
    EXPECT_ERROR_CONTAINS(
        "tg_embedding: padding_idx 5 is out of range for 5 embeddings (expected -5 <= padding_idx < 5)");
    tg_clear_error();
    EXPECT_EQ(tg_embedding(x, tensor_i64({2}, TG_SHAPE(1)), padding(-6)), nullptr);
    EXPECT_ERROR_CONTAINS("tg_embedding: padding_idx -6 is out of range for 5 embeddings");

    tg_clear_error();
    EXPECT_EQ(tg_one_hot(tensor_i64({0, 4}, TG_SHAPE(2)), 3), nullptr);
    EXPECT_ERROR_CONTAINS("tg_one_hot: class value 4 is out of range [0, 3)");
    tg_clear_error();
    EXPECT_EQ(tg_one_hot(tensor_i64({-1}, TG_SHAPE(1)), -1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_one_hot: class value -1 is out of range");
    tg_clear_error();
    EXPECT_EQ(tg_one_hot(tg_ones(TG_SHAPE(2), tg_opts{}), 3), nullptr);
    EXPECT_ERROR_CONTAINS("tg_one_hot: index must be int64, got float32");
    tg_clear_error();
    EXPECT_EQ(tg_one_hot(tg_empty(TG_SHAPE(0), tg_opts{TG_INT64}), -1), nullptr);
    EXPECT_ERROR_CONTAINS("tg_one_hot: cannot infer num_classes");

    tg_tensor *a = tg_ones(TG_SHAPE(2, 3), tg_opts{}), *b = tg_ones(TG_SHAPE(3, 3), tg_opts{});
    tg_tensor *ab[] = {a, b};
    tg_clear_error();
    EXPECT_EQ(tg_cat(ab, 2, 1), nullptr);
    EXPECT_ERROR_CONTAINS(
        "tg_cat: sizes of tensors must match except in dim 1: [2, 3] (position 0) and [3, 3] (position 1)");
    tg_clear_error();
    EXPECT_EQ(tg_stack(ab, 2, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_stack: expected tensors of equal shape, got [2, 3] (position 0) and [3, 3] (position 1)");
    tg_tensor *mixed[] = {a, tg_ones(TG_SHAPE(2, 3), tg_opts{TG_FLOAT64})};
    tg_clear_error();
    EXPECT_EQ(tg_cat(mixed, 2, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cat: expected tensors of one dtype, got float32 (position 0) and float64 (position 1)");
    tg_clear_error();
    EXPECT_EQ(tg_cat(ab, 2, 2), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cat: dim 2 out of range");
    tg_tensor *scalars[] = {tg_ones(TG_SCALAR_SHAPE, tg_opts{})};
    tg_clear_error();
    EXPECT_EQ(tg_cat(scalars, 1, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cat: zero-dimensional tensor");
    tg_clear_error();
    EXPECT_EQ(tg_cat(ab, 0, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cat: expected a non-empty list");
    tg_tensor *with_null[] = {a, nullptr};
    tg_clear_error();
    EXPECT_EQ(tg_cat(with_null, 2, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cat: input 1 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_stack(with_null, 2, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_stack: input 1 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_index_select(nullptr, 0, a), nullptr);
    EXPECT_ERROR_CONTAINS("tg_index_select: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_gather(a, 0, nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("tg_gather: input 1 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_embedding(nullptr, a, tg_embedding_opts{}), nullptr);
    EXPECT_ERROR_CONTAINS("tg_embedding: input 0 is NULL");
    tg_clear_error();
    EXPECT_EQ(tg_one_hot(nullptr, 3), nullptr);
    EXPECT_ERROR_CONTAINS("tg_one_hot: input 0 is NULL");
}

// torch.cat skips 1-D empty tensors among others (the accumulator that starts empty).
TEST_F(TgTest, CatSkipsEmptyOneDimensionalTensors) {
    tg_tensor *p = tensor_f64({1, 2, 3, 4}, TG_SHAPE(2, 2));
    tg_tensor *empty = tg_zeros(TG_SHAPE(0), tg_opts{TG_FLOAT64});
    for (int dim : {0, 1, -1}) {
        tg_tensor *parts[2] = {empty, p};
        tg_tensor *y = tg_cat(parts, 2, dim);
        ASSERT_NE(y, nullptr) << "dim " << dim << ": " << tg_last_error();
        EXPECT_EQ(dims(y), (std::vector<int64_t>{2, 2}));
        EXPECT_TRUE(tensor_near(y, {1, 2, 3, 4}, 0));
    }
    tg_tensor *all_empty[2] = {empty, empty};
    tg_tensor *y = tg_cat(all_empty, 2, 0);
    ASSERT_NE(y, nullptr);
    EXPECT_EQ(tg_numel(y), 0);
    tg_tensor *bad[2] = {p, tg_zeros(TG_SHAPE(0, 3), tg_opts{TG_FLOAT64})}; // only 1-D [0] is skipped
    EXPECT_EQ(tg_cat(bad, 2, 0), nullptr);
    EXPECT_ERROR_CONTAINS("tg_cat: sizes of tensors must match except in dim 0");
}

// A skipped 1-D empty tensor stays in the graph (PyTorch: its .grad is an empty tensor),
// in short lists and in the grouped cat of more than 8.
TEST_F(TgTest, CatSkippedEmptyTensorsStillGetAGradient) {
    tg_tensor *p = tg_requires_grad_(tensor_f64({1, 2, 3, 4}, TG_SHAPE(2, 2)), true);
    tg_tensor *empty = tg_requires_grad_(tg_zeros(TG_SHAPE(0), tg_opts{TG_FLOAT64}), true);
    tg_tensor *parts[2] = {empty, p};
    tg_tensor *y = tg_cat(parts, 2, 1);
    ASSERT_NE(y, nullptr) << tg_last_error();
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(y, tensor_f64({1, 2, 3, 4}, TG_SHAPE(2, 2))))), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(p), {1, 2, 3, 4}, 0));
    ASSERT_NE(tg_grad(empty), nullptr);
    EXPECT_EQ(dims(tg_grad(empty)), (std::vector<int64_t>{0}));

    tg_tensor *rows[11];
    tg_tensor *last_empty = tg_requires_grad_(tg_zeros(TG_SHAPE(0), tg_opts{TG_FLOAT64}), true);
    for (int i = 0; i < 10; i++) rows[i] = tg_requires_grad_(tg_full(TG_SHAPE(1, 2), i, tg_opts{TG_FLOAT64}), true);
    rows[10] = last_empty; // alone in the last group of the grouped cat
    tg_tensor *z = tg_cat(rows, 11, 0);
    ASSERT_NE(z, nullptr) << tg_last_error();
    EXPECT_EQ(dims(z), (std::vector<int64_t>{10, 2}));
    ASSERT_EQ(tg_backward(tg_sum(tg_mul(z, z))), TG_OK) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_grad(rows[7]), {14, 14}, 0));
    ASSERT_NE(tg_grad(last_empty), nullptr);
    EXPECT_EQ(tg_numel(tg_grad(last_empty)), 0);
}
