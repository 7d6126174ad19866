/* Helpers shared by the tutorial programs, so that each main.c shows only what
 * its lesson is about: the command line, the progress bar, the metrics CSV, the
 * loss-curve SVG, the data sets (Fashion-MNIST or generated) and the evaluation
 * loop. Uses only the public API (tapegrad.h). */
#ifndef TG_TUTORIALS_COMMON_H
#define TG_TUTORIALS_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tapegrad.h"

/* ---- command line ---- */

/* The options shared by the lessons; a lesson lists those it honours in
 * tut_args.options, and the others are refused as unknown (every flag honoured or
 * refused: none is accepted and then ignored). */
enum {
    TUT_OPT_DEVICE = 1u << 0,          /* --device */
    TUT_OPT_EPOCHS = 1u << 1,          /* --epochs */
    TUT_OPT_BATCH_SIZE = 1u << 2,      /* --batch-size */
    TUT_OPT_LR = 1u << 3,              /* --lr */
    TUT_OPT_SEED = 1u << 4,            /* --seed */
    TUT_OPT_DATA = 1u << 5,            /* --data, --synthetic (tut_load_data) */
    TUT_OPT_MAX_STEPS = 1u << 6,       /* --max-steps */
    TUT_OPT_LOG = 1u << 7,             /* --log (tut_log_open) */
    TUT_OPT_PLOT = 1u << 8,            /* --plot (tut_plot_svg) */
    TUT_OPT_RESULT_LINE = 1u << 9,     /* --result-line (tut_print_result) */
    TUT_OPT_SHOW_ORDER = 1u << 10,     /* --show-order */
    TUT_OPT_SAVE_INIT = 1u << 11,      /* --save-init (tut_save_init) */
    TUT_OPT_AMP = 1u << 12,            /* --amp bf16|fp16 */
    TUT_OPT_FLUSH_DENORMAL = 1u << 13, /* --flush-denormal (tg_set_flush_denormal) */
    TUT_OPT_EXPORT_ONNX = 1u << 14,    /* --export-onnx FILE (tut_export_onnx) */
    /* what a training lesson honours at least */
    TUT_OPT_TRAINING = TUT_OPT_DEVICE | TUT_OPT_EPOCHS | TUT_OPT_BATCH_SIZE | TUT_OPT_LR | TUT_OPT_SEED | TUT_OPT_DATA |
                       TUT_OPT_MAX_STEPS | TUT_OPT_FLUSH_DENORMAL | TUT_OPT_EXPORT_ONNX,
};

/* A lesson-specific option taking a value ("--stop-after 50"), or a flag when
 * `value` is NULL and `flag` is set. */
typedef struct {
    const char *name;    /* "--resume" */
    const char *metavar; /* "FILE" (NULL for a flag) */
    const char *help;
    const char **value; /* where the string goes (left as is when absent) */
    bool *flag;         /* for flags */
} tut_option;

typedef struct {
    unsigned options; /* TUT_OPT_* bits: the common options this lesson honours */
    /* The common options, with their defaults filled in. */
    const char *device_name; /* "cpu", "cuda", "cuda:1", "auto" */
    tg_device device;        /* resolved */
    int epochs;
    int64_t batch_size;
    double lr;
    uint64_t seed;
    const char *data_dir;         /* TG_FASHION_MNIST_DIR unless --data */
    const char *log_path;         /* --log FILE (metrics CSV), NULL: none */
    const char *plot_path;        /* --plot FILE (loss-curve SVG), NULL: none */
    int64_t max_steps;            /* --max-steps N: stop training after N steps (0: no limit) */
    bool synthetic;               /* --synthetic: generated data instead of the data set */
    bool result_line;             /* --result-line: print one RESULT {...} line for bench/compare.sh */
    bool show_order;              /* --show-order: print the first 10 sample indices of epoch 0 */
    const char *save_init_path;   /* --save-init FILE: the initial weights, for the PyTorch twin */
    const char *export_onnx_path; /* --export-onnx FILE: the trained model as ONNX (tut_export_onnx) */
    /* --amp bf16|fp16: mixed precision as PyTorch's recipe, autocast around forward and
     * loss (TG_AUTOCAST_IF(device.kind, amp_dtype, amp)), float32 master weights, and
     * loss scaling (GradScaler) for fp16 only. fp16 needs a CUDA device (CPU autocast is
     * bfloat16 only, as PyTorch 1.13's); refused on the CPU. */
    const char *amp_name; /* NULL: off */
    bool amp;
    tg_dtype amp_dtype; /* a dtype autocast accepts on that device even when off */
} tut_args;

