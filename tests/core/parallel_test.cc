// The thread pool (core/parallel.h): every index exactly once, nested loops serial,
// the thread count as set and as read from the environment, and kernels that give the
// same bits whatever the thread count.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "test_util.h"

namespace {

// Restores the thread count a test changed.
class Parallel : public TgTest {
  protected:
    void SetUp() override {
        TgTest::SetUp();
        saved_ = tg_get_num_threads();
    }
    void TearDown() override {
        tg_set_num_threads(saved_);
        TgTest::TearDown();
    }
    int saved_ = 1;
};

struct Coverage {
    std::vector<std::atomic<int>> hits;
    std::atomic<int> calls{0}, bad_ranges{0};
    explicit Coverage(int64_t n) : hits((size_t)n) {}
};

void count_range(int64_t begin, int64_t end, void *arg) {
    auto *c = static_cast<Coverage *>(arg);
    c->calls++;
    if (begin >= end || begin < 0 || end > (int64_t)c->hits.size()) c->bad_ranges++;
    for (int64_t i = begin; i < end && i < (int64_t)c->hits.size(); i++) c->hits[(size_t)i]++;
}

std::string run_self(const std::string &env) {
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1); // this test binary
    if (len <= 0) return "readlink failed";
    self[len] = '\0';
    std::string cmd = env + " '" + self + "' --gtest_filter=ParallelChild.PrintThreads 2>&1";
    std::string out;
    FILE *p = popen(cmd.c_str(), "r");
    if (!p) return "popen failed";
    char buf[512];
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
    size_t at = out.find("threads=");
    return at == std::string::npos ? out : out.substr(at, out.find('\n', at) - at);
}

} // namespace

TEST_F(Parallel, EveryIndexExactlyOnce) {
    for (int threads : {1, 2, 3, 4, 8}) {
        tg_set_num_threads(threads);
        for (int64_t n : {0, 1, 2, 7, 64, 1000, 4097, 100003}) {
            for (int64_t grain : {0, 1, 3, 64, 1000, 1 << 20}) {
                Coverage c(n);
                tg_parallel_for(n, grain, count_range, &c);
                EXPECT_EQ(c.bad_ranges.load(), 0) << "n " << n << " grain " << grain << " threads " << threads;
                int64_t wrong = 0;
                for (auto &h : c.hits) wrong += h.load() != 1;
                EXPECT_EQ(wrong, 0) << "n " << n << " grain " << grain << " threads " << threads;
                if (n > 0 && (n <= grain || threads == 1)) {
                    EXPECT_EQ(c.calls.load(), 1);
                } // serial: one call
                if (n == 0) {
                    EXPECT_EQ(c.calls.load(), 0);
                }
            }
        }
    }
}

namespace {
struct SmallWork {
    pthread_t caller;
    bool same_thread = true, in_region = false;
    int calls = 0;
};
void small_range(int64_t, int64_t, void *arg) {
    auto *w = static_cast<SmallWork *>(arg);
    w->calls++;
    w->same_thread = w->same_thread && pthread_equal(pthread_self(), w->caller);
    w->in_region = tg_in_parallel_region();
}
} // namespace

TEST_F(Parallel, SmallWorkStaysOnTheCallingThread) {
    tg_set_num_threads(4);
    SmallWork w{pthread_self()};
    tg_parallel_for(100, 100, small_range, &w); // n <= grain
    EXPECT_EQ(w.calls, 1);
    EXPECT_TRUE(w.same_thread);
    EXPECT_FALSE(w.in_region); // serial: no region
    EXPECT_FALSE(tg_in_parallel_region());
}

namespace {
struct NestedOne {
    std::atomic<int> serial_inner{0}, outer_chunks{0};
};
void nested_inner(int64_t begin, int64_t end, void *arg) {
    if (begin == 0 && end == 50000) static_cast<NestedOne *>(arg)->serial_inner++;
}
void nested_outer(int64_t begin, int64_t end, void *arg) {
    auto *n = static_cast<NestedOne *>(arg);
    n->outer_chunks++;
    EXPECT_TRUE(tg_in_parallel_region());
    tg_parallel_for(50000, 1, nested_inner, arg);
}
} // namespace

TEST_F(Parallel, NestedLoopsRunSerially) {
    tg_set_num_threads(2);
    NestedOne n;
    tg_parallel_for(8, 1, nested_outer, &n);
    EXPECT_GE(n.outer_chunks.load(), 2); // the outer loop went parallel
    EXPECT_EQ(n.serial_inner.load(), n.outer_chunks.load());
    EXPECT_FALSE(tg_in_parallel_region());
}

