/* Differential fuzzer of the op API (docs/fuzzing.md, "Differential fuzzing of the ops").
 *
 *   op_diff [--seed N] [--seconds N | --cases N] [--op NAME] [--keep-going]
 *           [--ops-md docs/ops.md] [--repro SEED,NDIM,SIZE,DTYPE]
 *
 * Each case takes the next row of the op tables (op_diff_rows_*.c), draws shapes,
 * layouts, options and values, and checks:
 *   - float32 or bfloat16 against float64 on the same values (rounded to the dtype);
 *   - gradients of float64 inputs by central finite differences (tg_gradcheck), and
 *     now and then second order (tg_gradgradcheck);
 *   - CUDA against the CPU in float32, when a GPU is present;
 *   - no tensor outlives the case.
 * The first failing case is shrunk (drawn again under smaller size budgets until the
 * smallest that still fails) and printed with a line that reproduces it; the exit
 * status is then 1. At the end: cases run and the docs/ops.md rows covered. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "op_diff.h"

#define MAX_ROWS 512

typedef enum { FAIL_NONE = 0, FAIL_INVALID, FAIL_ERROR, FAIL_VALUES, FAIL_GRAD, FAIL_CUDA, FAIL_LEAK } fail_kind;
static const char *const fail_names[] = {"none", "invalid", "error", "values", "gradient", "cuda", "leak"};

typedef struct {
    fail_kind kind;
    double max_err; /* error / tolerance of the worst element (> 1 fails) */
    char what[1024];
} od_result;

static const od_row *rows[MAX_ROWS];
static int num_rows;

static void collect(const od_row *table) {
    for (const od_row *r = table; r->name; r++)
        if (num_rows < MAX_ROWS) rows[num_rows++] = r;
}

/* ---- inputs ---- */

/* Input k of the case as a tensor of `dtype` on `device`, in its layout. `leaf`
 * gets the float64 base that gradcheck perturbs (NULL when not wanted). */
static tg_tensor *make_input(const od_case *c, int k, const double *values, tg_dtype dtype, tg_device device,
                             tg_tensor **leaf) {
    const od_input *in = &c->in[k];
    tg_tensor *base = tg_from_data(values, in->base, (tg_opts){.dtype = TG_FLOAT64});
    if (in->dom == DOM_INDEX) base = tg_cast(base, TG_INT64);
    else if (in->dom == DOM_BOOL) base = tg_cast(base, TG_BOOL);
    else if (leaf) base = *leaf = tg_requires_grad_(base, !in->no_grad);
    else if (dtype != TG_FLOAT64)
        base = tg_cast(base, in->keep_f32 && tg_dtype_is_low_precision(dtype) ? TG_FLOAT32 : dtype);
    base = tg_tensor_to(base, device);
    return leaf ? base : od_apply_layout(in, base);
}

static int run_row(const od_row *row, const od_case *c, double *const *values, tg_dtype dtype, tg_device device,
                   tg_tensor **out) {
    tg_tensor *in[OD_MAX_IN] = {0};
    for (int k = 0; k < c->n_in; k++) {
        in[k] = make_input(c, k, values[k], dtype, device, NULL);
        if (!in[k]) return 0; /* the layout's view was refused (reported by the caller) */
    }
    if (row->flags & OD_SEEDED) tg_manual_seed(c->i[7]);
    return row->run(row, c, in, out);
}

/* ---- comparing ---- */

static double *to_host(tg_tensor *t) {
    int64_t n = tg_numel(t);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (tg_copy_to_host(tg_cast(t, TG_FLOAT64), v, (size_t)n * sizeof *v) != TG_OK) {
        free(v);
        return NULL;
    }
    return v;
}

static void shape_str(tg_shape s, char *buf, size_t n) { tg_shape_str(s, buf, n); }

