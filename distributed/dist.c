/* Collectives across processes: MPI for CPU tensors, NCCL (distributed/nccl.cu) for CUDA
 * tensors. See distributed/dist.h.
 *
 * Every collective is started non-blocking (MPI_I* / an NCCL launch) and waited for
 * by polling with a deadline, so that a rank that stops calling collectives shows up
 * as an error on the others after TG_DIST_TIMEOUT seconds instead of a hang. The
 * communicator is a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, so MPI's
 * errors come back as codes (turned into messages) instead of aborting the job.
 *
 * Progress: Open MPI moves a non-blocking collective forward only inside MPI calls,
 * so a DDP bucket started during backward would otherwise wait for the next hook.
 * While non-blocking works are in flight, a progress thread tests them every 50 us.
 * Every MPI call of this file holds mpi_lock, which keeps the calls one at a time
 * (MPI_THREAD_SERIALIZED). */
#include "distributed/dist.h"

#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/scope.h"
#include "core/tensor_impl.h"
#include "distributed/nccl.h"

#define DEFAULT_TIMEOUT_S 600.0 /* PyTorch's NCCL default (10 minutes) */

static struct {
    bool initialized;
    bool we_called_init; /* MPI_Finalize is ours to call */
    bool broken;         /* a collective failed or timed out: the group cannot be trusted */
    int rank, world_size, local_rank;
    double timeout_s;
    MPI_Comm comm;
    bool nccl_ready;
    int nccl_device;
    int64_t calls;  /* collectives this rank has made: the sequence number the ranks compare */
    bool disagreed; /* a call met another kind of call on some rank (every rank knows it) */
} dist = {.world_size = 1, .timeout_s = DEFAULT_TIMEOUT_S, .comm = MPI_COMM_NULL};

/* This process's place in the job, kept after tg_dist_finalize for the SIGTERM message. */
static volatile int job_rank = 0, job_size = 1;

struct tg_dist_work {
    MPI_Request request;
    int error;         /* an MPI error the progress thread met on this request */
    void *nccl;        /* the NCCL handle instead of `request` for CUDA tensors */
    tg_tensor *tensor; /* owned reference until the wait */
    tg_dist_op op;
    const char *name;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- serialised MPI calls and the progress thread ---- */

static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
#define LOCKED(call) \
    (pthread_mutex_lock(&mpi_lock), locked_result_ = (call), pthread_mutex_unlock(&mpi_lock), locked_result_)
static _Thread_local int locked_result_;

#define MAX_IN_FLIGHT 256
static struct {
    pthread_t thread;
    bool running, stop;
    pthread_cond_t wake;
    tg_dist_work *works[MAX_IN_FLIGHT]; /* under mpi_lock */
    int count;
} progress = {.wake = PTHREAD_COND_INITIALIZER};

static void *progress_main(void *unused) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_mutex_lock(&mpi_lock);
    while (!progress.stop) {
        if (progress.count == 0) {
            pthread_cond_wait(&progress.wake, &mpi_lock);
            continue;
        }
        for (int i = 0; i < progress.count; i++) {
            tg_dist_work *w = progress.works[i];
            if (w->request == MPI_REQUEST_NULL || w->error) continue;
            int done = 0;
            int code = MPI_Test(&w->request, &done, MPI_STATUS_IGNORE);
            if (code != MPI_SUCCESS) w->error = code;
            break; /* one call progresses every outstanding collective */
        }
        pthread_mutex_unlock(&mpi_lock);
        struct timespec pause = {0, 50000};
        nanosleep(&pause, NULL);
        pthread_mutex_lock(&mpi_lock);
    }
    pthread_mutex_unlock(&mpi_lock);
    return NULL;
}

/* Hands w to the progress thread (started on first use); when the thread cannot start
 * or holds MAX_IN_FLIGHT works already, w progresses only in tg_dist_test / the wait. */
static void progress_add(tg_dist_work *w) {
    pthread_mutex_lock(&mpi_lock);
    if (!progress.running && !progress.stop)
        progress.running = pthread_create(&progress.thread, NULL, progress_main, NULL) == 0;
    if (progress.running && progress.count < MAX_IN_FLIGHT) {
        progress.works[progress.count++] = w;
        pthread_cond_signal(&progress.wake);
    }
    pthread_mutex_unlock(&mpi_lock);
}

static void progress_remove(tg_dist_work *w) {
    pthread_mutex_lock(&mpi_lock);
    for (int i = 0; i < progress.count; i++)
        if (progress.works[i] == w) {
            progress.works[i] = progress.works[--progress.count];
            break;
        }
    pthread_mutex_unlock(&mpi_lock);
}