namespace {
struct Rendezvous {
    std::atomic<int> arrived{0};
    std::mutex mu;
    std::set<std::thread::id> ids;
    bool met = false;
};
// Two chunks that each wait (up to 10 s) for the other to start: only two threads meet.
void meet(int64_t, int64_t, void *arg) {
    auto *r = static_cast<Rendezvous *>(arg);
    {
        std::lock_guard<std::mutex> g(r->mu);
        r->ids.insert(std::this_thread::get_id());
    }
    r->arrived++;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (r->arrived.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    if (r->arrived.load() >= 2) r->met = true;
}
} // namespace

TEST_F(Parallel, WorkersRunChunks) {
    tg_set_num_threads(2);
    Rendezvous r;
    tg_parallel_for(2, 1, meet, &r);
    EXPECT_TRUE(r.met);
    EXPECT_EQ(r.ids.size(), 2u);
}

TEST_F(Parallel, SetAndGetNumThreads) {
    tg_set_num_threads(1);
    EXPECT_EQ(tg_get_num_threads(), 1);
    tg_set_num_threads(3);
    EXPECT_EQ(tg_get_num_threads(), 3);
    tg_set_num_threads(64); // more than this machine's cores: allowed
    EXPECT_EQ(tg_get_num_threads(), 64);
    Coverage c(1 << 16);
    tg_parallel_for(1 << 16, 1, count_range, &c);
    for (auto &h : c.hits) ASSERT_EQ(h.load(), 1);
    tg_set_num_threads(100000);
    EXPECT_EQ(tg_get_num_threads(), 256);
    tg_set_num_threads(2);
    tg_set_num_threads(0);
    EXPECT_ERROR_CONTAINS("tg_set_num_threads: the number of threads must be positive, got 0");
    EXPECT_EQ(tg_get_num_threads(), 2);
    tg_clear_error();
}

TEST_F(Parallel, TwoCallersAtOnce) {
    // A second thread's loop while the pool is busy runs on that thread: both complete.
    tg_set_num_threads(2);
    std::atomic<int64_t> wrong{0};
    auto work = [&] {
        for (int rep = 0; rep < 200; rep++) {
            Coverage c(5000);
            tg_parallel_for(5000, 100, count_range, &c);
            for (auto &h : c.hits) wrong += h.load() != 1;
        }
    };
    std::thread a(work), b(work);
    a.join();
    b.join();
    EXPECT_EQ(wrong.load(), 0);
}

void touch_range(int64_t begin, int64_t end, void *arg) {
    auto *sink = static_cast<std::atomic<int64_t> *>(arg);
    int64_t s = 0;
    for (int64_t i = begin; i < end; i++) s += i * i;
    *sink += s;
}

TEST_F(Parallel, StopsSpinningWhenTheMachineIsOversubscribed) {
    // Twice as many CPU-bound threads as CPUs beside the pool: the calling thread keeps
    // being preempted, which the pool must notice within a few of its 50 ms windows.
    tg_set_num_threads(2);
    std::atomic<bool> stop{false};
    std::vector<std::thread> hogs;
    for (unsigned i = 0; i < 2 * std::max(1u, std::thread::hardware_concurrency()); i++)
        hogs.emplace_back([&] {
            volatile uint64_t x = 0;
            while (!stop.load(std::memory_order_relaxed)) x = x + 1;
        });
    std::atomic<int64_t> sink{0};
    bool seen = false;
    auto start = std::chrono::steady_clock::now();
    while (!seen && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
        tg_parallel_for(1 << 16, 1 << 10, touch_range, &sink);
        seen = tg_parallel_oversubscribed();
    }
    stop = true;
    for (auto &t : hogs) t.join();
    EXPECT_TRUE(seen) << "no window of the calling thread counted 100 involuntary context switches a second";
}

// Run by the tests below in a child process with a given environment.
TEST(ParallelChild, PrintThreads) {
    if (!getenv("TG_PARALLEL_TEST_CHILD")) GTEST_SKIP() << "run by Parallel.EnvironmentSetsTheCount";
    printf("threads=%d\n", tg_get_num_threads());
}

TEST_F(Parallel, EnvironmentSetsTheCount) {
    const std::string child = "env -u TG_NUM_THREADS -u OMP_NUM_THREADS TG_PARALLEL_TEST_CHILD=1";
    EXPECT_EQ(run_self(child + " TG_NUM_THREADS=3"), "threads=3");
    EXPECT_EQ(run_self(child + " OMP_NUM_THREADS=5"), "threads=5");
    EXPECT_EQ(run_self(child + " OMP_NUM_THREADS=4,2"), "threads=4");
    EXPECT_EQ(run_self(child + " TG_NUM_THREADS=2 OMP_NUM_THREADS=5"), "threads=2"); // TG_ wins
    EXPECT_EQ(run_self(child + " TG_NUM_THREADS=junk"), run_self(child));            // ignored
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    EXPECT_EQ(run_self(child), "threads=" + std::to_string(CPU_COUNT(&set))); // the affinity mask
    if (system("command -v taskset >/dev/null 2>&1") == 0 && CPU_COUNT(&set) > 1) {
        int first = 0;
        while (!CPU_ISSET(first, &set)) first++;
        EXPECT_EQ(run_self(child + " taskset -c " + std::to_string(first)), "threads=1");
    }
}

namespace {
// Bits of a float tensor.
std::vector<uint32_t> bits(tg_tensor *t) {
    std::vector<uint32_t> b((size_t)tg_numel(t));
    EXPECT_EQ(tg_copy_to_host(t, b.data(), b.size() * sizeof(uint32_t)), TG_OK);
    return b;
}

std::vector<double> as_floats(const std::vector<uint32_t> &bits) {
    std::vector<double> v;
    for (uint32_t b : bits) {
        float f;
        std::memcpy(&f, &b, sizeof f);
        v.push_back(f);
    }
    return v;
}

// Kernels that go parallel at these sizes, forward and backward; the results as bits.
std::vector<std::vector<uint32_t>> kernels_once() {
    std::vector<std::vector<uint32_t>> out;
    tg_manual_seed(3);
    tg_opts f = {TG_FLOAT32, TG_CPU, false};
    tg_tensor *x = tg_randn(TG_SHAPE(1 << 20), f);
    out.push_back(bits(tg_sum(x)));            // full sum, fixed blocks
    out.push_back(bits(tg_exp(tg_add(x, x)))); // elementwise
    tg_tensor *m = tg_reshape(x, TG_SHAPE(1024, 1024));
    out.push_back(bits(tg_sum_dim(m, 0, false))); // columns
    out.push_back(bits(tg_sum_dim(m, 1, false))); // rows
    out.push_back(bits(tg_softmax(m, 1)));
    out.push_back(bits(tg_max_dim(m, 1, false, NULL)));
    tg_tensor *a = tg_randn(TG_SHAPE(256, 300), f), *b = tg_randn(TG_SHAPE(300, 520), f);
    out.push_back(bits(tg_matmul(a, b))); // split GEMM
    out.push_back(bits(tg_matmul(tg_transpose(b, 0, 1), tg_transpose(a, 0, 1))));
    tg_tensor *img = tg_requires_grad_(tg_randn(TG_SHAPE(64, 1, 28, 28), f), true);
    tg_tensor *w = tg_requires_grad_(tg_randn(TG_SHAPE(20, 1, 5, 5), f), true);
    tg_tensor *y = tg_conv2d(img, w, NULL, tg_conv_opts{});
    out.push_back(bits(y));
    tg_pool_opts po = {};
    po.kernel_size = 2;
    tg_tensor *p = tg_max_pool2d(y, po, NULL);
    out.push_back(bits(p));
    tg_backward(tg_sum(tg_mul(p, p)));
    out.push_back(bits(tg_grad(img))); // conv input gradient
    return out;
}
} // namespace

TEST_F(Parallel, KernelsGiveTheSameBitsWithOneAndTwoThreads) {
    tg_set_num_threads(1);
    std::vector<std::vector<uint32_t>> one = kernels_once();
    tg_set_num_threads(2);
    std::vector<std::vector<uint32_t>> two = kernels_once();
    tg_set_num_threads(3);
    std::vector<std::vector<uint32_t>> three = kernels_once();
    ASSERT_EQ(one.size(), two.size());
    for (size_t i = 0; i < one.size(); i++) {
        if (!gemm_split_keeps_bits() && i >= 6) { // made by split GEMMs (tests/test_util.h)
            EXPECT_TRUE(close_as_gemm(as_floats(one[i]), as_floats(two[i]))) << "result " << i;
            EXPECT_TRUE(close_as_gemm(as_floats(one[i]), as_floats(three[i]))) << "result " << i;
            continue;
        }
        EXPECT_EQ(one[i], two[i]) << "result " << i;
        EXPECT_EQ(one[i], three[i]) << "result " << i;
    }
}

// Two threads in OpenBLAS at once (one block of C each), float64: the same bits as one
// thread, every time. (Debian's serial OpenBLAS build failed tests/optim/training_models_test
// this way, docs/design.md; this small case alone does not show it.)
TEST_F(Parallel, SplitGemmFloat64MatchesOneThread) {
    tg_manual_seed(5);
    tg_opts d = {TG_FLOAT64, TG_CPU, false};
    tg_tensor *x = tg_randn(TG_SHAPE(8, 800), d), *w = tg_randn(TG_SHAPE(500, 800), d),
              *g = tg_randn(TG_SHAPE(8, 500), d);
    auto products = [&] {
        std::vector<std::vector<double>> r;
        TG_SCOPE {
            r.push_back(values(tg_matmul(x, tg_transpose(w, 0, 1)))); // forward, split by columns
            r.push_back(values(tg_matmul(g, w)));                     // input gradient
            r.push_back(values(tg_matmul(tg_transpose(g, 0, 1), x))); // weight gradient, split by rows
        }
        return r;
    };
    tg_set_num_threads(1);
    std::vector<std::vector<double>> one = products();
    tg_set_num_threads(2);
    for (int rep = 0; rep < 50; rep++) ASSERT_EQ(products(), one) << "repetition " << rep;
}
