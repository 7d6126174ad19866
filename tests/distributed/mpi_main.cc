// main() of the GoogleTest binaries that run on several ranks (tests/distributed/*_mpi.cc,
// started by tests/distributed/run_mpi.sh under mpirun): joins the group, lets rank 0 alone
// write the XML report that Bazel (and .ci/run) read, and leaves the group.
#include <cstdlib>
#include <string>

#include "tests/distributed/dist_test_util.h"

int main(int argc, char **argv) {
    if (tg_dist_init() != TG_OK) {
        fprintf(stderr, "tg_dist_init failed: %s\n", tg_last_error());
        return 1;
    }
    // Rank 0 alone tells Bazel that the run got to the end.
    if (tg_dist_rank() != 0) unsetenv("TEST_PREMATURE_EXIT_FILE");
    ::testing::InitGoogleTest(&argc, argv);
    if (tg_dist_rank() != 0) {
        // The other ranks report to the console and through mpirun's exit status.
        const char *dir = getenv("TEST_UNDECLARED_OUTPUTS_DIR");
        ::testing::GTEST_FLAG(output) =
            dir ? "xml:" + std::string(dir) + "/rank" + std::to_string(tg_dist_rank()) + ".xml" : "";
    }
    int result = RUN_ALL_TESTS();
    tg_dist_finalize();
    return result;
}