/* Compares `got` with `want` elementwise; fills r on a mismatch. */
static void compare(tg_tensor *want, tg_tensor *got, double atol, double rtol, bool exact, int output, fail_kind kind,
                    od_result *r) {
    char ws[64], gs[64];
    shape_str(tg_shape_of(want), ws, sizeof ws);
    shape_str(tg_shape_of(got), gs, sizeof gs);
    if (!tg_shape_equal(tg_shape_of(want), tg_shape_of(got))) {
        r->kind = kind;
        snprintf(r->what, sizeof r->what, "output %d: shape %s, reference %s", output, gs, ws);
        return;
    }
    double *a = to_host(want), *b = to_host(got);
    if (!a || !b) {
        r->kind = kind;
        snprintf(r->what, sizeof r->what, "output %d: cannot read: %s", output, tg_last_error());
        free(a), free(b);
        return;
    }
    exact = exact || !tg_dtype_is_floating(tg_dtype_of(want));
    int64_t worst = -1;
    double worst_ratio = 0;
    for (int64_t j = 0; j < tg_numel(want); j++) {
        double ratio;
        if (isnan(a[j]) || isnan(b[j])) ratio = isnan(a[j]) && isnan(b[j]) ? 0 : INFINITY;
        else if (a[j] == b[j]) ratio = 0;
        else if (exact || isinf(a[j]) || isinf(b[j])) ratio = INFINITY;
        else ratio = fabs(a[j] - b[j]) / (atol + rtol * fabs(a[j]));
        if (ratio > worst_ratio) worst_ratio = ratio, worst = j;
    }
    if (worst_ratio > r->max_err) r->max_err = worst_ratio;
    if (worst_ratio > 1) {
        r->kind = kind;
        snprintf(r->what, sizeof r->what,
                 "output %d %s: element %" PRId64
                 " is %.9g, reference %.9g (error %.3g x the tolerance %.2g + %.2g|ref|)",
                 output, ws, worst, b[worst], a[worst], worst_ratio, atol, rtol);
    }
    free(a), free(b);
}

static void tolerance(const od_row *row, tg_dtype dtype, double *atol, double *rtol) {
    double f = row->tol > 0 ? row->tol : 1;
    if (tg_dtype_is_low_precision(dtype)) *atol = 2e-2 * f, *rtol = 1.6e-2 * f;
    else *atol = 1e-4 * f, *rtol = 1e-4 * f;
}

/* ---- gradients ---- */

typedef struct {
    const od_row *row;
    const od_case *c;
} grad_user;

static tg_tensor *grad_fn(tg_tensor *const *leaves, void *user) {
    const grad_user *u = user;
    tg_tensor *in[OD_MAX_IN], *out[OD_MAX_OUT] = {0};
    for (int k = 0; k < u->c->n_in; k++) in[k] = od_apply_layout(&u->c->in[k], leaves[k]);
    if (u->row->flags & OD_SEEDED) tg_manual_seed(u->c->i[7]);
    return u->row->run(u->row, u->c, in, out) ? out[0] : NULL;
}

static void check_gradients(const od_row *row, od_case *c, tg_tensor *ref, od_result *r) {
    if ((row->flags & OD_NO_GRAD) || c->no_grad || !tg_dtype_is_floating(tg_dtype_of(ref))) return;
    int64_t numel = 0;
    bool any = false;
    for (int k = 0; k < c->n_in; k++) {
        od_input *in = &c->in[k];
        if (in->dom == DOM_INDEX || in->dom == DOM_BOOL || in->dom == DOM_SMALLINT || in->dom == DOM_SPECIAL)
            in->no_grad = true;
        if (!in->no_grad) numel += tg_shape_numel(in->base), any = true;
    }
    /* Finite differences cost two runs per input element and a backward per output element. */
    if (!any || numel > 48 || tg_numel(ref) > 48) return;
    double *tmp = to_host(ref);
    bool finite = tmp != NULL;
    for (int64_t j = 0; finite && j < tg_numel(ref); j++) finite = isfinite(tmp[j]);
    free(tmp);
    if (!finite) return; /* NaN where the op is undefined: nothing to differentiate */

    tg_tensor *leaves[OD_MAX_IN];
    for (int k = 0; k < c->n_in; k++) {
        /* Fresh float64 values: rounded ones meet ties (max, sort) where the gradient jumps. */
        int64_t n = tg_shape_numel(c->in[k].base);
        double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
        od_draw_values(c, k, v, n, TG_FLOAT64);
        leaves[k] = NULL;
        tg_tensor *base = make_input(c, k, v, TG_FLOAT64, TG_CPU, &leaves[k]);
        leaves[k] = base;
        free(v);
    }
    grad_user u = {row, c};
    tg_gradcheck_opts opts = {.user = &u};
    if (tg_gradcheck(grad_fn, c->n_in, leaves, &opts) != TG_OK) {
        r->kind = FAIL_GRAD;
        snprintf(r->what, sizeof r->what, "gradcheck: %s", tg_last_error());
        return;
    }
    if (!(row->flags & OD_NO_GRADGRAD) && numel <= 16 && od_coin(c, 0.3) &&
        tg_gradgradcheck(grad_fn, c->n_in, leaves, &opts) != TG_OK) {
        r->kind = FAIL_GRAD;
        snprintf(r->what, sizeof r->what, "gradgradcheck: %s", tg_last_error());
    }
}