static void progress_shutdown(void) {
    pthread_mutex_lock(&mpi_lock);
    bool running = progress.running;
    progress.stop = true;
    progress.count = 0;
    pthread_cond_signal(&progress.wake);
    pthread_mutex_unlock(&mpi_lock);
    if (running) pthread_join(progress.thread, NULL);
    progress.running = false;
    progress.stop = false;
}

/* ---- errors ---- */

static tg_status mpi_failed(const char *op, int code) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int length = 0;
    pthread_mutex_lock(&mpi_lock);
    MPI_Error_string(code, text, &length);
    pthread_mutex_unlock(&mpi_lock);
    dist.broken = true;
    return tg_error("%s: MPI failed on rank %d of %d: %s", op, dist.rank, dist.world_size, text);
}

static tg_status check_ready(const char *op) {
    if (!dist.initialized) return tg_error("%s: call tg_dist_init first", op);
    if (dist.broken)
        return tg_error("%s: the process group of rank %d is broken by an earlier failure (timeout or "
                        "MPI error); end the program",
                        op, dist.rank);
    return TG_OK;
}

/* mpirun stops the other ranks with SIGTERM when one exits non-zero or dies: say so
 * before going (write(2) only: async-signal-safe). */
static void on_sigterm(int sig) {
    char line[200]; /* the launcher does not say why: Ctrl-C on mpirun ends here too */
    int n = snprintf(line, sizeof line,
                     "tg_dist: rank %d of %d stopped by the launcher (signal %d): the job was interrupted, or "
                     "another rank exited with an error or died (its messages say why)\n",
                     job_rank, job_size, sig);
    if (n > 0) (void)!write(STDERR_FILENO, line, (size_t)n);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_sigterm_message(void) {
    struct sigaction old;
    if (sigaction(SIGTERM, NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
        struct sigaction sa = {0};
        sa.sa_handler = on_sigterm;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
    }
}

/* ---- environment ---- */

static bool env_int(const char *name, int *value) {
    const char *text = getenv(name);
    if (!text || !*text) return false;
    char *end;
    long v = strtol(text, &end, 10);
    if (*end || v < 0 || v > 1 << 30) return false;
    *value = (int)v;
    return true;
}

static tg_status read_timeout(void) {
    const char *text = getenv("TG_DIST_TIMEOUT");
    if (!text || !*text) return TG_OK;
    char *end;
    double v = strtod(text, &end);
    if (*end || !(v > 0) || !isfinite(v))
        return tg_error("tg_dist_init: TG_DIST_TIMEOUT='%s' is not a positive number of seconds", text);
    dist.timeout_s = v;
    return TG_OK;
}

tg_status tg_dist_init(void) {
    const char *op = "tg_dist_init";
    if (dist.initialized) return tg_error("%s: already initialized (call tg_dist_finalize first)", op);
    if (read_timeout()) return TG_ERROR;
    int mpi_ready = 0;
    MPI_Initialized(&mpi_ready);
    if (!mpi_ready) {
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            return tg_error("%s: MPI_Init_thread failed", op);
        dist.we_called_init = true;
    }
    MPI_Comm comm;
    int code = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (code != MPI_SUCCESS) return mpi_failed(op, code);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    /* Open MPI reports errors of some non-blocking collectives' MPI_Test through
     * MPI_COMM_WORLD's handler: returned there too, never fatal. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int env_rank, env_size;
    bool has_rank = env_int("RANK", &env_rank), has_size = env_int("WORLD_SIZE", &env_size);
    if ((has_size && env_size != size) || (has_rank && env_rank != rank)) {
        MPI_Comm_free(&comm);
        return tg_error("%s: RANK=%s / WORLD_SIZE=%s are set, but MPI's world has this process as rank %d "
                        "of %d: the ranks meet through MPI, so launch the program with mpirun -np N "
                        "(a torchrun launch without mpirun gives N worlds of one)",
                        op, getenv("RANK") ? getenv("RANK") : "(unset)",
                        getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "(unset)", rank, size);
    }
    int local = 0;
    if (!env_int("LOCAL_RANK", &local) && !env_int("OMPI_COMM_WORLD_LOCAL_RANK", &local) &&
        !env_int("MPI_LOCALRANKID", &local))
        local = size == 1 ? 0 : rank;
    dist.comm = comm;
    dist.rank = rank;
    dist.world_size = size;
    dist.local_rank = local;
    dist.broken = false;
    dist.nccl_ready = false;
    dist.calls = 0;
    dist.disagreed = false;
    dist.initialized = true;
    job_rank = rank;
    job_size = size;
    install_sigterm_message();
    return TG_OK;
}

static tg_status agree_to_finalize(void);

tg_status tg_dist_finalize(void) {
    if (!dist.initialized) return TG_OK;
    /* A rank that leaves while another still makes collectives (a step more, say) fails
     * both at once instead of leaving the other to its timeout. Skipped once the ranks
     * have disagreed or the group is broken: the others may not come here. */
    tg_status status = TG_OK;
    if (!dist.broken && !dist.disagreed && dist.world_size > 1) status = agree_to_finalize();
    progress_shutdown();
    if (dist.nccl_ready && tg_nccl_shutdown) tg_nccl_shutdown(dist.broken);
    dist.nccl_ready = false;
    /* A broken group is finalized like a healthy one (MPI_Finalize waits for every rank,
     * and each rank of a broken group times out on its own); MPI_Abort instead would
     * turn a reported error into a killed job. */
    /* A broken group's communicator is kept: a collective that timed out is still
     * pending on it, and MPI_Finalize progresses it (freed, Open MPI crashed there). */
    if (!dist.broken) MPI_Comm_free(&dist.comm);
    dist.comm = MPI_COMM_NULL;
    dist.initialized = false;
    dist.rank = 0;
    dist.world_size = 1;
    dist.local_rank = 0;
    if (dist.we_called_init) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
        dist.we_called_init = false;
    }
    return status;
}

bool tg_dist_is_initialized(void) { return dist.initialized; }
int tg_dist_rank(void) { return dist.rank; }
int tg_dist_world_size(void) { return dist.world_size; }
int tg_dist_local_rank(void) { return dist.local_rank; }
double tg_dist_timeout(void) { return dist.timeout_s; }
void tg_dist_set_timeout(double seconds) {
    if (seconds > 0 && isfinite(seconds)) dist.timeout_s = seconds;
}

static tg_status wait_work(tg_dist_work *w);

/* ---- tensors ---- */

static MPI_Datatype mpi_type(tg_dtype dtype) {
    switch (dtype) {
    case TG_FLOAT32: return MPI_FLOAT;
    case TG_FLOAT64: return MPI_DOUBLE;
    case TG_INT32: return MPI_INT32_T;
    case TG_INT64: return MPI_INT64_T;
    case TG_UINT8:
    case TG_BOOL: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
    }
}

static bool is_cuda(const tg_tensor *t) { return t->storage->device.kind == TG_DEVICE_CUDA; }

/* The checks every collective makes on its tensor. reducing: the op adds values. */
static tg_status check_tensor(const char *op, const tg_tensor *t, bool reducing, tg_dist_op reduce) {
    if (check_ready(op)) return TG_ERROR;
    if (tg_unusable_(t)) return tg_error_unusable_input(op, t, 0);
    if (!tg_is_contiguous(t)) return tg_error("%s: the tensor must be contiguous", op);
    tg_dtype dtype = t->dtype;
    bool arithmetic = dtype == TG_FLOAT32 || dtype == TG_FLOAT64 || dtype == TG_INT32 || dtype == TG_INT64;
    if (mpi_type(dtype) == MPI_DATATYPE_NULL || (reducing && !arithmetic))
        return tg_error("%s: dtype %s is not supported (float32, float64, int32, int64%s)", op, tg_dtype_name(dtype),
                        reducing ? "" : ", uint8, bool");
    if (reducing && reduce == TG_DIST_AVG && !tg_dtype_is_floating(dtype))
        return tg_error("%s: TG_DIST_AVG needs a floating dtype, not %s", op, tg_dtype_name(dtype));
    if (reducing && (reduce < TG_DIST_SUM || reduce > TG_DIST_MAX))
        return tg_error("%s: unknown reduction %d", op, (int)reduce);
    if (is_cuda(t) && !tg_nccl_start)
        return tg_error("%s: a CUDA tensor needs NCCL, and this build of tapegrad has no NCCL (built with "
                        "--config=cpu_only or without a CUDA toolkit)",
                        op);
    return TG_OK;
}

static MPI_Op mpi_op(tg_dist_op op) { return op == TG_DIST_MAX ? MPI_MAX : MPI_SUM; }

/* The NCCL communicator, made on the first CUDA collective (every rank's first CUDA
 * collective is the same call, so they all get here together). */
static tg_status ensure_nccl(const char *op, const tg_tensor *t) {
    if (dist.nccl_ready) {
        if (t->storage->device.index != dist.nccl_device)
            return tg_error("%s: the tensor is on cuda:%d but this rank's NCCL communicator is on cuda:%d "
                            "(one GPU per rank)",
                            op, t->storage->device.index, dist.nccl_device);
        return TG_OK;
    }
    unsigned char id[TG_NCCL_UNIQUE_ID_BYTES] = {0};
    if (dist.rank == 0 && tg_nccl_unique_id(id)) return TG_ERROR;
    MPI_Request request;
    int code = LOCKED(MPI_Ibcast(id, TG_NCCL_UNIQUE_ID_BYTES, MPI_BYTE, 0, dist.comm, &request));
    if (code != MPI_SUCCESS) return mpi_failed(op, code);
    tg_dist_work w = {.request = request, .name = op};
    tg_status status = wait_work(&w);
    if (status) return status;
    if (tg_nccl_init(id, dist.rank, dist.world_size, t->storage->device.index, now_s() + dist.timeout_s)) {
        dist.broken = true;
        return TG_ERROR;
    }
    dist.nccl_ready = true;
    dist.nccl_device = t->storage->device.index;
    return TG_OK;
}

/* ---- waiting with a deadline ---- */

/* 1 done, 0 running, -1 failed (error recorded). */
static int poll_work(tg_dist_work *w) {
    if (w->nccl) return tg_nccl_query(w->nccl);
    int done = 0;
    int code = LOCKED(w->error ? w->error : MPI_Test(&w->request, &done, MPI_STATUS_IGNORE));
    if (code != MPI_SUCCESS) {
        mpi_failed(w->name, code);
        return -1;
    }
    return done;
}

static tg_status wait_work(tg_dist_work *w) {
    double deadline = now_s() + dist.timeout_s;
    for (long polls = 0;; polls++) {
        int state = poll_work(w);
        if (state < 0) {
            dist.broken = true;
            return TG_ERROR;
        }
        if (state > 0) return TG_OK;
        if (now_s() > deadline) {
            dist.broken = true;
            return tg_error("%s: rank %d of %d waited %.3g s (TG_DIST_TIMEOUT) for the other ranks: one of "
                            "them failed, died or stopped calling the same collectives",
                            w->name, dist.rank, dist.world_size, dist.timeout_s);
        }
        /* Spin briefly (a collective between ranks of one machine takes microseconds),
         * then sleep so that a rank that waits long leaves the core to the others. */
        if (polls > 64) {
            struct timespec pause = {0, polls > 4096 ? 200000 : 20000};
            nanosleep(&pause, NULL);
        }
    }
}

static void divide_for_avg(tg_tensor *t) {
    int64_t n = tg_numel(t);
    if (t->dtype == TG_FLOAT32) {
        float *p = tg_data_ptr(t);
        for (int64_t i = 0; i < n; i++) p[i] /= (float)dist.world_size;
    } else {
        double *p = tg_data_ptr(t);
        for (int64_t i = 0; i < n; i++) p[i] /= dist.world_size;
    }
}

static tg_status finish(tg_dist_work *w) {
    tg_status status = wait_work(w);
    if (!status && w->nccl) {
        status = tg_nccl_finish(w->nccl);
        w->nccl = NULL;
    } else if (!status && w->op == TG_DIST_AVG && w->tensor) {
        divide_for_avg(w->tensor);
    }
    if (!status && w->tensor) w->tensor->storage->version++;
    return status;
}

/* ---- every rank making the same call ----
 * Before its data moves, each collective's description (its sequence number on this
 * rank, kind, dtype, element count, reduction, root, and the caller's tag such as
 * DDP's step) is compared across the ranks: rank 0 gathers them and sends every rank
 * the same verdict, so when they differ all fail together, before a byte of a tensor
 * has moved (the group stays usable, the tensors untouched), and an all-gather of the
 * descriptions lets each rank say what every rank called; when a rank does not come,
 * rank 0 names it to the others at the deadline. Without
 * it MPI pairs calls in order: different sizes ended in MPI_ERR_TRUNCATE or in sums
 * over the wrong elements, and same-size tensors of other shapes were reinterpreted. */
typedef enum {
    CALL_BARRIER = 1,
    CALL_BROADCAST,
    CALL_ALL_REDUCE,
    CALL_ALL_GATHER,
    CALL_REDUCE_SCATTER,
    CALL_FINALIZE
} call_kind;
static const char *const call_names[] = {"?",          "barrier",        "broadcast",       "all_reduce",
                                         "all_gather", "reduce_scatter", "tg_dist_finalize"};

enum { SEQ, KIND, DTYPE, COUNT, REDUCE, ROOT, TAG, CALL_FIELDS };
typedef struct {
    int64_t field[CALL_FIELDS];
    char what[112]; /* the tensor (dtype and shape) or the caller's label */
} call_desc;

/* The caller's tag and label for this thread's next collective (tg_dist_label_next). */
static _Thread_local int64_t next_tag;
static _Thread_local char next_label[80];

void tg_dist_label_next(int64_t tag, const char *label) {
    next_tag = tag;
    snprintf(next_label, sizeof next_label, "%s", label ? label : "");
}

/* A gather's buffer kept for MPI after a timeout (still pending there, never freed). */
static call_desc *volatile left_to_mpi;

static bool same_call(const call_desc *a, const call_desc *b) {
    return memcmp(a->field, b->field, sizeof a->field) == 0 && strcmp(a->what, b->what) == 0;
}

static void call_text(const call_desc *c, char *out, size_t size) {
    int kind = (int)c->field[KIND];
    snprintf(out, size, "call #%lld, %s%s%s", (long long)c->field[SEQ],
             call_names[kind >= CALL_BARRIER && kind <= CALL_FINALIZE ? kind : 0], c->what[0] ? " of " : "", c->what);
}

/* Each rank's description, gathered after a disagreement: the message every rank gives. */
static tg_status report_disagreement(const char *op, const call_desc *mine) {
    dist.disagreed = true;
    call_desc *all = calloc((size_t)dist.world_size, sizeof *all);
    if (!all) return tg_error("%s: the ranks' calls differ (and there is no memory to say how)", op);
    tg_dist_work w = {.name = op};
    int code = LOCKED(
        MPI_Iallgather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine, MPI_BYTE, dist.comm, &w.request));
    if (code != MPI_SUCCESS) {
        free(all);
        return mpi_failed(op, code);
    }
    if (wait_work(&w)) { /* `all` stays with the pending gather (see coordinate_check), reachable */
        left_to_mpi = all;
        return TG_ERROR;
    }
    char text[1024];
    int used = snprintf(text, sizeof text,
                        "%s: the ranks' collectives differ (each rank must make the same calls, "
                        "in the same order, with tensors of the same dtype and size):",
                        op);
    for (int r = 0, shown = 0; r < dist.world_size && used < (int)sizeof text; r++) {
        /* runs of ranks that agree are shown by their first */
        if (r > 0 && same_call(&all[r], &all[r - 1]) && r != dist.rank) continue;
        if (++shown > 8) {
            used += snprintf(text + used, sizeof text - (size_t)used, " ...");
            break;
        }
        char call[200];
        call_text(&all[r], call, sizeof call);
        used += snprintf(text + used, sizeof text - (size_t)used, "%s rank %d%s: %s", shown > 1 ? ";" : "", r,
                         r == dist.rank ? " (this rank)" : "", call);
    }
    free(all);
    return tg_error("%s", text);
}

