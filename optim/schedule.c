/* LR schedules: the chainable get_lr() of torch/optim/lr_scheduler.py (PyTorch 1.13),
 * which scheduler.step() uses; each step reads every group's current lr, so a
 * schedule composes with manual tg_optim_set_lr as PyTorch's does. OneCycleLR is
 * not chainable in PyTorch either: it computes each group's lr from the step number. */
#include "optim/schedule.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/option_defaults.h"
#include "optim/optim.h"
#include "optim/schedule_state.h"

typedef enum {
    SCHED_STEP,
    SCHED_MULTI_STEP,
    SCHED_EXPONENTIAL,
    SCHED_COSINE,
    SCHED_LINEAR,
    SCHED_ONE_CYCLE,
    SCHED_LAMBDA,
    SCHED_SEQUENTIAL
} sched_kind;

/* A OneCycleLR phase: lr and momentum go from start to end as the step goes from the
 * previous phase's end_step to this one's. Values pick a per-group array below. */
typedef enum { AT_INITIAL, AT_MAX, AT_MIN } lr_point;
typedef enum { MOM_MAX, MOM_BASE } momentum_point;
typedef struct {
    double end_step;
    lr_point start_lr, end_lr;
    momentum_point start_momentum, end_momentum;
} phase;

struct tg_lr_scheduler {
    sched_kind kind;
    tg_optim *opt;               /* borrowed */
    int num_groups;              /* the optimizer's groups when the scheduler was made */
    double *base_lrs, *last_lrs; /* [num_groups] */
    int last_epoch, step_count;
    int step_size, t_max, total_iters;
    double gamma, eta_min, start_factor, end_factor;
    int *milestones; /* sorted, with repeats */
    int num_milestones;
    /* OneCycleLR */
    double *lr_points; /* [num_groups][3]: initial_lr, max_lr, min_lr (indexed by lr_point) */
    int total_steps, num_phases;
    phase phases[3];
    bool linear, cycle_momentum, use_beta1;
    double momentum_points[2]; /* max_momentum, base_momentum (indexed by momentum_point) */
    /* LambdaLR */
    tg_lr_lambda lr_lambda;
    void *lambda_user;
    /* SequentialLR: the schedulers it runs (owned), switching at milestones */
    tg_lr_scheduler **children;
    int num_children;
};

static const char *kind_name(sched_kind k);

/* The chainable get_lr() for group g. */
static double get_lr(tg_lr_scheduler *s, int g) {
    double lr = tg_optim_get_group_lr(s->opt, g), base_lr = s->base_lrs[g];
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
        if (s->step_count == 1 && e > 0) return s->eta_min + (base_lr - s->eta_min) * (1 + cos(e * M_PI / t)) / 2;
        if ((e - 1 - s->t_max) % (2 * s->t_max) == 0) return lr + (base_lr - s->eta_min) * (1 - cos(M_PI / t)) / 2;
        return (1 + cos(M_PI * e / t)) / (1 + cos(M_PI * (e - 1) / t)) * (lr - s->eta_min) + s->eta_min;
    }
    case SCHED_LINEAR: /* LinearLR.get_lr */
        if (e == 0) return lr * s->start_factor;
        if (e > s->total_iters) return lr;
        return lr * (1. + (s->end_factor - s->start_factor) /
                              (s->total_iters * s->start_factor + (e - 1) * (s->end_factor - s->start_factor)));
    case SCHED_LAMBDA: /* LambdaLR.get_lr: not chainable */ return base_lr * s->lr_lambda(e, g, s->lambda_user);
    case SCHED_ONE_CYCLE:
    case SCHED_SEQUENTIAL: break; /* one_cycle_values; the children's */
    }
    return lr;
}

static int count_at_most(const int *sorted, int n, int value) { /* Python's bisect_right */
    int i = 0;
    while (i < n && sorted[i] <= value) i++;
    return i;
}

