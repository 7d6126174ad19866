/* Progress bar, metrics CSV and loss-curve SVG (see common.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tutorials/common/common.h"

/* ---- progress bar ---- */

/* On a terminal the bar is redrawn in place (\r, no newline), so an error printed
 * meanwhile would land on the bar's line: the library calls this first. */
static bool bar_line_open;

static void end_bar_line(void *user) {
    (void)user;
    if (!bar_line_open) return;
    printf("\n");
    fflush(stdout);
    bar_line_open = false;
}

static void format_eta(double seconds, char *buf, size_t size) {
    if (!(seconds >= 0) || seconds > 1e6) {
        snprintf(buf, size, "--:--");
        return;
    }
    int s = (int)(seconds + 0.5);
    snprintf(buf, size, "%d:%02d", s / 60, s % 60);
}

/* Redraw in place only on a terminal that a person watches: not when stdout is a file
 * or pipe, nor under mpirun (Open MPI gives each rank's stdout a pseudo-terminal and
 * copies it into the launcher's output, often a log), nor with TERM=dumb. */
static bool interactive_stdout(void) {
    if (!isatty(fileno(stdout))) return false;
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK")) return false;
    const char *term = getenv("TERM");
    return !(term && strcmp(term, "dumb") == 0);
}

void tut_progress_begin(tut_progress *p, int epoch, int epochs, int64_t total_steps, int64_t batch_size) {
    *p = (tut_progress){.epoch = epoch,
                        .epochs = epochs,
                        .total_steps = total_steps,
                        .batch_size = batch_size,
                        .start = tut_now(),
                        .tty = interactive_stdout()};
    p->last_draw = p->start;
    if (p->tty) tg_set_error_prelude(end_bar_line, NULL);
}

static void draw(tut_progress *p, bool final) {
    double now = tut_now(), elapsed = now - p->start;
    double rate = elapsed > 0 ? (double)((p->step - p->first_step) * p->batch_size) / elapsed : 0;
    double eta =
        p->step > p->first_step ? elapsed / (double)(p->step - p->first_step) * (double)(p->total_steps - p->step) : -1;
    double loss = p->loss_count ? p->loss_sum / (double)p->loss_count : NAN;
    char eta_text[16];
    format_eta(final ? elapsed : eta, eta_text, sizeof eta_text);
    int width = 24, filled = p->total_steps ? (int)(width * p->step / p->total_steps) : width;
    char bar[32];
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
    bar[width] = 0;
    if (p->tty) {
        printf("\repoch %d/%d [%s] %lld/%lld  %6.0f img/s  loss %.4f  %s %s\033[K", p->epoch + 1, p->epochs, bar,
               (long long)p->step, (long long)p->total_steps, rate, loss, final ? "took" : "ETA", eta_text);
        if (final) printf("\n");
        bar_line_open = !final;
    } else {
        printf("epoch %d/%d step %lld/%lld  %.0f img/s  loss %.4f  %s %s\n", p->epoch + 1, p->epochs,
               (long long)p->step, (long long)p->total_steps, rate, loss, final ? "took" : "ETA", eta_text);
    }
    fflush(stdout);
    p->last_draw = now;
}

void tut_progress_update(tut_progress *p, double loss) {
    p->step++;
    p->loss_sum += loss;
    p->loss_count++;
    if (p->tty) {
        if (tut_now() - p->last_draw >= 0.1) draw(p, false);
    } else {
        int64_t every = p->total_steps >= 10 ? p->total_steps / 10 : 1;
        if (p->step % every == 0 && p->step < p->total_steps) draw(p, false);
    }
}

double tut_progress_end(tut_progress *p) {
    draw(p, true);
    return p->loss_count ? p->loss_sum / (double)p->loss_count : NAN;
}

/* ---- metrics CSV ---- */

FILE *tut_log_open(const char *path) {
    if (!path) return NULL;
    const char *full = tut_output_path(path);
    FILE *f = fopen(full, "w");
    if (!f) {
        perror(full);
        exit(1);
    }
    fprintf(f, "epoch,step,train_loss,test_loss,test_accuracy,lr,seconds\n");
    fflush(f); /* a run stopped (Ctrl-C) before its first row still leaves a CSV with its header */
    return f;
}