/* The check's messages: each rank sends its description to rank 0, which compares
 * them and sends back its verdict. Point-to-point rather than one all-reduce, so that a
 * wait that times out can say whom it waits for: rank 0 sees which ranks have not sent
 * theirs by the deadline and tells the ones that did. Tags of their own keep these
 * messages apart from the collectives; between two ranks they arrive in call order. */
enum { TAG_DESCRIPTION = 7301, TAG_VERDICT = 7302 };
enum { VERDICT_SAME = 0, VERDICT_DIFFERENT, VERDICT_MISSING };
#define MISSING_NAMED 16
typedef struct {
    int64_t verdict, missing_count;
    int32_t missing[MISSING_NAMED]; /* the first ranks that had not arrived */
    double waited_s;
} verdict_msg;

static void missing_text(const verdict_msg *v, char *out, size_t size) {
    int used = 0;
    for (int i = 0; i < v->missing_count && i < MISSING_NAMED && used < (int)size; i++)
        used += snprintf(out + used, size - (size_t)used, "%s%d", i ? ", " : "", v->missing[i]);
    if (v->missing_count > MISSING_NAMED && used < (int)size)
        snprintf(out + used, size - (size_t)used, " and %lld more", (long long)(v->missing_count - MISSING_NAMED));
}

/* Sleeps between polls as wait_work does: spin briefly, then leave the core. */
static void pause_between_polls(long polls) {
    if (polls > 64) {
        struct timespec pause = {0, polls > 4096 ? 200000 : 20000};
        nanosleep(&pause, NULL);
    }
}