/* ---- one case ---- */

static uint64_t mix(uint64_t a, uint64_t b) {
    od_case t = {.rng = a * 0x9e3779b97f4a7c15ull ^ b};
    return od_next(&t);
}

static void draw_case(const od_row *row, uint64_t case_seed, int max_ndim, int64_t max_size, od_case *c) {
    memset(c, 0, sizeof *c);
    c->rng = case_seed;
    c->max_ndim = max_ndim;
    c->max_size = max_size;
    c->i[7] = (int64_t)(case_seed & 0xffff); /* the seed of OD_SEEDED rows */
    row->draw(row, c);
    od_draw_layouts(c);
}

static void run_case(const od_row *row, uint64_t case_seed, tg_dtype dtype, int max_ndim, int64_t max_size, od_case *c,
                     od_result *r) {
    memset(r, 0, sizeof *r);
    draw_case(row, case_seed, max_ndim, max_size, c);
    double *values[OD_MAX_IN] = {0};
    for (int k = 0; k < c->n_in; k++) {
        int64_t n = tg_shape_numel(c->in[k].base);
        values[k] = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
        od_draw_values(c, k, values[k], n, dtype);
    }
    long live = tg_live_tensors();
    tg_clear_error();
    TG_SCOPE {
        tg_tensor *ref[OD_MAX_OUT] = {0}, *got[OD_MAX_OUT] = {0};
        int n_ref = run_row(row, c, values, TG_FLOAT64, TG_CPU, ref);
        if (n_ref == 0) {
            r->kind = FAIL_INVALID; /* the draw made arguments the op refuses: not a finding */
            snprintf(r->what, sizeof r->what, "%s", tg_last_error());
            break;
        }
        double atol, rtol;
        tolerance(row, dtype, &atol, &rtol);
        bool exact = row->flags & OD_EXACT;
        tg_dtype run_dtype = (row->flags & OD_NO_LOWP) && tg_dtype_is_low_precision(dtype) ? TG_FLOAT32 : dtype;
        int n_got = run_row(row, c, values, run_dtype, TG_CPU, got);
        if (n_got != n_ref) {
            r->kind = FAIL_ERROR;
            snprintf(r->what, sizeof r->what, "%s fails where float64 runs: %s", tg_dtype_name(run_dtype),
                     tg_last_error());
            break;
        }
        if (row->flags & OD_SEEDED) {
            /* Random draws differ between dtypes; the same seed must give the same bits. */
            tg_tensor *again[OD_MAX_OUT] = {0};
            run_row(row, c, values, run_dtype, TG_CPU, again);
            for (int o = 0; o < n_got && !r->kind; o++) {
                compare(got[o], again[o], 0, 0, true, o, FAIL_VALUES, r);
                if (!r->kind && !tg_shape_equal(tg_shape_of(got[o]), tg_shape_of(ref[o]))) {
                    r->kind = FAIL_VALUES;
                    snprintf(r->what, sizeof r->what, "output %d: shape differs from float64's", o);
                }
            }
        } else {
            for (int o = 0; o < n_got && !r->kind; o++) compare(ref[o], got[o], atol, rtol, exact, o, FAIL_VALUES, r);
        }
        if ((row->flags & OD_SAME_OUTS) && !r->kind) compare(ref[0], ref[1], 0, 0, true, 1, FAIL_VALUES, r);
        if (r->kind) break;

        if (tg_cuda_available() && !(row->flags & OD_SEEDED)) {
            /* The GPU against the CPU, both float32: the kernels, not the rounding. */
            tg_tensor *cpu[OD_MAX_OUT] = {0}, *gpu[OD_MAX_OUT] = {0};
            double fa, fr;
            tolerance(row, TG_FLOAT32, &fa, &fr);
            int n_cpu = run_row(row, c, values, TG_FLOAT32, TG_CPU, cpu);
            int n_gpu = run_row(row, c, values, TG_FLOAT32, tg_cuda(0), gpu);
            if (n_gpu != n_cpu) {
                r->kind = FAIL_CUDA;
                snprintf(r->what, sizeof r->what, "CUDA fails where the CPU runs: %s", tg_last_error());
                break;
            }
            for (int o = 0; o < n_cpu && !r->kind; o++) compare(cpu[o], gpu[o], fa, fr, exact, o, FAIL_CUDA, r);
            if (r->kind) break;
        }
        check_gradients(row, c, ref[0], r);
    }
    for (int k = 0; k < c->n_in; k++) free(values[k]);
    if (!r->kind && tg_live_tensors() != live) {
        r->kind = FAIL_LEAK;
        snprintf(r->what, sizeof r->what, "%ld tensors outlive the case", tg_live_tensors() - live);
    }
    tg_clear_error();
}