void tut_log_row(FILE *f, int epoch, int64_t step, double train_loss, double test_loss, double test_accuracy, double lr,
                 double seconds) {
    if (!f) return;
    fprintf(f, "%d,%lld,%.6f,%.6f,%.4f,%g,%.3f\n", epoch, (long long)step, train_loss, test_loss, test_accuracy, lr,
            seconds);
    fflush(f);
}

void tut_log_close(FILE *f) {
    if (f) fclose(f);
}

/* ---- loss curve ---- */

void tut_curve_add(tut_curve *c, double loss) {
    if (c->count == c->capacity) {
        c->capacity = c->capacity ? 2 * c->capacity : 1024;
        c->loss = realloc(c->loss, (size_t)c->capacity * sizeof *c->loss);
        if (!c->loss) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
    }
    c->loss[c->count++] = loss;
}

void tut_curve_free(tut_curve *c) {
    free(c->loss);
    *c = (tut_curve){0};
}

/* A "nice" tick step (1, 2 or 5 times a power of ten) giving about `n` ticks. */
static double nice_step(double range, int n) {
    double raw = range / n, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

int tut_plot_svg(const char *path, const char *title, const tut_curve *c, int64_t steps_per_epoch, int smooth) {
    if (!path || c->count == 0) return 0;
    const char *full = tut_output_path(path);
    FILE *f = fopen(full, "w");
    if (!f) {
        perror(full);
        return -1;
    }
    const double W = 720, H = 420, L = 70, R = 20, T = 40, B = 50; /* size and margins */
    double ymax = 0;
    for (int64_t i = 0; i < c->count; i++)
        if (isfinite(c->loss[i]) && c->loss[i] > ymax) ymax = c->loss[i];
    if (ymax <= 0) ymax = 1;
    double ystep = nice_step(ymax, 5);
    ymax = ceil(ymax / ystep) * ystep;
    double xmax = c->count > 1 ? (double)(c->count - 1) : 1;
#define X(i) (L + (W - L - R) * (double)(i) / xmax)
#define Y(v) (T + (H - T - B) * (1 - (v) / ymax))
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H, W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">%s</text>\n", W / 2, title);
    /* grid and y labels */
    for (double v = 0; v <= ymax + 1e-9; v += ystep) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", L, Y(v), W - R,
                Y(v));
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", L - 6, Y(v) + 4, v);
    }
    /* x ticks */
    double xstep = nice_step(xmax, 6);
    for (double s = 0; s <= xmax + 1e-9; s += xstep)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", X(s), H - B + 18, s);
    /* epoch boundaries */
    if (steps_per_epoch > 0)
        for (int64_t s = steps_per_epoch; s < c->count; s += steps_per_epoch)
            fprintf(f,
                    "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#9ab\" "
                    "stroke-dasharray=\"4 4\"/>\n",
                    X(s), T, X(s), H - B);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L, H - B, W - R, H - B);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L, T, L, H - B);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">training step</text>\n", (L + W - R) / 2, H - 10);
    fprintf(f,
            "<text x=\"16\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 16 %.0f)\">"
            "cross-entropy loss</text>\n",
            (T + H - B) / 2, (T + H - B) / 2);
    /* raw loss, then its moving average; at most ~2000 points each */
    int64_t stride = c->count > 2000 ? c->count / 2000 : 1;
    fprintf(f, "<polyline fill=\"none\" stroke=\"#c8c8c8\" stroke-width=\"1\" points=\"");
    for (int64_t i = 0; i < c->count; i += stride)
        if (isfinite(c->loss[i])) fprintf(f, "%.1f,%.1f ", X(i), Y(fmin(c->loss[i], ymax)));
    fprintf(f, "\"/>\n");
    if (smooth < 1) smooth = 1;
    fprintf(f, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"");
    double sum = 0;
    for (int64_t i = 0; i < c->count; i++) {
        sum += c->loss[i];
        if (i >= smooth) sum -= c->loss[i - smooth];
        int64_t n = i + 1 < smooth ? i + 1 : smooth;
        if (i % stride == 0 || i == c->count - 1) fprintf(f, "%.1f,%.1f ", X(i), Y(fmin(sum / (double)n, ymax)));
    }
    fprintf(f, "\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\" fill=\"#1f77b4\">moving average of %d steps</text>\n",
            W - R - 4, T + 14, smooth);
    fprintf(f, "</svg>\n");
#undef X
#undef Y
    if (fclose(f)) {
        perror(full);
        return -1;
    }
    return 0;
}