/* The status of this rank's call from rank 0's verdict; `arrived` (rank 0 only, else
 * -1) counts the ranks whose description came in time, rank 0 included. */
static tg_status act_on_verdict(const char *op, const call_desc *mine, const verdict_msg *v, int arrived) {
    if (v->verdict == VERDICT_DIFFERENT) return report_disagreement(op, mine);
    if (v->verdict == VERDICT_SAME) return TG_OK;
    dist.broken = true;
    char call[200], missing[160];
    call_text(mine, call, sizeof call);
    missing_text(v, missing, sizeof missing);
    const char *plural = v->missing_count > 1 ? "s" : "", *who = v->missing_count > 1 ? "they" : "it";
    if (arrived >= 0)
        return tg_error("%s: rank 0 of %d waited %.3g s (TG_DIST_TIMEOUT) at its %s for rank%s %s (%s ranks "
                        "arrived): %s failed, died or stopped calling the same collectives",
                        op, dist.world_size, dist.timeout_s, call, plural, missing,
                        arrived == 1 ? "no other" : "the other", who);
    return tg_error("%s: rank %d of %d: at its %s, rank 0 waited %.3g s (TG_DIST_TIMEOUT) for rank%s %s: %s failed, "
                    "died or stopped calling the same collectives",
                    op, dist.rank, dist.world_size, call, v->waited_s, plural, missing, who);
}