/* ---- reporting ---- */

static const char *const layout_names[] = {"contiguous", "transposed", "stepped", "narrowed", "expanded"};

static void print_case(const od_row *row, const od_case *c, uint64_t case_seed, tg_dtype dtype, const od_result *r) {
    printf("FAIL %s (%s) in %s: %s\n", row->name, fail_names[r->kind], tg_dtype_name(dtype), r->what);
    for (int k = 0; k < c->n_in; k++) {
        const od_input *in = &c->in[k];
        char s[64], b[64];
        shape_str(in->shape, s, sizeof s);
        shape_str(in->base, b, sizeof b);
        int64_t strides[TG_MAX_DIMS];
        tg_contiguous_strides(in->base, strides);
        printf("  input %d: shape %s, %s", k, s, layout_names[in->layout]);
        if (in->layout != LAYOUT_CONTIGUOUS) printf(" (dims %d, %d) of base %s", in->d0, in->d1, b);
        printf(", base strides [");
        for (int d = 0; d < in->base.ndim; d++) printf("%s%" PRId64, d ? ", " : "", strides[d]);
        printf("]%s\n", in->dom == DOM_INDEX ? ", int64 indices" : in->dom == DOM_BOOL ? ", bool" : "");
    }
    printf("  options: i = [");
    for (int j = 0; j < 7; j++) printf("%s%" PRId64, j ? ", " : "", c->i[j]);
    printf("], d = [%.9g, %.9g, %.9g, %.9g]\n", c->d[0], c->d[1], c->d[2], c->d[3]);
    printf("  reproduce: op_diff --op %s --repro 0x%" PRIx64 ",%d,%" PRId64 ",%s\n", row->name, case_seed, c->max_ndim,
           c->max_size, tg_dtype_name(dtype));
}

/* Draws the row again under ever larger budgets (a few seeds each) and returns the
 * first, so the smallest, case that fails the same way. */
static void shrink(const od_row *row, uint64_t *case_seed, tg_dtype dtype, od_case *c, od_result *r) {
    fail_kind kind = r->kind;
    int max_ndim = c->max_ndim;
    int64_t max_size = c->max_size;
    for (int64_t size = 0; size <= max_size; size++) {
        for (int nd = 0; nd <= max_ndim; nd++) {
            for (int t = 0; t < 24; t++) {
                if (size == max_size && nd == max_ndim) return;
                uint64_t s = mix(*case_seed, (uint64_t)(size * 1000 + nd * 50 + t));
                od_case c2;
                od_result r2;
                run_case(row, s, dtype, nd, size, &c2, &r2);
                if (r2.kind == kind) {
                    *case_seed = s, *c = c2, *r = r2;
                    return;
                }
            }
        }
    }
}

/* ---- coverage of docs/ops.md ---- */