/* Parses argv with getopt_long (--name VALUE and --name=VALUE) into *args (which
 * holds the program's defaults and its `options` on entry; unambiguous abbreviations
 * such as --epoch are getopt_long's) and the lesson's `extra`
 * options (count may be 0). Prints --help (the `about` line, then every option the
 * lesson honours with its default) and exits 0; exits 2 on an unknown option (one
 * the lesson does not honour included), a missing or bad value, or a stray argument.
 * Resolves the device: "auto" is CUDA when tg_cuda_available(), else the CPU;
 * asking for CUDA without it exits with a message. Also sets tapegrad's error mode to
 * TG_ERRORS_EXIT (print the message and exit), so the lessons need no error checks. */
void tut_parse_args(int argc, char **argv, const char *about, tut_args *args, const tut_option *extra, int count);

/* Where to write an output file given on the command line: `bazel run` runs the
 * program in its runfiles folder, so a relative path is taken relative to
 * $BUILD_WORKING_DIRECTORY (the folder bazel was called from) when it is set.
 * Returns a static buffer (one of four, rotated). */
const char *tut_output_path(const char *path);

/* With --save-init FILE: writes the model's freshly initialised state dict
 * (safetensors, PyTorch's names) so that a twin in bench/ (mlp_torch.py --init FILE)
 * starts from the very same weights (the same seed gives them too; this checks it). */
void tut_save_init(tg_module *model, const tut_args *args);

/* With --export-onnx FILE: writes the trained `model` as an ONNX file (tg_onnx_export,
 * onnx/export.h: eval mode, the batch dim free) traced on an example input of zeros of
 * `example_shape` (batch 1) and `dtype` on args->device, then prints "exported FILE" and
 * returns 0. When the exporter refuses the model (an op without an ONNX mapping), prints
 * its message and returns 1 instead of exiting, so the lesson's training and outputs
 * stand and only its exit status says the export failed. `suffix` NULL writes FILE; a
 * lesson with a second model names it: "lenet" writes FILE with "_lenet" before its
 * extension (a.onnx -> a_lenet.onnx). Without the option: does nothing, returns 0. */
int tut_export_onnx(tg_module *model, tg_shape example_shape, tg_dtype dtype, const tut_args *args, const char *suffix);

/* Seconds on a monotonic clock. */
double tut_now(void);
/* Under TG_PROFILE=1: prints the profile of what ran since the last call (or the
 * start), headed "what", and starts a new one; the table at exit then holds only
 * what came after (the evaluation). Does nothing otherwise. */
void tut_profile_section(const char *what, int64_t steps, double seconds);
/* Peak resident set size of the process in MiB. */
double tut_peak_rss_mib(void);

/* ---- data ---- */

typedef struct {
    tg_tensor *train_x, *train_y; /* owned references; x float32 normalised, y int64 */
    tg_tensor *test_x, *test_y;
    const char *name; /* "Fashion-MNIST", "generated", ... */
} tut_data;

/* Loads args->data_dir (train and test splits), scales to [0, 1] and normalises
 * with the data set's mean and std (Fashion-MNIST's published values for the
 * default folder, measured on the training images otherwise). With
 * args->synthetic, generates 1024 train and 512 test images of 10 classes instead
 * (each class a fixed random pattern plus noise, so a model can learn it).
 * `image_shape` true gives x as [N, 1, 28, 28] (conv nets), false as [N, 784].
 * The tensors are owned by the caller: tut_data_free. */
tut_data tut_load_data(const tut_args *args, bool image_shape);
void tut_data_free(tut_data *d);
/* Appends the bytes of the file at path to *text (realloc'd; *length grows); exits
 * with a message naming the file (and Debian's `fortunes` package) when it cannot. */
