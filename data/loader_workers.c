/* Worker threads of the loader (see data/loader_workers.h): one mutex and two condition
 * variables; slots of a ring indexed by batch % capacity. */
#include "data/loader_workers.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/scope.h"

typedef enum { SLOT_FREE = 0, SLOT_BUSY, SLOT_READY, SLOT_FAILED } slot_state;

typedef struct {
    slot_state state;
    int64_t batch;
    int worker;
    tg_tensor *x, *y; /* owned while READY */
    char *message;    /* FAILED: the worker's error (malloc'd) */
} slot;

typedef struct {
    tg_loader_workers *pool;
    int id;
    tg_mt19937 gen;
    int64_t next; /* the next batch this worker makes in the current pass */
} worker;

struct tg_loader_workers {
    pthread_mutex_t mu;
    pthread_cond_t work; /* workers wait here: a pass started, a slot freed, quit */
    pthread_cond_t done; /* the taker waits here: a batch is ready */
    int n, capacity;
    pthread_t *threads;
    int started; /* threads running */
    worker *workers;
    slot *slots;
    uint64_t pass; /* bumped by start and stop: a worker drops a batch of an older pass */
    bool active, quit;
    int64_t end, deliver; /* the pass's end, and the batch taken next */
    tg_batch_maker make;
    void *ctx;
};

static void release_slot(slot *s) {
    tg_release(s->x);
    tg_release(s->y);
    free(s->message);
    *s = (slot){0};
}

static void *worker_main(void *arg) {
    worker *me = arg;
    tg_loader_workers *p = me->pool;
    sigset_t all; /* signals go to the program's own threads */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_mutex_lock(&p->mu);
    while (!p->quit) {
        int64_t b = me->next;
        if (!p->active || b >= p->end || b >= p->deliver + p->capacity) {
            pthread_cond_wait(&p->work, &p->mu);
            continue;
        }
        slot *s = &p->slots[b % p->capacity];
        if (s->state != SLOT_FREE) { /* its previous batch is not taken yet */
            pthread_cond_wait(&p->work, &p->mu);
            continue;
        }
        *s = (slot){.state = SLOT_BUSY, .batch = b, .worker = me->id};
        me->next += p->n;
        uint64_t pass = p->pass;
        pthread_mutex_unlock(&p->mu);
        tg_tensor *x = NULL, *y = NULL;
        tg_clear_error();
        bool ok = p->make(p->ctx, b, &me->gen, &x, &y);
        char *message = ok ? NULL : strdup(tg_last_error()[0] ? tg_last_error() : "unknown error");
        pthread_mutex_lock(&p->mu);
        if (pass != p->pass) { /* dropped meanwhile */
            tg_release(x);
            tg_release(y);
            free(message);
            continue;
        }
        s->state = ok ? SLOT_READY : SLOT_FAILED;
        s->x = x;
        s->y = y;
        s->message = message;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

tg_loader_workers *tg_loader_workers_new(int n, int prefetch_factor, uint64_t base_seed, tg_batch_maker make,
                                         void *ctx) {
    tg_loader_workers *p = calloc(1, sizeof *p);
    int capacity = n * prefetch_factor;
    if (p) {
        p->threads = calloc((size_t)n, sizeof *p->threads);
        p->workers = calloc((size_t)n, sizeof *p->workers);
        p->slots = calloc((size_t)capacity, sizeof *p->slots);
    }
    if (!p || !p->threads || !p->workers || !p->slots) {
        if (p) free(p->threads), free(p->workers), free(p->slots);
        free(p);
        return tg_error("tg_loader_next: out of memory for %d workers", n), NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->n = n;
    p->capacity = capacity;
    p->make = make;
    p->ctx = ctx;
    for (int i = 0; i < n; i++) {
        p->workers[i] = (worker){.pool = p, .id = i};
        /* torch/utils/data/_utils/worker.py: seed = base_seed + worker_id; torch.manual_seed(seed) */
        tg_mt19937_seed(&p->workers[i].gen, base_seed + (uint64_t)i);
    }
    for (int i = 0; i < n; i++) {
        int rc = pthread_create(&p->threads[i], NULL, worker_main, &p->workers[i]);
        if (rc != 0) {
            tg_error("tg_loader_next: cannot start worker %d of %d: %s", i, n, strerror(rc));
            tg_loader_workers_free(p);
            return NULL;
        }
        p->started++;
    }
    return p;
}

/* With the lock held. */
static void stop_locked(tg_loader_workers *p) {
    p->pass++;
    p->active = false;
    for (int i = 0; i < p->capacity; i++) release_slot(&p->slots[i]);
}

void tg_loader_workers_start(tg_loader_workers *p, int64_t first, int64_t end) {
    pthread_mutex_lock(&p->mu);
    stop_locked(p);
    p->active = true;
    p->end = end;
    p->deliver = first;
    for (int i = 0; i < p->n; i++) p->workers[i].next = first + i;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
}

bool tg_loader_workers_expects(const tg_loader_workers *p, int64_t batch) {
    /* Only the loader's thread writes active and deliver, so it reads them unlocked. */
    return p && p->active && p->deliver == batch;
}

tg_status tg_loader_workers_take(tg_loader_workers *p, tg_tensor **x, tg_tensor **y) {
    *x = *y = NULL;
    pthread_mutex_lock(&p->mu);
    slot *s = &p->slots[p->deliver % p->capacity];
    while (!(s->batch == p->deliver && (s->state == SLOT_READY || s->state == SLOT_FAILED)))
        pthread_cond_wait(&p->done, &p->mu);
    tg_status status = TG_OK;
    if (s->state == SLOT_READY) {
        *x = s->x;
        *y = s->y;
        s->x = s->y = NULL;
    } else {
        status =
            tg_error("tg_loader_next: worker %d failed on batch %lld: %s", s->worker, (long long)s->batch, s->message);
    }
    release_slot(s);
    p->deliver++;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    return status;
}

void tg_loader_workers_stop(tg_loader_workers *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    stop_locked(p);
    pthread_mutex_unlock(&p->mu);
}

void tg_loader_workers_free(tg_loader_workers *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    stop_locked(p);
    p->quit = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p->workers);
    free(p->slots);
    free(p);
}