/* Rows of docs/ops.md the fuzzer does not run, and why. */
static const struct {
    const char *doc_row, *reason;
} not_covered[] = {
    {"tg_calculate_fans", "no tensor in or out: a shape's fan-in and fan-out (tests/ops/random_test.cc)"},
};

static int coverage(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("coverage: %s not found (pass --ops-md)\n", path);
        return 0;
    }
    char line[4096];
    int total = 0, covered = 0, missing = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "| `tg_", 6) != 0) continue;
        char name[128];
        const char *start = line + 3, *end = strchr(start, '`');
        if (!end || end - start >= (long)sizeof name) continue;
        memcpy(name, start, (size_t)(end - start));
        name[end - start] = 0;
        total++;
        bool found = false;
        for (int j = 0; j < num_rows && !found; j++) found = strcmp(rows[j]->doc_row, name) == 0;
        if (found) {
            covered++;
            continue;
        }
        const char *why = "no row yet";
        for (size_t j = 0; j < sizeof not_covered / sizeof *not_covered; j++)
            if (strcmp(not_covered[j].doc_row, name) == 0) why = not_covered[j].reason;
        printf("  not covered: %s: %s\n", name, why);
        missing++;
    }
    fclose(f);
    printf("ops covered: %d of %d rows of %s\n", covered, total, path);
    return missing;
}

/* ---- main ---- */

/* Known findings (--known FILE; tests/fuzz/op_diff_known.txt): "op kind dtype" lines,
 * kind values/gradient/error/leak, or skip (the row is not run: its failure also leaks,
 * which AddressSanitizer's leak check would report), dtype float32/bfloat16 or "any",
 * "#" comments. A
 * failure that matches is reported and its row skipped, without failing the run: the
 * CI run then fails only on new findings, while docs/fuzzing.md tracks the known. */
#define MAX_KNOWN 64
static struct { char op[48], kind[16], dtype[16]; } known[MAX_KNOWN];
static int num_known, known_hits;

static bool read_known(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "op_diff: cannot read %s\n", path);
        return false;
    }
    char line[256];
    while (fgets(line, sizeof line, f) && num_known < MAX_KNOWN) {
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        if (sscanf(line, "%47s %15s %15s", known[num_known].op, known[num_known].kind, known[num_known].dtype) == 3)
            num_known++;
    }
    fclose(f);
    return true;
}

