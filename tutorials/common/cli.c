/* Command line, output paths, clocks and the RESULT line (see common.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "tutorials/common/common.h"

static void usage(FILE *out, const char *prog, const char *about, const tut_args *d, const tut_option *extra,
                  int count) {
    fprintf(out, "%s\n\nusage: %s [options]\n\n", about, prog);
    fprintf(out, "  --device cpu|cuda[:N]|auto  where to train (default %s)\n", d->device_name);
    fprintf(out, "  --epochs N           passes over the training set (default %d)\n", d->epochs);
    fprintf(out, "  --batch-size N       images per step (default %lld)\n", (long long)d->batch_size);
    fprintf(out, "  --lr X               learning rate (default %g)\n", d->lr);
    fprintf(out, "  --seed N             seed for initialisation and shuffling (default %llu)\n",
            (unsigned long long)d->seed);
    fprintf(out, "  --data DIR           MNIST-format data set (default %s)\n", d->data_dir);
    fprintf(out, "  --synthetic          generated images instead of the data set (smoke tests)\n");
    fprintf(out, "  --max-steps N        stop after N training steps in all\n");
    fprintf(out, "  --log FILE           write per-epoch metrics as CSV\n");
    if (d->plot_path) fprintf(out, "  --plot FILE          loss curve as SVG (default %s)\n", d->plot_path);
    fprintf(out, "  --result-line        print a RESULT {...} line for bench/compare.sh\n");
    fprintf(out, "  --show-order         print the first 10 sample indices of epoch 0\n");
    fprintf(out, "  --save-init FILE     save the initial weights (for the PyTorch twin's --init)\n");
    for (int i = 0; i < count; i++) {
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", extra[i].name, extra[i].metavar ? " " : "",
                 extra[i].metavar ? extra[i].metavar : "");
        fprintf(out, "  %-20s %s\n", left, extra[i].help);
    }
    fprintf(out, "  --help               this text\n");
}

static void bad(const char *prog, const char *what, const char *arg) {
    fprintf(stderr, "%s: %s '%s' (see --help)\n", prog, what, arg);
    exit(2);
}

static long long parse_int(const char *prog, const char *opt, const char *s, long long min) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s || v < min) bad(prog, opt, s);
    return v;
}

void tut_parse_args(int argc, char **argv, const char *about, tut_args *args, const tut_option *extra,
                    int count) {
    const char *prog = argc > 0 ? argv[0] : "tutorial";
    const char *slash = strrchr(prog, '/');
    if (slash) prog = slash + 1;
    tut_args defaults = *args;
    if (!args->data_dir) args->data_dir = defaults.data_dir = TG_FASHION_MNIST_DIR;
    if (!args->device_name) args->device_name = defaults.device_name = "cpu";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
#define VALUE() (next ? (i++, next) : (bad(prog, "missing value after", a), ""))
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, prog, about, &defaults, extra, count);
            exit(0);
        } else if (!strcmp(a, "--device")) {
            args->device_name = VALUE();
        } else if (!strcmp(a, "--epochs")) {
            args->epochs = (int)parse_int(prog, "bad --epochs", VALUE(), 1);
        } else if (!strcmp(a, "--batch-size")) {
            args->batch_size = parse_int(prog, "bad --batch-size", VALUE(), 1);
        } else if (!strcmp(a, "--lr")) {
            const char *s = VALUE();
            char *end;
            args->lr = strtod(s, &end);
            if (*end || end == s || !(args->lr > 0)) bad(prog, "bad --lr", s);
        } else if (!strcmp(a, "--seed")) {
            args->seed = (uint64_t)parse_int(prog, "bad --seed", VALUE(), 0);
        } else if (!strcmp(a, "--data")) {
            args->data_dir = VALUE();
        } else if (!strcmp(a, "--log")) {
            args->log_path = VALUE();
        } else if (!strcmp(a, "--plot")) {
            args->plot_path = VALUE();
        } else if (!strcmp(a, "--max-steps")) {
            args->max_steps = parse_int(prog, "bad --max-steps", VALUE(), 1);
        } else if (!strcmp(a, "--synthetic")) {
            args->synthetic = true;
        } else if (!strcmp(a, "--result-line")) {
            args->result_line = true;
        } else if (!strcmp(a, "--show-order")) {
            args->show_order = true;
        } else if (!strcmp(a, "--save-init")) {
            args->save_init_path = VALUE();
        } else {
            int k = 0;
            for (; k < count; k++) {
                if (strcmp(a, extra[k].name)) continue;
                if (extra[k].metavar)
                    *extra[k].value = VALUE();
                else
                    *extra[k].flag = true;
                break;
            }
            if (k == count) bad(prog, "unknown option", a);
        }
#undef VALUE
    }

    /* From here on, any tapegrad error ends the program with its message (TG_ERRORS=exit). */
    tg_set_error_mode(TG_ERRORS_EXIT);

    const char *d = args->device_name;
    if (!strcmp(d, "cpu")) {
        args->device = TG_CPU;
    } else if (!strcmp(d, "auto")) {
        args->device = tg_cuda_available() ? tg_cuda(0) : TG_CPU;
    } else if (!strncmp(d, "cuda", 4) && (d[4] == 0 || d[4] == ':')) {
        int index = d[4] == ':' ? (int)parse_int(prog, "bad --device", d + 5, 0) : 0;
        if (!tg_cuda_available()) {
            fprintf(stderr, "%s: --device %s: no CUDA device here (%s)\n", prog, d, tg_build_info());
            exit(2);
        }
        if (index >= tg_cuda_device_count()) bad(prog, "no such CUDA device", d);
        args->device = tg_cuda(index);
    } else {
        bad(prog, "bad --device (cpu, cuda, cuda:N or auto)", d);
    }
}

const char *tut_output_path(const char *path) {
    static char buffers[4][PATH_MAX];
    static int next;
    if (!path) return NULL;
    const char *base = getenv("BUILD_WORKING_DIRECTORY");
    if (path[0] == '/' || !base || !*base) return path;
    char *buf = buffers[next++ % 4];
    snprintf(buf, PATH_MAX, "%s/%s", base, path);
    return buf;
}

double tut_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double tut_peak_rss_mib(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0;
    return (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

void tut_print_result(const char *bench, double seconds, double accuracy) {
    printf("RESULT {\"bench\": \"%s\", \"impl\": \"tapegrad\", \"seconds\": %.3f, \"unit_value\": %.3f, "
           "\"unit\": \"s\", \"check\": %.2f, \"peak_rss_mib\": %.1f}\n",
           bench, seconds, seconds, accuracy, tut_peak_rss_mib());
    fflush(stdout);
}

void tut_save_init(tg_module *model, const tut_args *args) {
    if (!args->save_init_path) return;
    tg_save_state_dict(model, tut_output_path(args->save_init_path)); /* errors exit (handler) */
}
