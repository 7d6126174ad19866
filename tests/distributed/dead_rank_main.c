/* A rank that dies in the middle of training (tests/distributed/dead_rank_test.sh): rank 1
 * is killed by SIGKILL while rank 0 waits in an all-reduce; mpirun must stop rank 0,
 * which says why, long before TG_DIST_TIMEOUT. Also run with a WORLD_SIZE that
 * contradicts mpirun's, where tg_dist_init must refuse. */
#include <signal.h>
#include <stdio.h>

#include "distributed/dist.h"
#include "tapegrad.h"

int main(void) {
    if (tg_dist_init() != TG_OK) {
        fprintf(stderr, "tg_dist_init failed: %s\n", tg_last_error());
        return 2;
    }
    tg_dist_set_timeout(120);
    if (tg_dist_rank() == 1) {
        fprintf(stderr, "rank 1: dying now\n");
        raise(SIGKILL);
    }
    TG_SCOPE {
        tg_tensor *t = tg_ones(TG_SHAPE(4), (tg_opts){0});
        tg_dist_all_reduce(t, TG_DIST_SUM);
    }
    fprintf(stderr, "rank 0: the all-reduce returned: %s\n", tg_last_error() ? tg_last_error() : "no error");
    tg_dist_finalize();
    return 0;
}
