/* Memory bandwidth of elementwise add: 16M floats added into an existing output
 * (torch.add(a, b, out=c)). GB/s counts the three arrays. Twin: bench/add_torch.py. */
#include "bench/bench_util.h"
#include "tapegrad.h"
#include "ops/elementwise_impl.h"

#define N (16 * 1024 * 1024)
#define REPS 30

int main(void) {
    double times[REPS];
    tg_tensor *a = tg_full(TG_SHAPE(N), 1.5, (tg_opts){0}), *b = tg_full(TG_SHAPE(N), 2.0, (tg_opts){0});
    tg_tensor *c = tg_empty(TG_SHAPE(N), (tg_opts){0});
    for (int r = 0; r < REPS + 1; r++) {
        double start = bench_now();
        tg_binary_into("bench_add", TG_BINARY_ADD, c, a, b);
        if (r > 0) times[r - 1] = bench_now() - start;
    }
    double median = bench_median(times, REPS);
    printf("RESULT {\"bench\": \"add_16M\", \"impl\": \"tapegrad\", \"seconds\": %.6g, \"unit_value\": %.4g, "
           "\"unit\": \"GB/s\", \"check\": %.2f, \"peak_rss_mib\": %.1f}\n",
           median, 3.0 * N * 4 / median * 1e-9, tg_item(tg_narrow(c, 0, N - 1, 1)), bench_peak_rss_mib());
    tg_release(a);
    tg_release(b);
    tg_release(c);
    return 0;
}
