// Helpers of the ONNX export tests (tests/onnx/*_test.cc): export a model, then run
// tests/onnx/fixtures/check_onnx.py with Debian's /usr/bin/python3 (python3-onnx's
// onnx.checker, full check; python3-opencv's DNN module as an independent runtime)
// on the file and on tapegrad's own eval-mode outputs.
#ifndef TG_TESTS_ONNX_ONNX_TEST_UTIL_H
#define TG_TESTS_ONNX_ONNX_TEST_UTIL_H

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <sys/wait.h>

#include "tests/test_util.h"

namespace tg_onnx_test {

inline const char *kChecker = "tests/onnx/fixtures/check_onnx.py";

// Runs `/usr/bin/python3 <args>`; returns its exit status and appends its output to *out.
inline int run_python(const std::string &args, std::string *out) {
    std::string cmd = "/usr/bin/python3 " + args + " 2>&1";
    FILE *p = popen(cmd.c_str(), "r");
    if (!p) return -1;
    char buf[512];
    while (fgets(buf, sizeof buf, p)) *out += buf;
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs the checker (check_onnx.py) with `args`.
inline int run_checker(const std::string &args, std::string *out) {
    return run_python(std::string(kChecker) + " " + args, out);
}

inline void write_raw(tg_tensor *t, const std::string &path) {
    tg_tensor *c = tg_contiguous(t);
    std::ofstream f(path, std::ios::binary);
    f.write(static_cast<const char *>(tg_data_ptr(c)), (std::streamsize)(tg_numel(c) * tg_dtype_size(tg_dtype_of(c))));
}

inline std::string shape_arg(tg_tensor *t) {
    std::string s;
    for (int d = 0; d < tg_ndim(t); d++) s += (d ? "," : "") + std::to_string(tg_size(t, d));
    return s;
}

// "PATH:SHAPE[:int64]": a raw file for check_onnx.py.
inline std::string raw_arg(tg_tensor *t, const std::string &path) {
    write_raw(t, path);
    return path + ":" + shape_arg(t) + (tg_dtype_of(t) == TG_INT64 ? ":int64" : "");
}

// A float32 input of shape [n, sample...] drawn from N(0, 1).
inline std::function<tg_tensor *(int64_t)> randn_batch(std::vector<int64_t> sample) {
    return [sample](int64_t n) {
        tg_shape s = {0};
        s.dims[s.ndim++] = n;
        for (int64_t d : sample) s.dims[s.ndim++] = d;
        return tg_randn(s, tg_opts{});
    };
}

// What export_and_check runs on the file.
enum class Runtime {
    kOpenCv,      // onnx.checker, then OpenCV's outputs against tapegrad's at batch 1 and 7
    kCheckerOnly, // onnx.checker and the free batch dim only (OpenCV 4.6 cannot import it)
};

class OnnxTest : public TgTempDirTest {
  protected:
    // Exports `model` on batch_of(2), then checks the file; with kOpenCv compares OpenCV's
    // outputs with the model's eval-mode ones at batch sizes 1 and 7. Returns the
    // checker's output. Frees the model.
    std::string export_and_check(tg_module *model, const std::function<tg_tensor *(int64_t)> &batch_of,
                                 Runtime runtime = Runtime::kOpenCv, const tg_onnx_opts *opts = nullptr) {
        std::string path = dir_ + "/model.onnx", args = path, log;
        tg_status s = tg_onnx_export(model, batch_of(2), path.c_str(), opts);
        EXPECT_EQ(s, TG_OK) << tg_last_error();
        if (s == TG_OK) {
            if (runtime == Runtime::kOpenCv) {
                args += " --opencv";
                tg_eval(model);
                for (int64_t n : {1, 7}) {
                    tg_tensor *x = batch_of(n), *y = tg_forward(model, x);
                    EXPECT_NE(y, nullptr) << tg_last_error();
                    if (!y) break;
                    std::string tag = std::to_string(n);
                    args += " " + raw_arg(x, dir_ + "/x" + tag) + " " + raw_arg(y, dir_ + "/y" + tag);
                }
            }
            int status = run_checker(args, &log);
            bool ok = status == 0 && log.find("onnx.checker: " + path + " ok") != std::string::npos &&
                      log.find("batch: free") != std::string::npos;
            if (runtime == Runtime::kOpenCv)
                ok = ok && log.find("batch 1: max error") != std::string::npos &&
                     log.find("batch 7: max error") != std::string::npos;
            EXPECT_TRUE(ok) << "check_onnx.py exited with " << status << ":\n" << log;
        }
        tg_module_free(model);
        return log;
    }
};

} // namespace tg_onnx_test

#endif