/* _get_closed_form_lr for group g at last_epoch (what step(epoch) uses; LambdaLR has
 * none and uses get_lr). */
static double closed_form_lr(tg_lr_scheduler *s, int g) {
    double base_lr = s->base_lrs[g];
    int e = s->last_epoch;
    switch (s->kind) {
    case SCHED_STEP: return base_lr * pow(s->gamma, e / s->step_size);
    case SCHED_MULTI_STEP: return base_lr * pow(s->gamma, count_at_most(s->milestones, s->num_milestones, e));
    case SCHED_EXPONENTIAL: return base_lr * pow(s->gamma, e);
    case SCHED_COSINE: return s->eta_min + (base_lr - s->eta_min) * (1 + cos(M_PI * e / s->t_max)) / 2;
    case SCHED_LINEAR:
        return base_lr * (s->start_factor + (s->end_factor - s->start_factor) *
                                                (s->total_iters < e ? s->total_iters : e) / s->total_iters);
    default: return get_lr(s, g);
    }
}

/* OneCycleLR._annealing_cos / _annealing_linear. */
static double anneal(bool linear, double start, double end, double pct) {
    if (linear) return (end - start) * pct + start;
    double cos_out = cos(M_PI * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
}

/* OneCycleLR.get_lr for group g at step_num: the lr and the momentum. Fails on a
 * phase of zero length (PyTorch's ZeroDivisionError). */
static tg_status one_cycle_values(const tg_lr_scheduler *s, int g, int step_num, double *lr, double *momentum) {
    double start_step = 0;
    const double *points = s->lr_points + 3 * g;
    for (int i = 0; i < s->num_phases; i++) {
        const phase *ph = &s->phases[i];
        if (step_num <= ph->end_step || i == s->num_phases - 1) {
            if (ph->end_step == start_step)
                return tg_error("tg_scheduler_step (OneCycleLR): phase %d has zero length at step %d (total_steps "
                                "%d; PyTorch raises ZeroDivisionError)",
                                i + 1, step_num, s->total_steps);
            double pct = (step_num - start_step) / (ph->end_step - start_step);
            *lr = anneal(s->linear, points[ph->start_lr], points[ph->end_lr], pct);
            *momentum =
                anneal(s->linear, s->momentum_points[ph->start_momentum], s->momentum_points[ph->end_momentum], pct);
            return TG_OK;
        }
        start_step = ph->end_step;
    }
    return TG_ERROR; /* unreachable: the last phase always matches */
}

/* A momentum the optimizer accepts: beta1 in [0, 1) for Adam/AdamW, momentum > 0 for
 * SGD/RMSprop (their groups have momentum buffers; see tg_optim_set_group_momentum). */
static bool momentum_ok(bool use_beta1, double m) { return use_beta1 ? m >= 0 && m < 1 : m > 0; }

static tg_status one_cycle_step(tg_lr_scheduler *s) {
    int step_num = s->last_epoch + 1;
    if (step_num > s->total_steps)
        return tg_error("tg_scheduler_step (OneCycleLR): tried to step %d times; the specified number of total "
                        "steps is %d",
                        step_num + 1, s->total_steps);
    double *lrs = malloc((size_t)s->num_groups * 2 * sizeof(double));
    TG_ASSERT(lrs != NULL);
    double *momenta = lrs + s->num_groups;
    tg_status status = TG_OK;
    for (int g = 0; g < s->num_groups && !status; g++) {
        status = one_cycle_values(s, g, step_num, &lrs[g], &momenta[g]);
        if (!status && s->cycle_momentum && !momentum_ok(s->use_beta1, momenta[g]))
            status = tg_error("tg_scheduler_step (OneCycleLR): group %d's %s would be %g at step %d, which %s "
                              "does not accept",
                              g, s->use_beta1 ? "beta1" : "momentum", momenta[g], step_num, tg_optim_name(s->opt));
    }
    for (int g = 0; g < s->num_groups && !status; g++) {
        status = tg_optim_set_group_lr(s->opt, g, lrs[g]);
        if (!status && s->cycle_momentum) status = tg_optim_set_group_momentum(s->opt, g, momenta[g]);
    }
    free(lrs);
    return status;
}

/* scheduler.step(epoch) (deprecated in PyTorch, used by SequentialLR at a milestone):
 * last_epoch = epoch and the closed-form lrs. */
static void step_to(tg_lr_scheduler *s, int epoch) {
    s->step_count++;
    s->last_epoch = epoch;
    for (int g = 0; g < s->num_groups; g++) s->last_lrs[g] = closed_form_lr(s, g);
    for (int g = 0; g < s->num_groups; g++) tg_optim_set_group_lr(s->opt, g, s->last_lrs[g]);
    for (int g = 0; g < s->num_groups; g++) s->last_lrs[g] = tg_optim_get_group_lr(s->opt, g);
}

/* SequentialLR.step: the child whose range holds the epoch steps; the first step of a
 * later child is step(0). */
static tg_status sequential_step(tg_lr_scheduler *s) {
    s->last_epoch++;
    int idx = count_at_most(s->milestones, s->num_milestones, s->last_epoch);
    tg_lr_scheduler *child = s->children[idx];
    if (!child->opt) return tg_error("tg_scheduler_step: the optimizer of this scheduler was freed (tg_optim_free)");
    if (idx > 0 && s->milestones[idx - 1] == s->last_epoch) {
        step_to(child, 0);
        return TG_OK;
    }
    return tg_scheduler_step(child);
}

tg_status tg_scheduler_step(tg_lr_scheduler *s) {
    if (!s) return tg_error("tg_scheduler_step: scheduler is NULL");
    if (!s->opt) return tg_error("tg_scheduler_step: the optimizer of this scheduler was freed (tg_optim_free)");
    if (s->kind == SCHED_SEQUENTIAL) {
        s->step_count++;
        if (sequential_step(s)) return TG_ERROR;
    } else if (s->kind == SCHED_ONE_CYCLE) {
        if (one_cycle_step(s)) return TG_ERROR;
        s->step_count++;
        s->last_epoch++;
    } else {
        s->step_count++;
        s->last_epoch++;
        for (int g = 0; g < s->num_groups; g++) s->last_lrs[g] = get_lr(s, g);
        for (int g = 0; g < s->num_groups; g++) tg_optim_set_group_lr(s->opt, g, s->last_lrs[g]);
    }
    for (int g = 0; g < s->num_groups; g++) s->last_lrs[g] = tg_optim_get_group_lr(s->opt, g);
    return TG_OK;
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
    s->num_groups = tg_optim_num_groups(opt);
    int n = s->num_groups ? s->num_groups : 1;
    s->base_lrs = calloc((size_t)n, sizeof(double));
    s->last_lrs = calloc((size_t)n, sizeof(double));
    TG_ASSERT(s->base_lrs && s->last_lrs);
    /* base_lrs are group['initial_lr']: the lr when the optimizer's first scheduler was
     * made (PyTorch's setdefault), so a second scheduler starts from the same base. */
    const tg_lr_scheduler *first = tg_optim_num_schedulers_(opt) ? tg_optim_scheduler_(opt, 0) : NULL;
    for (int g = 0; g < s->num_groups; g++)
        s->base_lrs[g] = first && g < first->num_groups ? first->base_lrs[g] : tg_optim_get_group_lr(opt, g);
    s->last_epoch = -1;
    tg_optim_attach_scheduler_(opt, s); /* its state goes into the optimizer's checkpoints */
    return s;
}

/* _LRScheduler.__init__ ends with one step: last_epoch -1 -> 0. */
static tg_lr_scheduler *start(tg_lr_scheduler *s) {
    if (s && tg_scheduler_step(s)) {
        tg_scheduler_free(s);
        return NULL;
    }
    return s;
}

/* The plain gamma / factor parameters: 0 is PyTorch's default, TG_ZERO a real zero. */
static double or_default(double v, double dflt) { return tg_option(v, dflt, false); }

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

static int compare_int(const void *a, const void *b) {
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

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

tg_lr_scheduler *tg_lambda_lr(tg_optim *opt, tg_lr_lambda lr_lambda, void *user) {
    if (!lr_lambda) {
        tg_error("tg_lambda_lr: lr_lambda is NULL");
        return NULL;
    }
    tg_lr_scheduler *s = make(SCHED_LAMBDA, opt, "tg_lambda_lr");
    if (s) {
        s->lr_lambda = lr_lambda;
        s->lambda_user = user;
    }
    return start(s);
}

static tg_status check_sequence(tg_optim *opt, tg_lr_scheduler *const *schedulers, int count, const int *milestones) {
    const char *op = "tg_sequential_lr";
    if (!opt) return tg_error("%s: optimizer is NULL", op);
    if (count < 1 || !schedulers) return tg_error("%s: expected at least one scheduler, got %d", op, count);
    if (count > 1 && !milestones)
        return tg_error("%s: %d schedulers need %d milestones, got NULL", op, count, count - 1);
    for (int i = 0; i < count; i++) {
        if (!schedulers[i]) return tg_error("%s: scheduler %d is NULL", op, i);
        if (schedulers[i]->opt != opt)
            return tg_error("%s: scheduler %d (%s) was made on another optimizer than the one given", op, i,
                            kind_name(schedulers[i]->kind));
        if (schedulers[i]->kind == SCHED_ONE_CYCLE || schedulers[i]->kind == SCHED_SEQUENTIAL)
            return tg_error("%s: scheduler %d is a %s, which a SequentialLR cannot run here", op, i,
                            kind_name(schedulers[i]->kind));
    }
    for (int i = 0; i + 1 < count; i++)
        if (milestones[i] <= 0 || (i > 0 && milestones[i] <= milestones[i - 1]))
            return tg_error("%s: milestones must be positive and increasing, got %d after %d", op, milestones[i],
                            i ? milestones[i - 1] : 0);
    return TG_OK;
}

/* torch.optim.lr_scheduler.SequentialLR.__init__. */
tg_lr_scheduler *tg_sequential_lr(tg_optim *opt, tg_lr_scheduler *const *schedulers, int count, const int *milestones) {
    if (check_sequence(opt, schedulers, count, milestones)) {
        for (int i = 0; i < count && schedulers; i++) tg_scheduler_free(schedulers[i]);
        return NULL;
    }
    tg_lr_scheduler *s = make(SCHED_SEQUENTIAL, opt, "tg_sequential_lr");
    s->children = malloc((size_t)count * sizeof *s->children);
    s->milestones = malloc((size_t)(count > 1 ? count - 1 : 1) * sizeof *s->milestones);
    TG_ASSERT(s->children && s->milestones);
    memcpy(s->children, schedulers, (size_t)count * sizeof *s->children);
    if (count > 1) memcpy(s->milestones, milestones, (size_t)(count - 1) * sizeof *s->milestones);
    s->num_children = count;
    s->num_milestones = count - 1;
    s->last_epoch = 0;
    s->step_count = 1;
    for (int g = 0; g < s->num_groups; g++) tg_optim_set_group_lr(opt, g, s->base_lrs[g]); /* initial_lr */
    for (int i = 0; i < count; i++) s->children[i]->last_epoch--;                          /* undo their first step */
    tg_lr_scheduler *first = s->children[0];
    first->step_count = 0; /* _initial_step */
    if (tg_scheduler_step(first)) {
        tg_scheduler_free(s);
        return NULL;
    }
    for (int g = 0; g < s->num_groups; g++) s->last_lrs[g] = tg_optim_get_group_lr(opt, g);
    return s;
}

/* torch.optim.lr_scheduler.OneCycleLR.__init__. */
/* total_steps, or epochs * steps_per_epoch: the cycle's length, or -1 + error. */
static int one_cycle_total(const char *op, const tg_one_cycle_opts *o) {
    int total = o->total_steps;
    if (total < 0 || (total == 0 && (o->epochs < 0 || o->steps_per_epoch < 0)))
        return tg_error("%s: expected positive total_steps, epochs and steps_per_epoch, got %d, %d, %d", op,
                        o->total_steps, o->epochs, o->steps_per_epoch),
               -1;
    if (total) return total;
    if (o->epochs == 0 || o->steps_per_epoch == 0)
        return tg_error("%s: you must define either total_steps OR (epochs AND steps_per_epoch)", op), -1;
    if ((long long)o->epochs * o->steps_per_epoch > 0x7fffffff)
        return tg_error("%s: epochs * steps_per_epoch (%d * %d) is too large", op, o->epochs, o->steps_per_epoch), -1;
    return o->epochs * o->steps_per_epoch;
}

/* max_lr (or one max_lrs per group) positive; a 0 from TG_ONE_CYCLE_OPTS or a -0.0 (TG_ZERO) is a real zero. */
static tg_status one_cycle_check_max_lrs(const char *op, const tg_one_cycle_opts *o, int groups) {
    if (o->max_lrs && o->num_max_lrs != groups)
        return tg_error("%s: expected %d values for max_lr (one per parameter group), got %d", op, groups,
                        o->num_max_lrs);
    for (int g = 0; g < (o->max_lrs ? groups : 1); g++) {
        double m = o->max_lrs ? o->max_lrs[g] : o->max_lr;
        if (m > 0 || (m == 0 && (signbit(m) || o->defaults_filled))) continue;
        if (o->max_lrs) return tg_error("%s: max_lrs[%d] must be positive, got %g", op, g, m);
        return tg_error("%s: max_lr must be given and positive, got %g", op, m);
    }
    return TG_OK;
}

/* Cycling momentum needs a momentum (SGD, RMSprop) or beta1 (Adam, AdamW) in range. */
static tg_status one_cycle_check_momentum(const char *op, tg_optim *opt, bool use_beta1, double base_m, double max_m) {
    const char *name = tg_optim_name(opt);
    for (int g = 0; g < tg_optim_num_groups(opt); g++)
        if (!use_beta1 && !(tg_optim_get_group_momentum(opt, g) > 0))
            return tg_error("%s: cycle_momentum needs momentum, but %s group %d has none (momentum=0; PyTorch 1.13 "
                            "would switch it on): make the optimizer with a momentum, or set .no_cycle_momentum",
                            op, name, g);
    if (!momentum_ok(use_beta1, base_m) || !momentum_ok(use_beta1, max_m))
        return tg_error("%s: base_momentum %g and max_momentum %g must be %s for %s", op, base_m, max_m,
                        use_beta1 ? "in [0, 1) (they are beta1)" : "positive", name);
    return TG_OK;
}

tg_lr_scheduler *tg_one_cycle_lr(tg_optim *opt, tg_one_cycle_opts o) {
    const char *op = "tg_one_cycle_lr";
    if (!opt) {
        tg_error("%s: optimizer is NULL", op);
        return NULL;
    }
    int total = one_cycle_total(op, &o);
    if (total < 0) return NULL;
    bool filled = o.defaults_filled;
    double pct_start = tg_option(o.pct_start, 0.3, filled), div = tg_option(o.div_factor, 25.0, filled),
           final_div = tg_option(o.final_div_factor, 1e4, filled);
    if (!(pct_start >= 0 && pct_start <= 1)) {
        tg_error("%s: expected pct_start between 0 and 1, got %g", op, pct_start);
        return NULL;
    }
    if (o.anneal_strategy != TG_ANNEAL_COS && o.anneal_strategy != TG_ANNEAL_LINEAR) {
        tg_error("%s: anneal_strategy must be TG_ANNEAL_COS or TG_ANNEAL_LINEAR, got %d", op, (int)o.anneal_strategy);
        return NULL;
    }
    if (!(div > 0) || !(final_div > 0)) {
        tg_error("%s: div_factor (%g) and final_div_factor (%g) must be positive", op, div, final_div);
        return NULL;
    }
    int groups = tg_optim_num_groups(opt);
    if (one_cycle_check_max_lrs(op, &o, groups)) return NULL;
    bool cycle = !o.no_cycle_momentum;
    double base_m = tg_option(o.base_momentum, 0.85, filled), max_m = tg_option(o.max_momentum, 0.95, filled);
    const char *name = tg_optim_name(opt);
    bool use_beta1 = !strcmp(name, "Adam") || !strcmp(name, "AdamW");
    if (cycle && one_cycle_check_momentum(op, opt, use_beta1, base_m, max_m)) return NULL;
    tg_lr_scheduler *s = make(SCHED_ONE_CYCLE, opt, op);
    s->total_steps = total;
    s->linear = o.anneal_strategy == TG_ANNEAL_LINEAR;
    s->cycle_momentum = cycle;
    s->use_beta1 = use_beta1;
    s->momentum_points[MOM_MAX] = max_m;
    s->momentum_points[MOM_BASE] = base_m;
    if (o.three_phase) {
        s->num_phases = 3;
        s->phases[0] = (phase){pct_start * total - 1, AT_INITIAL, AT_MAX, MOM_MAX, MOM_BASE};
        s->phases[1] = (phase){2 * pct_start * total - 2, AT_MAX, AT_INITIAL, MOM_BASE, MOM_MAX};
        s->phases[2] = (phase){total - 1, AT_INITIAL, AT_MIN, MOM_MAX, MOM_MAX};
    } else {
        s->num_phases = 2;
        s->phases[0] = (phase){pct_start * total - 1, AT_INITIAL, AT_MAX, MOM_MAX, MOM_BASE};
        s->phases[1] = (phase){total - 1, AT_MAX, AT_MIN, MOM_BASE, MOM_MAX};
    }
    s->lr_points = calloc((size_t)(groups ? groups : 1) * 3, sizeof(double));
    TG_ASSERT(s->lr_points != NULL);
    for (int g = 0; g < groups; g++) {
        double *p = s->lr_points + 3 * g;
        p[AT_MAX] = fabs(o.max_lrs ? o.max_lrs[g] : o.max_lr);
        p[AT_INITIAL] = p[AT_MAX] / div;
        p[AT_MIN] = p[AT_INITIAL] / final_div;
        s->base_lrs[g] = p[AT_INITIAL];
    }
    /* The constructor sets each group's momentum to max_momentum (PyTorch's
     * group['momentum'] = m_momentum / betas = (m_momentum, beta2)); the first step
     * computes the same value. */
    for (int g = 0; g < groups && cycle; g++)
        if (tg_optim_set_group_momentum(opt, g, max_m)) {
            tg_scheduler_free(s);
            return NULL;
        }
    return start(s);
}

double tg_scheduler_get_last_lr(const tg_lr_scheduler *s) { return s && s->num_groups ? s->last_lrs[0] : NAN; }
double tg_scheduler_get_group_last_lr(const tg_lr_scheduler *s, int g) {
    return s && g >= 0 && g < s->num_groups ? s->last_lrs[g] : NAN;
}
int tg_scheduler_last_epoch(const tg_lr_scheduler *s) { return s ? s->last_epoch : -1; }

static const char *kind_name(sched_kind k) {
    switch (k) {
    case SCHED_STEP: return "StepLR";
    case SCHED_MULTI_STEP: return "MultiStepLR";
    case SCHED_EXPONENTIAL: return "ExponentialLR";
    case SCHED_COSINE: return "CosineAnnealingLR";
    case SCHED_LINEAR: return "LinearLR";
    case SCHED_ONE_CYCLE: return "OneCycleLR";
    case SCHED_LAMBDA: return "LambdaLR";
    case SCHED_SEQUENTIAL: return "SequentialLR";
    }
    return "?";
}

void tg_scheduler_optim_freed_(tg_lr_scheduler *s) { s->opt = NULL; }

tg_scheduler_state_ tg_scheduler_get_state_(const tg_lr_scheduler *s) {
    return (tg_scheduler_state_){kind_name(s->kind), s->last_epoch, s->step_count,
                                 s->num_groups,      s->base_lrs,   s->last_lrs};
}

/* Appends printf output to buf (bounded; the text is only compared). */
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...) {
    if (*len + 1 >= size) return;
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(buf + *len, size - *len, fmt, args);
    va_end(args);
    if (n > 0) *len = *len + (size_t)n < size ? *len + (size_t)n : size - 1;
}

void tg_scheduler_settings_(const tg_lr_scheduler *s, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    switch (s->kind) {
    case SCHED_STEP: append(buf, size, &len, "step_size=%d gamma=%.17g", s->step_size, s->gamma); break;
    case SCHED_MULTI_STEP:
        append(buf, size, &len, "gamma=%.17g milestones=", s->gamma);
        for (int i = 0; i < s->num_milestones; i++) append(buf, size, &len, "%s%d", i ? "," : "", s->milestones[i]);
        break;
    case SCHED_EXPONENTIAL: append(buf, size, &len, "gamma=%.17g", s->gamma); break;
    case SCHED_COSINE: append(buf, size, &len, "T_max=%d eta_min=%.17g", s->t_max, s->eta_min); break;
    case SCHED_LINEAR:
        append(buf, size, &len, "start_factor=%.17g end_factor=%.17g total_iters=%d", s->start_factor, s->end_factor,
               s->total_iters);
        break;
    case SCHED_LAMBDA: break; /* a function: not comparable (PyTorch's state_dict leaves it out too) */
    case SCHED_SEQUENTIAL:
        append(buf, size, &len, "milestones=");
        for (int i = 0; i < s->num_milestones; i++) append(buf, size, &len, "%s%d", i ? "," : "", s->milestones[i]);
        for (int i = 0; i < s->num_children; i++)
            append(buf, size, &len, "%s%s", i ? "," : " schedulers=", kind_name(s->children[i]->kind));
        break;
    case SCHED_ONE_CYCLE:
        append(buf, size, &len, "total_steps=%d phases=%d", s->total_steps, s->num_phases);
        for (int i = 0; i < s->num_phases; i++)
            append(buf, size, &len, "%s%.17g", i ? "," : " ends=", s->phases[i].end_step);
        append(buf, size, &len, " anneal=%s cycle_momentum=%d momentum=%.17g..%.17g", s->linear ? "linear" : "cos",
               (int)s->cycle_momentum, s->momentum_points[MOM_BASE], s->momentum_points[MOM_MAX]);
        for (int g = 0; g < s->num_groups; g++)
            append(buf, size, &len, " group%d_lrs=%.17g,%.17g,%.17g", g, s->lr_points[3 * g + AT_INITIAL],
                   s->lr_points[3 * g + AT_MAX], s->lr_points[3 * g + AT_MIN]);
        break;
    }
}

void tg_scheduler_set_state_(tg_lr_scheduler *s, int last_epoch, int step_count, const double *base_lrs,
                             const double *last_lrs) {
    s->last_epoch = last_epoch;
    s->step_count = step_count;
    for (int g = 0; g < s->num_groups; g++) {
        s->base_lrs[g] = base_lrs[g];
        s->last_lrs[g] = last_lrs[g];
    }
}

void tg_scheduler_free(tg_lr_scheduler *s) {
    if (!s) return;
    if (s->opt) tg_optim_detach_scheduler_(s->opt, s);
    for (int i = 0; i < s->num_children; i++) tg_scheduler_free(s->children[i]);
    free(s->children);
    free(s->milestones);
    free(s->base_lrs);
    free(s->last_lrs);
    free(s->lr_points);
    free(s);
}
