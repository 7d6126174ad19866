/* LR schedules: the chainable get_lr() of torch/optim/lr_scheduler.py (PyTorch 1.13),
 * which scheduler.step() uses; each step reads the optimizer's current lr, so a
 * schedule composes with manual tg_optim_set_lr as PyTorch's does. */
#include "optim/schedule.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "optim/optim.h"

typedef enum { SCHED_STEP, SCHED_MULTI_STEP, SCHED_EXPONENTIAL, SCHED_COSINE, SCHED_LINEAR } sched_kind;

struct tg_lr_scheduler {
    sched_kind kind;
    tg_optim *opt; /* borrowed */
    double base_lr, last_lr;
    int last_epoch, step_count;
    int step_size, t_max, total_iters;
    double gamma, eta_min, start_factor, end_factor;
    int *milestones; /* sorted, with repeats */
    int num_milestones;
};

static double get_lr(tg_lr_scheduler *s) {
    double lr = tg_optim_get_lr(s->opt);
    int e = s->last_epoch;
    switch (s->kind) {
    case SCHED_STEP: /* StepLR.get_lr */
        if (e == 0 || e % s->step_size != 0) return lr;
        return lr * s->gamma;
    case SCHED_MULTI_STEP: { /* MultiStepLR.get_lr: gamma ** milestones[last_epoch] (a Counter) */
        int times = 0;
        for (int i = 0; i < s->num_milestones; i++) times += s->milestones[i] == e;
        if (!times) return lr;
        return lr * pow(s->gamma, times);
    }
    case SCHED_EXPONENTIAL: /* ExponentialLR.get_lr */
        if (e == 0) return lr;
        return lr * s->gamma;
    case SCHED_COSINE: { /* CosineAnnealingLR.get_lr */
        double t = s->t_max;
        if (e == 0) return lr;
        if (s->step_count == 1 && e > 0)
            return s->eta_min + (s->base_lr - s->eta_min) * (1 + cos(e * M_PI / t)) / 2;
        if ((e - 1 - s->t_max) % (2 * s->t_max) == 0)
            return lr + (s->base_lr - s->eta_min) * (1 - cos(M_PI / t)) / 2;
        return (1 + cos(M_PI * e / t)) / (1 + cos(M_PI * (e - 1) / t)) * (lr - s->eta_min) + s->eta_min;
    }
    case SCHED_LINEAR: /* LinearLR.get_lr */
        if (e == 0) return lr * s->start_factor;
        if (e > s->total_iters) return lr;
        return lr * (1. + (s->end_factor - s->start_factor) /
                              (s->total_iters * s->start_factor + (e - 1) * (s->end_factor - s->start_factor)));
    }
    return lr;
}

void tg_scheduler_step(tg_lr_scheduler *s) {
    if (!s) return;
    s->step_count++;
    s->last_epoch++;
    s->last_lr = get_lr(s);
    tg_optim_set_lr(s->opt, s->last_lr);
}

static tg_lr_scheduler *make(sched_kind kind, tg_optim *opt, const char *name) {
    if (!opt) {
        tg_error("%s: optimizer is NULL", name);
        return NULL;
    }
    tg_lr_scheduler *s = calloc(1, sizeof *s);
    TG_ASSERT(s != NULL);
    s->kind = kind;
    s->opt = opt;
    s->base_lr = tg_optim_get_lr(opt); /* group['initial_lr'] */
    s->last_epoch = -1;
    return s;
}

/* _LRScheduler.__init__ ends with one step: last_epoch -1 -> 0. */
static tg_lr_scheduler *start(tg_lr_scheduler *s) {
    if (s) tg_scheduler_step(s);
    return s;
}

static double or_default(double v, double dflt) {
    if (v == 0) return signbit(v) ? 0.0 : dflt;
    return v;
}

tg_lr_scheduler *tg_step_lr(tg_optim *opt, int step_size, double gamma) {
    if (step_size <= 0) {
        tg_error("tg_step_lr: step_size must be positive, got %d", step_size);
        return NULL;
    }
    tg_lr_scheduler *s = make(SCHED_STEP, opt, "tg_step_lr");
    if (s) {
        s->step_size = step_size;
        s->gamma = or_default(gamma, 0.1);
    }
    return start(s);
}

static int compare_int(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }

tg_lr_scheduler *tg_multi_step_lr(tg_optim *opt, const int *milestones, int count, double gamma) {
    if (count < 0 || (count > 0 && !milestones)) {
        tg_error("tg_multi_step_lr: invalid milestones (count %d)", count);
        return NULL;
    }
    tg_lr_scheduler *s = make(SCHED_MULTI_STEP, opt, "tg_multi_step_lr");
    if (!s) return NULL;
    s->gamma = or_default(gamma, 0.1);
    s->milestones = malloc((size_t)(count ? count : 1) * sizeof(int));
    TG_ASSERT(s->milestones != NULL);
    if (count) memcpy(s->milestones, milestones, (size_t)count * sizeof(int));
    qsort(s->milestones, (size_t)count, sizeof(int), compare_int);
    s->num_milestones = count;
    return start(s);
}

tg_lr_scheduler *tg_exponential_lr(tg_optim *opt, double gamma) {
    tg_lr_scheduler *s = make(SCHED_EXPONENTIAL, opt, "tg_exponential_lr");
    if (s) s->gamma = gamma;
    return start(s);
}

tg_lr_scheduler *tg_cosine_annealing_lr(tg_optim *opt, int t_max, double eta_min) {
    if (t_max <= 0) {
        tg_error("tg_cosine_annealing_lr: T_max must be positive, got %d", t_max);
        return NULL;
    }
    tg_lr_scheduler *s = make(SCHED_COSINE, opt, "tg_cosine_annealing_lr");
    if (s) {
        s->t_max = t_max;
        s->eta_min = eta_min;
    }
    return start(s);
}

tg_lr_scheduler *tg_linear_lr(tg_optim *opt, double start_factor, double end_factor, int total_iters) {
    double sf = or_default(start_factor, 1.0 / 3), ef = or_default(end_factor, 1.0);
    int ti = total_iters ? total_iters : 5;
    if (!(sf > 0 && sf <= 1) || !(ef >= 0 && ef <= 1) || ti < 0) {
        tg_error("tg_linear_lr: start_factor=%g must be in (0, 1], end_factor=%g in [0, 1], total_iters=%d >= 0", sf,
                 ef, ti);
        return NULL;
    }
    tg_lr_scheduler *s = make(SCHED_LINEAR, opt, "tg_linear_lr");
    if (s) {
        s->start_factor = sf;
        s->end_factor = ef;
        s->total_iters = ti;
    }
    return start(s);
}

double tg_scheduler_get_last_lr(const tg_lr_scheduler *s) { return s ? s->last_lr : NAN; }
int tg_scheduler_last_epoch(const tg_lr_scheduler *s) { return s ? s->last_epoch : -1; }

void tg_scheduler_free(tg_lr_scheduler *s) {
    if (!s) return;
    free(s->milestones);
    free(s);
}
