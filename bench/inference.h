/* Shared by the inference benchmarks (bench/qmlp.c, bench/qlenet.c): no-grad forward
 * passes of `model` on the first `batch` rows of `inputs`, one warm-up then `reps`
 * timed, printed as a RESULT line "<name>_<kind>_b<batch>" in images/s whose check is
 * the output's first element. */
#ifndef TG_BENCH_INFERENCE_H
#define TG_BENCH_INFERENCE_H

#include "bench/bench_util.h"
#include "tapegrad.h"

static inline void bench_inference(const char *name, tg_module *model, tg_tensor *inputs, const char *kind, int batch,
                                   int reps) {
    double *times = malloc((size_t)reps * sizeof *times), check = 0;
    tg_set_grad_enabled(false);
    TG_SCOPE {
        tg_tensor *x = tg_narrow(inputs, 0, 0, batch);
        for (int r = 0; r < reps + 1; r++) {
            double start = bench_now();
            TG_SCOPE {
                tg_tensor *y = tg_forward(model, x);
                if (r == 0) check = tg_item(tg_narrow(tg_flatten(y, 0, -1), 0, 0, 1));
            }
            if (r > 0) times[r - 1] = bench_now() - start; /* the first run warms up */
        }
    }
    double median = bench_median(times, reps);
    printf("RESULT {\"bench\": \"%s_%s_b%d\", \"impl\": \"tapegrad\", \"seconds\": %.6g, \"unit_value\": %.4g, "
           "\"unit\": \"images/s\", \"check\": %.4f, \"peak_rss_mib\": %.1f}\n",
           name, kind, batch, median, batch / median, check, bench_peak_rss_mib());
    free(times);
}

#endif