/* Rank 0's side. Its buffers are static: after a timeout MPI keeps the requests and
 * may still write there (calls are one at a time: MPI_THREAD_SERIALIZED). */
static tg_status coordinate_check(const char *op, const call_desc *mine) {
    static call_desc *theirs;
    static MPI_Request *requests;
    static bool *arrived;
    static verdict_msg verdict;
    static int capacity;
    int world = dist.world_size;
    if (capacity < world) { /* after a timeout the group is broken: never again with requests pending */
        call_desc *d = realloc(theirs, (size_t)world * sizeof *d);
        MPI_Request *r = d ? realloc(requests, (size_t)world * sizeof *r) : NULL;
        bool *a = r ? realloc(arrived, (size_t)world * sizeof *a) : NULL;
        if (d) theirs = d;
        if (r) requests = r;
        if (a) arrived = a;
        if (!a) return tg_error("%s: out of memory", op);
        capacity = world;
    }
    for (int r = 1; r < world; r++) {
        arrived[r] = false;
        int code =
            LOCKED(MPI_Irecv(&theirs[r], (int)sizeof *theirs, MPI_BYTE, r, TAG_DESCRIPTION, dist.comm, &requests[r]));
        if (code != MPI_SUCCESS) return mpi_failed(op, code);
    }
    double start = now_s(), deadline = start + dist.timeout_s;
    int count = 1;
    for (long polls = 0; count < world && now_s() <= deadline; polls++) {
        for (int r = 1; r < world; r++) {
            if (arrived[r]) continue;
            int done = 0;
            int code = LOCKED(MPI_Test(&requests[r], &done, MPI_STATUS_IGNORE));
            if (code != MPI_SUCCESS) return mpi_failed(op, code);
            if (done) arrived[r] = true, count++;
        }
        if (count < world) pause_between_polls(polls);
    }
    verdict = (verdict_msg){.verdict = VERDICT_SAME, .waited_s = now_s() - start};
    for (int r = 1; r < world; r++) {
        if (!arrived[r]) {
            if (verdict.missing_count < MISSING_NAMED) verdict.missing[verdict.missing_count] = r;
            verdict.missing_count++;
            verdict.verdict = VERDICT_MISSING;
        } else if (verdict.verdict == VERDICT_SAME && !same_call(&theirs[r], mine)) {
            verdict.verdict = VERDICT_DIFFERENT;
        }
    }
    for (int r = 1; r < world; r++) {
        if (!arrived[r]) continue;
        MPI_Request sent;
        int code = LOCKED(MPI_Isend(&verdict, (int)sizeof verdict, MPI_BYTE, r, TAG_VERDICT, dist.comm, &sent));
        if (code != MPI_SUCCESS) return mpi_failed(op, code);
        (void)LOCKED(MPI_Request_free(&sent)); /* a few bytes, delivered eagerly; the buffer is static */
    }
    return act_on_verdict(op, mine, &verdict, count);
}

