/* A data-parallel program built against the installed tapegrad-dist (tests/install_test.sh):
 * run on its own it is a world of one rank (MPI's singleton); an all-reduce, a DDP step and
 * a SyncBatchNorm forward must work there as on N ranks. */
#include <stdio.h>

#include "distributed/ddp.h"
#include "distributed/sync_batch_norm.h"
#include "tapegrad.h"

int main(void) {
    if (tg_dist_init() != TG_OK) {
        fprintf(stderr, "tg_dist_init: %s\n", tg_last_error());
        return 1;
    }
    int ok = 1;
    TG_SCOPE {
        tg_tensor *t = tg_full(TG_SHAPE(2, 2), 3.0, (tg_opts){0});
        ok = tg_dist_all_reduce(t, TG_DIST_AVG) == TG_OK && tg_item(tg_sum(t)) == 12.0;
        tg_module *net = TG_NN_SEQUENTIAL(tg_nn_linear(2, 2, (tg_linear_opts){0}),
                                          tg_nn_sync_batch_norm(2, (tg_batch_norm_opts){0}));
        tg_ddp *ddp = tg_ddp_new(net, (tg_ddp_opts){0});
        ok = ok && ddp && tg_backward(tg_sum(tg_ddp_forward(ddp, t))) == TG_OK;
        tg_ddp_free(ddp);
        tg_module_free(net);
    }
    printf("dist %s: rank %d of %d\n", ok ? "ok" : "FAILED", tg_dist_rank(), tg_dist_world_size());
    tg_dist_finalize();
    return ok ? 0 : 1;
}
