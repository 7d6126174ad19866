// Smoke test for the build itself: GoogleTest links and runs, //:tapegrad
// links (when it has sources), and the CUDA build-info defines are consistent.
// Temporary: delete once real tests exist.
#include <gtest/gtest.h>

#include <cstring>

#if __has_include("tapegrad.h")
#include "tapegrad.h"
#endif

TEST(BuildSmoke, GoogleTestRuns) { EXPECT_EQ(1 + 1, 2); }

TEST(BuildSmoke, CudaBuildInfo) {
#ifdef TG_WITH_CUDA
    EXPECT_GT(std::strlen(TG_CUDA_ARCHS), 0u);
    EXPECT_NE(std::strstr(TG_CUDA_ARCHS, "sm_"), nullptr) << TG_CUDA_ARCHS;
    EXPECT_GT(std::strlen(TG_CUDA_VERSION), 0u);
    std::printf("CUDA %s, archs %s\n", TG_CUDA_VERSION, TG_CUDA_ARCHS);
#else
    GTEST_SKIP() << "built without CUDA";
#endif
}