/* Another rank's side: its description to rank 0, the verdict back. Rank 0 sends the
 * verdict at the latest at its own deadline, which may come after this rank's (it may
 * have started waiting later): a grace of a tenth of the timeout, and 2 s. */
static tg_status take_part_in_check(const char *op, const call_desc *mine) {
    static call_desc sent;
    static verdict_msg verdict;
    sent = *mine;
    MPI_Request send, receive;
    int code = LOCKED(MPI_Isend(&sent, (int)sizeof sent, MPI_BYTE, 0, TAG_DESCRIPTION, dist.comm, &send));
    if (code == MPI_SUCCESS) code = LOCKED(MPI_Request_free(&send));
    if (code == MPI_SUCCESS)
        code = LOCKED(MPI_Irecv(&verdict, (int)sizeof verdict, MPI_BYTE, 0, TAG_VERDICT, dist.comm, &receive));
    if (code != MPI_SUCCESS) return mpi_failed(op, code);
    double deadline = now_s() + dist.timeout_s * 1.1 + 2.0;
    int done = 0;
    for (long polls = 0; !done; polls++) {
        code = LOCKED(MPI_Test(&receive, &done, MPI_STATUS_IGNORE));
        if (code != MPI_SUCCESS) return mpi_failed(op, code);
        if (done) break;
        if (now_s() > deadline) {
            dist.broken = true;
            char call[200];
            call_text(mine, call, sizeof call);
            return tg_error("%s: rank %d of %d waited %.3g s (TG_DIST_TIMEOUT) at its %s for rank 0, which checks "
                            "that every rank makes the same call: rank 0 failed, died or stopped calling the same "
                            "collectives",
                            op, dist.rank, dist.world_size, dist.timeout_s, call);
        }
        pause_between_polls(polls);
    }
    return act_on_verdict(op, mine, &verdict, -1);
}