static bool is_known(const char *op, const char *kind, tg_dtype dtype) {
    for (int k = 0; k < num_known; k++)
        if (strcmp(known[k].op, op) == 0 && strcmp(known[k].kind, kind) == 0 &&
            (strcmp(known[k].dtype, "any") == 0 || strcmp(known[k].dtype, tg_dtype_name(dtype)) == 0))
            return true;
    return false;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static tg_dtype dtype_named(const char *s) { return strcmp(s, "bfloat16") == 0 ? TG_BFLOAT16 : TG_FLOAT32; }

int main(int argc, char **argv) {
    uint64_t seed = 1;
    double seconds = 0;
    long max_cases = 0;
    const char *only = NULL, *ops_md = "docs/ops.md", *repro = NULL, *known_path = NULL;
    bool keep_going = false;
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a], *val = a + 1 < argc ? argv[a + 1] : NULL;
        if (strcmp(arg, "--keep-going") == 0) {
            keep_going = true;
            continue;
        }
        if (!val) {
            fprintf(stderr, "usage: op_diff [--seed N] [--seconds N | --cases N] [--op NAME] [--keep-going] "
                            "[--ops-md PATH] [--repro SEED,NDIM,SIZE,DTYPE] [--known PATH]\n");
            return 2;
        }
        a++;
        if (strcmp(arg, "--seed") == 0) seed = strtoull(val, NULL, 0);
        else if (strcmp(arg, "--seconds") == 0) seconds = atof(val);
        else if (strcmp(arg, "--cases") == 0) max_cases = atol(val);
        else if (strcmp(arg, "--op") == 0) only = val;
        else if (strcmp(arg, "--ops-md") == 0) ops_md = val;
        else if (strcmp(arg, "--repro") == 0) repro = val;
        else if (strcmp(arg, "--known") == 0) known_path = val;
        else {
            fprintf(stderr, "op_diff: unknown option %s\n", arg);
            return 2;
        }
    }
    if (seconds <= 0 && max_cases <= 0) max_cases = 2000;
    if (known_path && !read_known(known_path)) return 2;
    tg_set_error_mode(TG_ERRORS_SILENT); /* refused arguments are expected: record, do not print */

    const od_row *all[] = {od_rows_elementwise, od_rows_reduce, od_rows_shape, od_rows_nn, od_rows_random};
    for (size_t t = 0; t < sizeof all / sizeof *all; t++) collect(all[t]);
    const od_row *selected[MAX_ROWS];
    int n_sel = 0;
    int skipped_rows = 0;
    for (int j = 0; j < num_rows; j++) {
        if (!only && is_known(rows[j]->name, "skip", TG_FLOAT32)) { /* a known finding that also leaks */
            skipped_rows++;
            continue;
        }
        if (!only || strcmp(rows[j]->name, only) == 0 || strcmp(rows[j]->doc_row, only) == 0)
            selected[n_sel++] = rows[j];
    }
    if (skipped_rows) printf("op_diff: %d rows skipped (listed as skip in --known)\n", skipped_rows);
    if (n_sel == 0) {
        fprintf(stderr, "op_diff: no row named %s\n", only);
        return 2;
    }

    if (repro) {
        uint64_t cs;
        int nd;
        int64_t size;
        char dt[16];
        if (sscanf(repro, "%" SCNx64 ",%d,%" SCNd64 ",%15s", &cs, &nd, &size, dt) != 4) return 2;
        od_case c;
        od_result r;
        run_case(selected[0], cs, dtype_named(dt), nd, size, &c, &r);
        if (r.kind == FAIL_NONE || r.kind == FAIL_INVALID) {
            printf("passes (%s)\n", r.kind == FAIL_INVALID ? r.what : "no difference");
            return 0;
        }
        print_case(selected[0], &c, cs, dtype_named(dt), &r);
        return 1;
    }

    printf("op_diff: seed %" PRIu64 ", %d rows, %s%s\n", seed, n_sel,
           tg_cuda_available() ? "CUDA against the CPU too" : "no GPU: CPU only", "");
    static const int64_t sizes[] = {2, 3, 5, 8, 13};
    long cases = 0, invalid = 0, failures = 0;
    static bool failed_row[MAX_ROWS];
    double start = now();
    for (long idx = 0;; idx++) {
        if (max_cases > 0 && idx >= max_cases) break;
        if (seconds > 0 && now() - start >= seconds) break;
        int j = (int)(idx % n_sel);
        if (failed_row[j]) continue;
        const od_row *row = selected[j];
        uint64_t case_seed = mix(seed, (uint64_t)idx);
        tg_dtype dtype = (idx / n_sel) % 3 == 2 ? TG_BFLOAT16 : TG_FLOAT32;
        int64_t max_size = sizes[case_seed % 5];
        od_case c;
        od_result r;
        run_case(row, case_seed, dtype, 4, max_size, &c, &r);
        cases++;
        if (r.kind == FAIL_INVALID) invalid++;
        if (r.kind == FAIL_NONE || r.kind == FAIL_INVALID) continue;
        failed_row[j] = true;
        if (is_known(row->name, fail_names[r.kind], dtype)) { /* listed in --known: reported, not counted */
            printf("known: %s (%s) in %s, case %ld: %s\n", row->name, fail_names[r.kind], tg_dtype_name(dtype), idx,
                   r.what);
            known_hits++;
            continue;
        }
        printf("case %ld (seed %" PRIu64 ") fails; shrinking\n", idx, seed);
        shrink(row, &case_seed, dtype, &c, &r);
        print_case(row, &c, case_seed, dtype, &r);
        fflush(stdout);
        failures++;
        if (!keep_going) break;
    }
    double took = now() - start;
    printf("%ld cases in %.1f s (%.0f per hour), %ld with arguments the op refused, %ld failing, %d known findings "
           "met (of %d listed)\n",
           cases, took, took > 0 ? cases / took * 3600 : 0, invalid, failures, known_hits, num_known);
    coverage(ops_md);
    return failures ? 1 : 0;
}
