/* Random fills on the CPU, 10M float32 elements each: uniform_ and normal_ into an
 * existing tensor, and dropout(p = 0.5) of a tensor (a new output). Milliseconds, median
 * of REPS. Both sides draw the same numbers for a seed (tapegrad's CPU generator is
 * PyTorch's), so the check column is the last element after manual_seed(0): equal.
 * Twin: bench/random_torch.py. */
#include "bench/bench_util.h"
#include "tapegrad.h"

#define N (10 * 1000 * 1000)
#define REPS 10

enum { UNIFORM, NORMAL, DROPOUT };

static void run(int kind, const char *name, tg_tensor *t) {
    double times[REPS];
    double check = 0;
    for (int r = 0; r < REPS + 1; r++) {
        tg_manual_seed(0);
        double start = bench_now();
        TG_SCOPE {
            if (kind == UNIFORM) tg_uniform_(t, 0, 1);
            if (kind == NORMAL) tg_normal_(t, 0, 1);
            tg_tensor *out = kind == DROPOUT ? tg_dropout(t, 0.5, true) : t;
            if (r > 0) times[r - 1] = bench_now() - start;
            check = tg_item(tg_narrow(out, 0, N - 1, 1));
        }
    }
    double median = bench_median(times, REPS);
    printf("RESULT {\"bench\": \"%s\", \"impl\": \"tapegrad\", \"seconds\": %.6g, \"unit_value\": %.4g, "
           "\"unit\": \"ms\", \"check\": %.7g, \"peak_rss_mib\": %.1f}\n",
           name, median, median * 1e3, check, bench_peak_rss_mib());
}

int main(void) {
    tg_tensor *t = tg_empty(TG_SHAPE(N), (tg_opts){0});
    run(UNIFORM, "rand_10M", t);
    run(NORMAL, "randn_10M", t);
    tg_fill_(t, 1.0);
    run(DROPOUT, "dropout_10M", t);
    tg_release(t);
    return 0;
}