/* Compares this call's description with every other rank's (see above). */
static tg_status agree_on_call(const char *op, call_kind kind, const tg_tensor *t, int64_t count, int reduce,
                               int root) {
    call_desc mine = {.field = {dist.calls++, kind, t ? (int64_t)t->dtype : -1, count, reduce, root, next_tag}};
    if (next_label[0]) {
        snprintf(mine.what, sizeof mine.what, "%s", next_label);
    } else if (t) {
        char shape[96];
        snprintf(mine.what, sizeof mine.what, "%s %s", tg_dtype_name(t->dtype),
                 tg_shape_str(t->shape, shape, sizeof shape));
    }
    next_tag = 0;
    next_label[0] = 0;
    if (dist.world_size == 1) return TG_OK;
    return dist.rank == 0 ? coordinate_check(op, &mine) : take_part_in_check(op, &mine);
}

static tg_status agree_to_finalize(void) { return agree_on_call("tg_dist_finalize", CALL_FINALIZE, NULL, 0, 0, 0); }

/* ---- collectives ---- */

tg_status tg_dist_barrier(void) {
    if (check_ready("tg_dist_barrier") || agree_on_call("tg_dist_barrier", CALL_BARRIER, NULL, 0, 0, 0))
        return TG_ERROR;
    tg_dist_work w = {.name = "tg_dist_barrier"};
    int code = LOCKED(MPI_Ibarrier(dist.comm, &w.request));
    if (code != MPI_SUCCESS) return mpi_failed(w.name, code);
    return finish(&w);
}

static tg_status start_cuda(tg_dist_work *w, tg_nccl_kind kind, const void *send, void *recv, size_t count,
                            tg_dtype dtype, int root) {
    if (ensure_nccl(w->name, w->tensor)) return TG_ERROR;
    w->nccl = tg_nccl_start(kind, send, recv, count, dtype, (int)w->op, root);
    return w->nccl ? TG_OK : TG_ERROR;
}

tg_status tg_dist_broadcast(tg_tensor *t, int root) {
    const char *op = "tg_dist_broadcast";
    if (check_tensor(op, t, false, TG_DIST_SUM)) return TG_ERROR;
    if (root < 0 || root >= dist.world_size)
        return tg_error("%s: root %d is not a rank (world size %d)", op, root, dist.world_size);
    if (agree_on_call(op, CALL_BROADCAST, t, tg_numel(t), 0, root)) return TG_ERROR;
    tg_dist_work w = {.tensor = t, .name = op};
    size_t count = (size_t)tg_numel(t);
    if (is_cuda(t)) {
        if (start_cuda(&w, TG_NCCL_BROADCAST, tg_data_ptr(t), tg_data_ptr(t), count, t->dtype, root)) return TG_ERROR;
    } else {
        int code = LOCKED(MPI_Ibcast(tg_data_ptr(t), (int)count, mpi_type(t->dtype), root, dist.comm, &w.request));
        if (code != MPI_SUCCESS) return mpi_failed(op, code);
    }
    return finish(&w);
}

static tg_status start_all_reduce(tg_dist_work *w, tg_tensor *t, tg_dist_op reduce) {
    w->tensor = t;
    w->op = reduce;
    size_t count = (size_t)tg_numel(t);
    if (count > (size_t)1 << 31) return tg_error("%s: more than 2^31 elements in one call", w->name);
    if (agree_on_call(w->name, CALL_ALL_REDUCE, t, (int64_t)count, (int)reduce, 0)) return TG_ERROR;
    if (is_cuda(t)) return start_cuda(w, TG_NCCL_ALL_REDUCE, tg_data_ptr(t), tg_data_ptr(t), count, t->dtype, 0);
    int code = LOCKED(MPI_Iallreduce(MPI_IN_PLACE, tg_data_ptr(t), (int)count, mpi_type(t->dtype), mpi_op(reduce),
                                     dist.comm, &w->request));
    return code == MPI_SUCCESS ? TG_OK : mpi_failed(w->name, code);
}