void tut_append_file(unsigned char **text, int64_t *length, const char *path);

/* ---- evaluation ---- */

typedef struct {
    double accuracy; /* percent */
    double loss;     /* mean cross-entropy */
} tut_eval;

/* Accuracy and loss of `model` on (x, y), batch by batch, in eval mode and without
 * grad (the model's train/eval mode is restored afterwards). Batches are moved to
 * `device`. */
tut_eval tut_evaluate(tg_module *model, tg_tensor *x, tg_tensor *y, int64_t batch_size, tg_device device);

/* ---- progress bar ---- */

typedef struct {
    int epoch, epochs;
    int64_t total_steps, batch_size;
    int64_t step;
    int64_t first_step; /* a resumed epoch starts at this step (for images/s) */
    double start, last_draw;
    double loss_sum; /* running mean of the epoch's loss */
    int64_t loss_count;
    bool tty;
} tut_progress;

/* One line per epoch: on a terminal it is redrawn in place with \r (steps, images/s,
 * running loss, ETA); otherwise a plain line is printed every ~10% of the epoch. */
void tut_progress_begin(tut_progress *p, int epoch, int epochs, int64_t total_steps, int64_t batch_size);
void tut_progress_update(tut_progress *p, double loss);
/* Finishes the line; returns the epoch's mean training loss. */
double tut_progress_end(tut_progress *p);

/* ---- metrics CSV ---- */

/* Opens path (through tut_output_path) and writes the header line
 * "epoch,step,train_loss,test_loss,test_accuracy,lr,seconds". NULL path: returns
 * NULL and tut_log_row does nothing. */
FILE *tut_log_open(const char *path);
void tut_log_row(FILE *f, int epoch, int64_t step, double train_loss, double test_loss, double test_accuracy, double lr,
                 double seconds);
void tut_log_close(FILE *f);

/* ---- loss curve ---- */

/* A growing list of (step, loss) points. */
typedef struct {
    double *loss;
    int64_t count, capacity;
} tut_curve;

void tut_curve_add(tut_curve *c, double loss);
void tut_curve_free(tut_curve *c);
/* Writes the curve as an SVG line chart (the raw per-step loss in light grey, a
 * moving average over `smooth` steps on top, epoch boundaries every
 * steps_per_epoch steps), with axes and labels, no dependencies. Returns 0 on
 * success, prints why and returns -1 otherwise. */
int tut_plot_svg(const char *path, const char *title, const tut_curve *c, int64_t steps_per_epoch, int smooth);

/* ---- the RESULT line for bench/compare.sh ---- */

/* The activation peak of training steps: the most CPU tensor bytes held during one
 * step beyond those held when it began (the data set, the parameters, the optimizer
 * state), from the allocator's statistics (tg_cpu_memory_stats; the blocks' rounded
 * sizes). So it counts the activations saved for backward, their casts, the
 * temporaries and the gradients (tg_optim_zero_grad drops them between steps). Call
 * begin at the start of a step's body (it resets the allocator's peak) and end after
 * the optimizer step. The first step is not counted (the optimizer makes its state
 * there). CPU tensors only (a CUDA run records nothing). */
void tut_step_memory_begin(void);
void tut_step_memory_end(void);
/* Called after the loss (optional): the forward's own peak, the same way, for the
 * "forward_peak_mib" field: the activations saved for backward and the forward's
 * temporaries, without the parameter gradients that backward adds to the step's peak
 * (float32 for float32 parameters under autocast too, so they hide what bf16 saves). */
void tut_step_memory_forward_end(void);
/* The largest activation peak of the steps measured so far, in MiB; -1 when none was. */
double tut_activation_peak_mib(void);

/* RESULT {"bench": bench, "impl": "tapegrad", "seconds": s, "unit_value": s, "unit": "s",
 *         "check": accuracy, "peak_rss_mib": ...[, "activation_peak_mib": ...]}; the
 * last field when tut_step_memory_end measured a step on the CPU. */
void tut_print_result(const char *bench, double seconds, double accuracy);

#endif
