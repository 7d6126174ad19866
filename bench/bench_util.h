/* Shared by the C benchmarks: a monotonic clock, medians, peak RSS, and the one-line
 * result format that bench/compare.sh reads (its PyTorch twins print the same):
 *   RESULT {"bench": "overhead", "impl": "tapegrad", "seconds": ..., "unit_value": ..., "unit": "us/op", ...} */
#ifndef TG_BENCH_UTIL_H
#define TG_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Peak resident set size of this process, in MiB. */
static inline double bench_peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

#endif
