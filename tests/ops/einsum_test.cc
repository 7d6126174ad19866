// einsum: PyTorch 1.13's values and gradients for the contractions nn code uses
// (tests/fixtures/gen_einsum.py), in float64 and float32, gradcheck and
// gradgradcheck, and the errors.
#include <string>
#include <vector>

#include "op_fixture.h"

namespace {

const std::map<std::string, FixtureTensor> &fx() {
    static const std::map<std::string, FixtureTensor> f = load_fixtures("tests/fixtures/einsum.txt");
    return f;
}

void check(const std::string &name, const char *eq) {
    for (tg_dtype dt : {TG_FLOAT64, TG_FLOAT32})
        check_fixture_in(fx(), name, dt,
                         [eq](auto &in, tg_tensor **) { return tg_einsum(eq, in.data(), (int)in.size()); });
}

TEST_F(TgTest, EinsumMatchesPyTorch) {
    check("matmul", "ij,jk->ik");
    check("bmm", "bij,bjk->bik");
    check("attention", "bhqd,bhkd->bhqk");
    check("attention_values", "bhqk,bhkd->bqhd");
    check("trace", "ii");
    check("diagonal", "ii->i");
    check("diag_keep", "iij->ji");
    check("sum_all", "ij->");
    check("sum_rows", "ij->j");
    check("transpose", "ij->ji");
    check("dot", "i,i->");
    check("outer", "i,j->ij");
    check("ellipsis", "...ij,...jk->...ik");
    check("ellipsis_middle", "i...j->j...i");
    check("three", "bn,anm,bm->ba");
    check("implicit", "ij,jk");
    check("implicit_upper", "bA,Ac");
    check("broadcast_one", "ij,ij->i");
    check("spaces", " i j , j k -> k i ");
}

tg_tensor *attention_fn(tg_tensor *const *in, void *) { return tg_square(tg_einsum("bqd,bkd->bqk", in, 2)); }
tg_tensor *three_fn(tg_tensor *const *in, void *) { return tg_einsum("bn,anm,bm->ba", in, 3); }

TEST_F(TgTest, EinsumIsDifferentiableTwice) {
    tg_tensor *a = rand64(TG_SHAPE(2, 3, 4), 1), *b = rand64(TG_SHAPE(2, 5, 4), 2);
    EXPECT_GRADCHECK(attention_fn, a, b);
    EXPECT_GRADGRADCHECK(attention_fn, a, b);
    tg_tensor *x = rand64(TG_SHAPE(2, 3), 3), *w = rand64(TG_SHAPE(4, 3, 5), 4), *y = rand64(TG_SHAPE(2, 5), 5);
    EXPECT_GRADCHECK(three_fn, x, w, y);
    EXPECT_GRADGRADCHECK(three_fn, x, w, y);
}

TEST_F(TgTest, EinsumErrors) {
    tg_tensor *m = tg_zeros(TG_SHAPE(3, 4), tg_opts{}), *v = tg_zeros(TG_SHAPE(5), tg_opts{});
    tg_tensor *mm[2] = {m, m}, *mv[2] = {m, v};
    struct {
        const char *eq;
        tg_tensor **ops;
        int count;
        const char *msg;
    } cases[] = {
        {"ij,jk->ik", mm, 1, "tg_einsum: \"ij,jk->ik\" has 2 operand terms for 1 operands"},
        {"ijk->i", mm, 1, "tg_einsum: \"ijk->i\": a term of 3 letters for an operand of 2 dims"},
        {"ij,jk->ik", mm, 2, "tg_einsum: \"ij,jk->ik\": a letter spans dims of sizes 4 and 3"},
        {"ii->i", mm, 1, "tg_einsum: \"ii->i\": a repeated letter spans dims of sizes 3 and 4"},
        {"i1->i", mm, 1, "tg_einsum: \"i1->i\": '1' is not a letter"},
        {"ij->k", mm, 1, "tg_einsum: \"ij->k\": an output letter does not appear in the inputs"},
        {"ij->ii", mm, 1, "tg_einsum: \"ij->ii\": an output letter appears twice"},
        {"...j,k->j", mv, 2, "tg_einsum: \"...j,k->j\": the output must contain \"...\" when an operand does"},
        {"i.j->i", mm, 1, "tg_einsum: \"i.j->i\": expected one \"...\" per term"},
        {"ij-ji", mm, 1, "tg_einsum: \"ij-ji\": expected \"->\""},
    };
    for (auto &c : cases) {
        tg_clear_error();
        EXPECT_EQ(tg_einsum(c.eq, c.ops, c.count), nullptr) << c.eq;
        EXPECT_ERROR_CONTAINS(c.msg);
    }
}

} // namespace
