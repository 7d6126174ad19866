// Helpers of the tests that run on several ranks (tests/distributed/*_mpi.cc).
#ifndef TG_TESTS_DIST_TEST_UTIL_H
#define TG_TESTS_DIST_TEST_UTIL_H

#include "distributed/ddp.h"
#include "distributed/dist.h"
#include "distributed/sync_batch_norm.h"
#include "tests/test_util.h"

// TgTest whose outcome is agreed by every rank: a test that fails on one rank fails
// on rank 0 too (which writes the report), with a message naming the rank.
class DistTest : public TgTest {
  protected:
    void TearDown() override {
        if (sync_outcome_ && tg_dist_is_initialized() && tg_dist_world_size() > 1) {
            int32_t failed = HasFailure() ? 1 << tg_dist_rank() : 0;
            tg_tensor *flag = tg_from_data(&failed, TG_SHAPE(1), (tg_opts){.dtype = TG_INT32});
            ASSERT_EQ(tg_dist_all_reduce(flag, TG_DIST_SUM), TG_OK) << tg_last_error();
            int32_t ranks = *(int32_t *)tg_data_ptr(flag);
            if (ranks && !HasFailure()) ADD_FAILURE() << "the test failed on the ranks of mask " << ranks;
        }
        TgTest::TearDown();
    }
    bool sync_outcome_ = true; // false when a test breaks the group on purpose
};

#endif