tg_status tg_dist_all_reduce(tg_tensor *t, tg_dist_op reduce) {
    const char *op = "tg_dist_all_reduce";
    if (check_tensor(op, t, true, reduce)) return TG_ERROR;
    tg_dist_work w = {.name = op};
    if (start_all_reduce(&w, t, reduce)) return TG_ERROR;
    return finish(&w);
}

tg_dist_work *tg_dist_all_reduce_start(tg_tensor *t, tg_dist_op reduce) {
    const char *op = "tg_dist_all_reduce_start";
    if (check_tensor(op, t, true, reduce)) return NULL;
    tg_dist_work *w = calloc(1, sizeof *w);
    if (!w) return tg_error("%s: out of memory", op), NULL;
    w->name = op;
    if (start_all_reduce(w, t, reduce)) {
        free(w);
        return NULL;
    }
    tg_retain(t);
    if (!w->nccl) progress_add(w);
    return w;
}

bool tg_dist_test(tg_dist_work *w) {
    if (!w) return true;
    return poll_work(w) != 0;
}

tg_status tg_dist_wait(tg_dist_work *w) {
    if (!w) return TG_OK;
    tg_status status = finish(w);
    progress_remove(w);
    /* A failed NCCL work keeps its handle: making tapegrad's stream wait for a
     * collective that will not end would hang the next kernel instead of reporting. */
    tg_release(w->tensor);
    free(w);
    return status;
}

/* [world * d0, ...] or [d0 / world, ...] on t's device and dtype. */
static tg_tensor *resized_dim0(tg_tensor *t, int64_t d0) {
    tg_shape shape = t->shape;
    shape.dims[0] = d0;
    return tg_empty(shape, (tg_opts){.dtype = t->dtype, .device = t->storage->device});
}

tg_tensor *tg_dist_all_gather(tg_tensor *t) {
    const char *op = "tg_dist_all_gather";
    if (check_tensor(op, t, false, TG_DIST_SUM)) return NULL;
    if (t->shape.ndim == 0) return tg_error("%s: the tensor is 0-dim; ranks are stacked along dim 0", op), NULL;
    if (agree_on_call(op, CALL_ALL_GATHER, t, tg_numel(t), 0, 0)) return NULL;
    tg_tensor *out = resized_dim0(t, t->shape.dims[0] * dist.world_size);
    if (!out) return NULL;
    tg_dist_work w = {.tensor = out, .name = op};
    size_t count = (size_t)tg_numel(t);
    if (is_cuda(t)) {
        if (start_cuda(&w, TG_NCCL_ALL_GATHER, tg_data_ptr(t), tg_data_ptr(out), count, t->dtype, 0)) return NULL;
    } else {
        int code = LOCKED(MPI_Iallgather(tg_data_ptr(t), (int)count, mpi_type(t->dtype), tg_data_ptr(out), (int)count,
                                         mpi_type(t->dtype), dist.comm, &w.request));
        if (code != MPI_SUCCESS) return mpi_failed(op, code), NULL;
    }
    return finish(&w) ? NULL : out;
}

tg_tensor *tg_dist_reduce_scatter(tg_tensor *t, tg_dist_op reduce) {
    const char *op = "tg_dist_reduce_scatter";
    if (check_tensor(op, t, true, reduce)) return NULL;
    if (t->shape.ndim == 0 || t->shape.dims[0] % dist.world_size != 0)
        return tg_error("%s: dim 0 (%lld) must be divisible by the world size %d", op,
                        t->shape.ndim ? (long long)t->shape.dims[0] : 0LL, dist.world_size),
               NULL;
    if (agree_on_call(op, CALL_REDUCE_SCATTER, t, tg_numel(t), (int)reduce, 0)) return NULL;
    tg_tensor *out = resized_dim0(t, t->shape.dims[0] / dist.world_size);
    if (!out) return NULL;
    tg_dist_work w = {.tensor = out, .op = reduce, .name = op};
    size_t count = (size_t)tg_numel(out);
    if (is_cuda(t)) {
        if (start_cuda(&w, TG_NCCL_REDUCE_SCATTER, tg_data_ptr(t), tg_data_ptr(out), count, t->dtype, 0)) return NULL;
    } else {
        int code = LOCKED(MPI_Ireduce_scatter_block(tg_data_ptr(t), tg_data_ptr(out), (int)count, mpi_type(t->dtype),
                                                    mpi_op(reduce), dist.comm, &w.request));
        if (code != MPI_SUCCESS) return mpi_failed(op, code), NULL;
    }
    return finish(&w) ? NULL : out;
}
