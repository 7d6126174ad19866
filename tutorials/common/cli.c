/* Command line, output paths, clocks and the RESULT line (see common.h). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "tutorials/common/common.h"

/* The options every lesson may take, each honoured only by the lessons that set its
 * bit in tut_args.options; the others refuse it as unknown. */
typedef struct {
    const char *name, *metavar, *help;
    unsigned bit;
} common_option;

enum { OPT_HELP = 'h', OPT_COMMON = 1000, OPT_EXTRA = 2000 };

static const common_option commons[] = {
    {"device", "cpu|cuda[:N]|auto", "where to run", TUT_OPT_DEVICE},
    {"epochs", "N", "passes over the training set", TUT_OPT_EPOCHS},
    {"batch-size", "N", "images per step", TUT_OPT_BATCH_SIZE},
    {"lr", "X", "learning rate", TUT_OPT_LR},
    {"seed", "N", "seed for initialisation and shuffling", TUT_OPT_SEED},
    {"data", "DIR", "MNIST-format data set", TUT_OPT_DATA},
    {"synthetic", NULL, "generated images instead of the data set (smoke tests)", TUT_OPT_DATA},
    {"max-steps", "N", "stop after N training steps in all", TUT_OPT_MAX_STEPS},
    {"log", "FILE", "write per-epoch metrics as CSV", TUT_OPT_LOG},
    {"plot", "FILE", "loss curve as SVG", TUT_OPT_PLOT},
    {"result-line", NULL, "print a RESULT {...} line for bench/compare.sh", TUT_OPT_RESULT_LINE},
    {"show-order", NULL, "print the first 10 sample indices of epoch 0", TUT_OPT_SHOW_ORDER},
    {"save-init", "FILE", "save the initial weights (for the PyTorch twin's --init)", TUT_OPT_SAVE_INIT},
    {"amp", "bf16|fp16", "mixed precision: autocast forward and loss (fp16: CUDA, with loss scaling)", TUT_OPT_AMP},
    {"flush-denormal", NULL, "flush subnormal floats to zero on the CPU (faster late in training; JAX always does)",
     TUT_OPT_FLUSH_DENORMAL},
    {"export-onnx", "FILE", "after training, write the model as ONNX (for ONNX Runtime, OpenCV, TensorRT)",
     TUT_OPT_EXPORT_ONNX},
};
#define NUM_COMMONS ((int)(sizeof commons / sizeof commons[0]))

/* The default shown after a common option's help, or "" (flags, no default). */
static const char *default_text(int i, const tut_args *d, char *buf, size_t size) {
    const char *name = commons[i].name;
    buf[0] = '\0';
    if (!strcmp(name, "device")) snprintf(buf, size, " (default %s)", d->device_name);
    else if (!strcmp(name, "epochs")) snprintf(buf, size, " (default %d)", d->epochs);
    else if (!strcmp(name, "batch-size")) snprintf(buf, size, " (default %lld)", (long long)d->batch_size);
    else if (!strcmp(name, "lr")) snprintf(buf, size, " (default %g)", d->lr);
    else if (!strcmp(name, "seed")) snprintf(buf, size, " (default %llu)", (unsigned long long)d->seed);
    else if (!strcmp(name, "data")) snprintf(buf, size, " (default %s)", d->data_dir);
    else if (!strcmp(name, "plot") && d->plot_path) snprintf(buf, size, " (default %s)", d->plot_path);
    return buf;
}

