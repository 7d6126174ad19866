// Checks an op against a case of tests/fixtures/nn_ops.txt (written by gen_nn_ops.py):
// inputs <case>.<name>, output <case>.out, output weighting <case>.r, and gradients
// <case>.grad.<name> of sum(out * r). Used by the conv/pool/norm/loss suites.
#ifndef TG_TESTS_OPS_NN_FIXTURE_UTIL_H
#define TG_TESTS_OPS_NN_FIXTURE_UTIL_H

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"

inline const std::map<std::string, FixtureTensor> &nn_fixtures() {
    static const std::map<std::string, FixtureTensor> fx = load_fixtures("tests/fixtures/nn_ops.txt");
    return fx;
}

inline const FixtureTensor &nn_fixture(const std::string &name) {
    static const FixtureTensor empty;
    auto it = nn_fixtures().find(name);
    if (it == nn_fixtures().end()) {
        ADD_FAILURE() << "fixture " << name << " missing";
        return empty;
    }
    return it->second;
}

inline bool nn_fixture_has(const std::string &name) { return nn_fixtures().count(name) > 0; }

// Tolerances of the issue: rtol 1e-4 / atol 1e-5 in float32, 1e-10 in float64.
inline double nn_atol(tg_dtype dt) { return dt == TG_FLOAT32 ? 1e-5 : 1e-10; }
inline double nn_rtol(tg_dtype dt) { return dt == TG_FLOAT32 ? 1e-4 : 1e-10; }

// Runs fn on the case's inputs (floating ones in `dt`, requiring grad when the
// fixture has their gradient; int64 ones as int64), compares the output and the
// gradients. Returns the inputs made (owned by the current scope) for extra checks.
inline std::vector<tg_tensor *> check_nn_case(const std::string &name, const std::vector<std::string> &inputs,
                                              tg_dtype dt,
                                              const std::function<tg_tensor *(std::vector<tg_tensor *> &)> &fn) {
    SCOPED_TRACE(name + (dt == TG_FLOAT32 ? " float32" : " float64"));
    std::vector<tg_tensor *> in;
    for (const auto &k : inputs) {
        const FixtureTensor &f = nn_fixture(name + "." + k);
        bool is_int = f.dtype == "int64";
        in.push_back(f.make(is_int ? TG_INT64 : dt, !is_int && nn_fixture_has(name + ".grad." + k)));
    }
    tg_tensor *out = fn(in);
    EXPECT_TRUE(out != nullptr) << tg_last_error();
    if (!out) return in;
    EXPECT_EQ(dims(out), nn_fixture(name + ".out").shape);
    EXPECT_TRUE(tensor_near(out, nn_fixture(name + ".out").data, nn_atol(dt), nn_rtol(dt))) << "output";
    tg_tensor *r = nn_fixture(name + ".r").make(dt);
    EXPECT_EQ(tg_backward(tg_sum(tg_mul(out, r))), TG_OK) << tg_last_error();
    for (size_t i = 0; i < inputs.size(); i++) {
        std::string g = name + ".grad." + inputs[i];
        if (!nn_fixture_has(g)) continue;
        EXPECT_TRUE(tensor_near(tg_grad(in[i]), nn_fixture(g).data, nn_atol(dt), nn_rtol(dt)))
            << "gradient of " << inputs[i];
    }
    return in;
}

#endif