static void usage(FILE *out, const char *prog, const char *about, const tut_args *d, const tut_option *extra,
                  int count) {
    fprintf(out, "%s\n\nusage: %s [options]   (--name VALUE or --name=VALUE)\n\n", about, prog);
    char left[64], dflt[160];
    for (int i = 0; i < NUM_COMMONS; i++) {
        if (!(d->options & commons[i].bit)) continue;
        snprintf(left, sizeof left, "--%s%s%s", commons[i].name, commons[i].metavar ? " " : "",
                 commons[i].metavar ? commons[i].metavar : "");
        fprintf(out, "  %-28s %s%s\n", left, commons[i].help, default_text(i, d, dflt, sizeof dflt));
    }
    for (int i = 0; i < count; i++) {
        snprintf(left, sizeof left, "%s%s%s", extra[i].name, extra[i].metavar ? " " : "",
                 extra[i].metavar ? extra[i].metavar : "");
        fprintf(out, "  %-28s %s\n", left, extra[i].help);
    }
    fprintf(out, "  %-28s %s\n", "--help, -h", "this text");
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

static void set_common(const char *prog, const char *name, const char *value, tut_args *args) {
    if (!strcmp(name, "device")) {
        args->device_name = value;
    } else if (!strcmp(name, "epochs")) {
        args->epochs = (int)parse_int(prog, "bad --epochs", value, 1);
    } else if (!strcmp(name, "batch-size")) {
        args->batch_size = parse_int(prog, "bad --batch-size", value, 1);
    } else if (!strcmp(name, "lr")) {
        char *end;
        args->lr = strtod(value, &end);
        if (*end || end == value || !(args->lr > 0)) bad(prog, "bad --lr", value);
    } else if (!strcmp(name, "seed")) {
        args->seed = (uint64_t)parse_int(prog, "bad --seed", value, 0);
    } else if (!strcmp(name, "data")) {
        args->data_dir = value;
    } else if (!strcmp(name, "synthetic")) {
        args->synthetic = true;
    } else if (!strcmp(name, "max-steps")) {
        args->max_steps = parse_int(prog, "bad --max-steps", value, 1);
    } else if (!strcmp(name, "log")) {
        args->log_path = value;
    } else if (!strcmp(name, "plot")) {
        args->plot_path = value;
    } else if (!strcmp(name, "result-line")) {
        args->result_line = true;
    } else if (!strcmp(name, "show-order")) {
        args->show_order = true;
    } else if (!strcmp(name, "save-init")) {
        args->save_init_path = value;
    } else if (!strcmp(name, "amp")) {
        if (strcmp(value, "bf16") && strcmp(value, "fp16")) bad(prog, "bad --amp (bf16 or fp16)", value);
        args->amp_name = value;
    } else if (!strcmp(name, "export-onnx")) {
        args->export_onnx_path = value;
    } else if (!strcmp(name, "flush-denormal")) {
        if (!tg_set_flush_denormal(true)) bad(prog, "this CPU cannot flush subnormals", "--flush-denormal");
    }
}

void tut_parse_args(int argc, char **argv, const char *about, tut_args *args, const tut_option *extra, int count) {
    const char *prog = argc > 0 ? argv[0] : "tutorial";
    const char *slash = strrchr(prog, '/');
    if (slash) prog = slash + 1;
    if (!args->data_dir) args->data_dir = TG_FASHION_MNIST_DIR;
    if (!args->device_name) args->device_name = "cpu";
    tut_args defaults = *args;

    /* getopt_long's table: the common options this lesson honours, then its own. */
    struct option *table = calloc((size_t)(NUM_COMMONS + count + 2), sizeof *table);
    if (!table) exit(1);
    int n = 0;
    for (int i = 0; i < NUM_COMMONS; i++)
        if (args->options & commons[i].bit)
            table[n++] = (struct option){commons[i].name, commons[i].metavar ? required_argument : no_argument, NULL,
                                         OPT_COMMON + i};
    for (int i = 0; i < count; i++) {
        const char *name = extra[i].name;
        while (*name == '-') name++;
        table[n++] = (struct option){name, extra[i].metavar ? required_argument : no_argument, NULL, OPT_EXTRA + i};
    }
    table[n++] = (struct option){"help", no_argument, NULL, OPT_HELP};

    opterr = 0; /* our own messages, which name the lesson and point to --help */
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", table, NULL)) != -1) {
        const char *arg = argv[optind - 1];
        if (c == OPT_HELP) {
            usage(stdout, prog, about, &defaults, extra, count);
            exit(0);
        } else if (c >= OPT_EXTRA) {
            const tut_option *o = &extra[c - OPT_EXTRA];
            if (o->metavar) *o->value = optarg;
            else *o->flag = true;
        } else if (c >= OPT_COMMON) {
            set_common(prog, commons[c - OPT_COMMON].name, optarg, args);
        } else if (c == ':') {
            bad(prog, "missing value after", arg);
        } else {
            /* '?': not an option of this lesson, or a value given to a flag (--synthetic=1) */
            bad(prog, strchr(arg, '=') && optopt ? "option takes no value" : "unknown option for this lesson", arg);
        }
    }
    if (optind < argc) bad(prog, "unexpected argument", argv[optind]);
    free(table);

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

    bool on_cpu = args->device.kind == TG_DEVICE_CPU;
    args->amp = args->amp_name != NULL;
    args->amp_dtype = args->amp && !strcmp(args->amp_name, "fp16") ? TG_FLOAT16 : TG_BFLOAT16;
    if (args->amp && on_cpu && args->amp_dtype == TG_FLOAT16) {
        fprintf(stderr,
                "%s: --amp fp16 needs a CUDA device: autocast on the CPU is bfloat16 only, as PyTorch's "
                "(use --amp bf16)\n",
                prog);
        exit(2);
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

void tut_profile_section(const char *what, int64_t steps, double seconds) {
    if (!tg_profile_enabled()) return;
    fprintf(stderr, "\nTG_PROFILE: %s, %lld steps in %.3f s (%.3f ms a step)", what, (long long)steps, seconds,
            steps ? seconds * 1e3 / (double)steps : 0.0);
    tg_profile_print(stderr);
    tg_profile_reset();
}

double tut_peak_rss_mib(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0;
    return (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

static size_t step_held_at_start, step_peak_bytes, forward_peak_bytes; /* 0: nothing measured */
static bool in_step;
static int64_t steps_seen;

void tut_step_memory_begin(void) {
    tg_cpu_reset_peak_memory_stats();
    step_held_at_start = tg_cpu_memory_stats().allocated;
    in_step = true;
}

/* Raises *most to the allocator's peak above what the step began with (nothing on the
 * CPU, as in a CUDA step, raises nothing). */
static void record_peak(size_t *most) {
    size_t peak = tg_cpu_memory_stats().peak;
    size_t above = peak > step_held_at_start ? peak - step_held_at_start : 0;
    if (above > *most) *most = above;
}

void tut_step_memory_end(void) {
    in_step = false;
    /* The first step is left out: the optimizer makes its state there (Adam's moments,
     * SGD's momentum), which stays held and is not an activation. */
    if (steps_seen++ == 0) return;
    record_peak(&step_peak_bytes);
}

void tut_step_memory_forward_end(void) {
    if (in_step && steps_seen > 0) record_peak(&forward_peak_bytes); /* in a measured step, not the first */
}

static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

double tut_activation_peak_mib(void) { return step_peak_bytes ? mib(step_peak_bytes) : -1; }

void tut_print_result(const char *bench, double seconds, double accuracy) {
    printf("RESULT {\"bench\": \"%s\", \"impl\": \"tapegrad\", \"seconds\": %.3f, \"unit_value\": %.3f, "
           "\"unit\": \"s\", \"check\": %.2f, \"peak_rss_mib\": %.1f",
           bench, seconds, seconds, accuracy, tut_peak_rss_mib());
    if (step_peak_bytes) printf(", \"activation_peak_mib\": %.2f", mib(step_peak_bytes));
    if (forward_peak_bytes) printf(", \"forward_peak_mib\": %.2f", mib(forward_peak_bytes));
    printf("}\n");
    fflush(stdout);
}

void tut_save_init(tg_module *model, const tut_args *args) {
    if (!args->save_init_path) return;
    tg_save_state_dict(model, tut_output_path(args->save_init_path)); /* errors exit (handler) */
}

int tut_export_onnx(tg_module *model, tg_shape example_shape, tg_dtype dtype, const tut_args *args,
                    const char *suffix) {
    if (!args->export_onnx_path) return 0;
    char path[PATH_MAX];
    const char *file = tut_output_path(args->export_onnx_path);
    if (suffix) { /* a.onnx -> a_<suffix>.onnx (an extension only in the last path component) */
        const char *dot = strrchr(file, '.'), *slash = strrchr(file, '/');
        int stem = dot && (!slash || dot > slash + 1) ? (int)(dot - file) : (int)strlen(file);
        snprintf(path, sizeof path, "%.*s_%s%s", stem, file, suffix, file + stem);
    } else {
        snprintf(path, sizeof path, "%s", file);
    }
    /* The lessons run with TG_ERRORS_EXIT; a model the exporter cannot write yet is
     * reported here instead, without ending the program. */
    tg_error_mode mode = tg_set_error_mode(TG_ERRORS_SILENT);
    tg_status status = TG_ERROR;
    TG_SCOPE {
        tg_tensor *x = tg_zeros(example_shape, (tg_opts){.dtype = dtype, .device = args->device});
        if (x) status = tg_onnx_export(model, x, path, NULL);
    }
    if (status == TG_OK) printf("exported %s\n", path);
    else fprintf(stderr, "--export-onnx %s: %s\n", path, tg_last_error());
    fflush(stdout);
    tg_clear_error();
    tg_set_error_mode(mode);
    return status == TG_OK ? 0 : 1;
}
