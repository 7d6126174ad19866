/* The fused attention's CPU kernel for one element type, included once per dtype by
 * ops/cpu/attention.c (C's stand-in for a template: ordinary static functions whose
 * names end in ATT_SFX), with ATT_T (float, double), ATT_SFX (f32, f64), ATT_GEMM
 * (tg_gemm_f32, tg_gemm_f64), ATT_EXP (expf, exp) and ATT_FAST_FORWARD / _BACKWARD (a
 * faster path for the job, returning false where it does not apply) defined. No include
 * guard, on purpose. See ops/cpu/attention.h for the algorithm and ops/attention_formulas.h for
 * the per-row formulas both devices share. */

#define ATT_CAT2(a, b) a##_##b
#define ATT_CAT(a, b) ATT_CAT2(a, b)
#define ATT_FN(name) ATT_CAT(name, ATT_SFX)

/* The mask and is_causal applied to a score block s [bi, bj] (row stride lds) of rows
 * i0.. and keys j0..; mask: this problem's start. Shared by both kernels' score blocks. */
static void ATT_FN(mask_block)(const tg_attn_plan *p, const void *mask, int64_t i0, int64_t bi, int64_t j0, int64_t bj,
                               ATT_T *s, int64_t lds) {
    if (p->mask_kind == TG_ATTN_MASK_BOOL) {
        const bool *m = mask;
        for (int64_t r = 0; r < bi; r++)
            for (int64_t c = 0; c < bj; c++)
                s[r * lds + c] = (ATT_T)tg_attn_masked_score(s[r * lds + c], TG_ATTN_MASK_BOOL,
                                                             m[(i0 + r) * p->mask_row + (j0 + c) * p->mask_col]);
    } else if (p->mask_kind == TG_ATTN_MASK_ADD) {
        const ATT_T *m = mask;
        for (int64_t r = 0; r < bi; r++) {
            const ATT_T *mr = m + (i0 + r) * p->mask_row + j0 * p->mask_col;
            for (int64_t c = 0; c < bj; c++) s[r * lds + c] += mr[c * p->mask_col];
        }
    }
    if (p->causal)
        for (int64_t r = 0; r < bi; r++) { /* keys from the row's causal end on are hidden */
            int64_t c = tg_attn_causal_end(i0 + r, j0 + bj) - j0;
            for (c = c < 0 ? 0 : c; c < bj; c++) s[r * lds + c] = (ATT_T)-INFINITY;
        }
}

/* s [bi, ATTN_BLOCK_K] = scale * q[i0 .. i0+bi) k[j0 .. j0+bj)^T, masked (mask, causal).
 * q, k, mask: this problem's starts. */
static void ATT_FN(score_block)(const tg_attn_plan *p, const ATT_T *q, const ATT_T *k, const void *mask, int64_t i0,
                                int64_t bi, int64_t j0, int64_t bj, ATT_T *s) {
    ATT_GEMM(false, true, bi, bj, p->e, (ATT_T)p->scale, q + i0 * p->q_row, p->q_row, k + j0 * p->k_row, p->k_row,
             (ATT_T)0, s, ATTN_BLOCK_K);
    ATT_FN(mask_block)(p, mask, i0, bi, j0, bj, s, ATTN_BLOCK_K);
}

/* The keys a query block [i0, i0 + bi) may see: all, or under is_causal up to its last row. */
static int64_t ATT_FN(keys_end)(const tg_attn_plan *p, int64_t i0, int64_t bi) {
    return p->causal ? tg_attn_causal_end(i0 + bi - 1, p->s) : p->s;
}

/* One row of a block: p = exp(s - shift) in place; returns the row's sum (8 partial
 * sums, so that the loops vectorise without reassociation flags). */
static inline ATT_T ATT_FN(exp_row)(ATT_T *restrict row, int64_t n, ATT_T shift) {
    for (int64_t c = 0; c < n; c++) row[c] = ATT_EXP(row[c] - shift);
    ATT_T part[8] = {0, 0, 0, 0, 0, 0, 0, 0}, sum = 0;
    int64_t c = 0;
    for (; c + 8 <= n; c += 8)
        for (int u = 0; u < 8; u++) part[u] += row[c + u];
    for (; c < n; c++) sum += row[c];
    for (int u = 0; u < 8; u++) sum += part[u];
    return sum;
}

/* One row of the backward's block: p = exp(s - lse) in place, ds = p * (dp - delta) in
 * place of dp (tg_attn_dscore, written out so that it vectorises). */
static inline void ATT_FN(dscore_row)(ATT_T *restrict pr, ATT_T *restrict dr, int64_t n, ATT_T lse, ATT_T delta) {
    for (int64_t c = 0; c < n; c++) pr[c] = ATT_EXP(pr[c] - lse);
    for (int64_t c = 0; c < n; c++) dr[c] = pr[c] * (dr[c] - delta);
}

/* rows x width elements, rows ld apart, set to 0 (a gradient block in its result layout). */
static inline void ATT_FN(zero_rows)(ATT_T *p, int64_t rows, int64_t width, int64_t ld) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t x = 0; x < width; x++) p[r * ld + x] = 0;
}

typedef struct ATT_FN(attn_job_s) {
    const tg_attn_plan *p;
    const int64_t *off;
    const ATT_T *q, *k, *v, *out, *dout, *lse;
    const void *mask;
    ATT_T *res, *lse_out, *delta, *dq, *dk, *dv;
} ATT_FN(attn_job);

static const void *ATT_FN(mask_of)(const ATT_FN(attn_job) *j, int64_t b) {
    if (!j->mask) return NULL;
    size_t elem = j->p->mask_kind == TG_ATTN_MASK_BOOL ? sizeof(bool) : sizeof(ATT_T);
    return (const char *)j->mask + j->off[3 * j->p->batch + b] * (int64_t)elem;
}

/* A row's max (NaN ignored). */
static ATT_T ATT_FN(row_max)(const ATT_T *row, int64_t n) {
    ATT_T mx = (ATT_T)-INFINITY;
    for (int64_t c = 0; c < n; c++) mx = row[c] > mx ? row[c] : mx;
    return mx;
}

/* The keys of a block [j0, j0 + bj) that query i sees: under is_causal the ones before its
 * causal end (its other scores are -inf, their p exactly 0), else all. */
static inline int64_t ATT_FN(row_keys)(const tg_attn_plan *p, int64_t i, int64_t j0, int64_t bj) {
    if (!p->causal) return bj;
    int64_t n = tg_attn_causal_end(i, p->s) - j0;
    return n < 0 ? 0 : n < bj ? n : bj;
}

/* The online softmax over one score block s [bi, bj] (queries from i0, keys from j0; row
 * stride lds), rows' running max m and sum l: s becomes exp(s - m_new) (the causally
 * hidden tail of a row is set to 0 without an exp), and the rows of the output
 * accumulator acc [bi, ev] are rescaled when their max rose (the block's P V is added
 * after). The row loops are parameters (the generic ones above, or
 * ops/cpu/attention_avx2.h's). */
static inline void ATT_FN(online_rows)(const tg_attn_plan *p, int64_t i0, int64_t j0, ATT_T *s, int64_t lds, int64_t bi,
                                       int64_t bj, double *m, double *l, ATT_T *acc,
                                       ATT_T (*max_of)(const ATT_T *, int64_t),
                                       ATT_T (*exp_of)(ATT_T *restrict, int64_t, ATT_T)) {
    for (int64_t r = 0; r < bi; r++) {
        int64_t n = ATT_FN(row_keys)(p, i0 + r, j0, bj);
        ATT_T *row = s + r * lds, block_max = max_of(row, n);
        double rescale;
        m[r] = tg_attn_online_max(m[r], (double)block_max, &rescale);
        ATT_T sum = exp_of(row, n, (ATT_T)tg_attn_shift(m[r]));
        for (int64_t c = n; c < bj; c++) row[c] = 0;
        l[r] = l[r] * rescale + (double)sum;
        if (rescale != 1.0)
            for (int64_t x = 0; x < p->ev; x++) acc[r * p->ev + x] *= (ATT_T)rescale;
    }
}

/* A finished query block: out = acc / l and the rows' log-sum-exp. */
static void ATT_FN(finish_rows)(const ATT_FN(attn_job) *j, int64_t b, int64_t i0, int64_t bi, const double *m,
                                const double *l, const ATT_T *acc) {
    const tg_attn_plan *p = j->p;
    int64_t ldo = tg_attn_out_row(p);
    ATT_T *out = j->res + tg_attn_result_start(p, b, p->l, p->ev, ldo) + i0 * ldo;
    for (int64_t r = 0; r < bi; r++) {
        ATT_T inv = (ATT_T)(1.0 / l[r]); /* 1 / 0 = inf: a fully masked row gives 0 * inf = NaN */
        for (int64_t x = 0; x < p->ev; x++) out[r * ldo + x] = l[r] == 0 ? (ATT_T)NAN : acc[r * p->ev + x] * inv;
        j->lse_out[b * p->l + i0 + r] = (ATT_T)tg_attn_row_lse(m[r], l[r]);
    }
}

/* Forward of tasks (problem, query block) in [begin, end). */
static void ATT_FN(forward_chunk)(int64_t begin, int64_t end, void *ctx) {
    const ATT_FN(attn_job) *j = ctx;
    const tg_attn_plan *p = j->p;
    int64_t nq = (p->l + ATTN_BLOCK_Q - 1) / ATTN_BLOCK_Q;
    ATT_T *s = malloc(sizeof(ATT_T) * (ATTN_BLOCK_Q * ATTN_BLOCK_K + ATTN_BLOCK_Q * p->ev) +
                      2 * sizeof(double) * ATTN_BLOCK_Q);
    if (!s) return tg_kernel_fail("out of memory for the attention's score block");
    ATT_T *acc = s + ATTN_BLOCK_Q * ATTN_BLOCK_K;
    double *m = (double *)(acc + ATTN_BLOCK_Q * p->ev), *l = m + ATTN_BLOCK_Q;
    for (int64_t t = begin; t < end; t++) {
        int64_t b = t / nq, i0 = t % nq * ATTN_BLOCK_Q, bi = p->l - i0 < ATTN_BLOCK_Q ? p->l - i0 : ATTN_BLOCK_Q;
        const ATT_T *q = j->q + j->off[b], *k = j->k + j->off[p->batch + b], *v = j->v + j->off[2 * p->batch + b];
        const void *mask = ATT_FN(mask_of)(j, b);
        for (int64_t r = 0; r < bi; r++) m[r] = -INFINITY, l[r] = 0;
        for (int64_t x = 0; x < bi * p->ev; x++) acc[x] = 0;
        int64_t kend = ATT_FN(keys_end)(p, i0, bi);
        for (int64_t j0 = 0; j0 < kend; j0 += ATTN_BLOCK_K) {
            int64_t bj = kend - j0 < ATTN_BLOCK_K ? kend - j0 : ATTN_BLOCK_K;
            ATT_FN(score_block)(p, q, k, mask, i0, bi, j0, bj, s);
            ATT_FN(online_rows)(p, i0, j0, s, ATTN_BLOCK_K, bi, bj, m, l, acc, ATT_FN(row_max), ATT_FN(exp_row));
            ATT_GEMM(false, false, bi, p->ev, bj, (ATT_T)1, s, ATTN_BLOCK_K, v + j0 * p->v_row, p->v_row, (ATT_T)1, acc,
                     p->ev);
        }
        ATT_FN(finish_rows)(j, b, i0, bi, m, l, acc);
    }
    free(s);
}

/* p [bi, ATTN_BLOCK_K] = exp(s - lse) and ds = p * (dout v^T - delta) for a block (the
 * backward's recomputation, shared by both passes). s is overwritten by p. */
static void ATT_FN(grad_block)(const ATT_FN(attn_job) *j, int64_t b, int64_t i0, int64_t bi, int64_t j0, int64_t bj,
                               ATT_T *s, ATT_T *ds) {
    const tg_attn_plan *p = j->p;
    const ATT_T *q = j->q + j->off[b], *k = j->k + j->off[p->batch + b], *v = j->v + j->off[2 * p->batch + b];
    ATT_FN(score_block)(p, q, k, ATT_FN(mask_of)(j, b), i0, bi, j0, bj, s);
    int64_t ldo = tg_attn_out_row(p);
    const ATT_T *dout = j->dout + tg_attn_result_start(p, b, p->l, p->ev, ldo) + i0 * ldo;
    ATT_GEMM(false, true, bi, bj, p->ev, (ATT_T)1, dout, ldo, v + j0 * p->v_row, p->v_row, (ATT_T)0, ds, ATTN_BLOCK_K);
    for (int64_t r = 0; r < bi; r++) ATT_FN(dscore_row)
    (s + r * ATTN_BLOCK_K, ds + r * ATTN_BLOCK_K, bj, j->lse[b * p->l + i0 + r], j->delta[b * p->l + i0 + r]);
}

/* delta = rowsum(dout * out), rows [begin, end) of batch * l. */
static void ATT_FN(delta_chunk)(int64_t begin, int64_t end, void *ctx) {
    const ATT_FN(attn_job) *j = ctx;
    const tg_attn_plan *p = j->p;
    int64_t ev = p->ev, ldo = tg_attn_out_row(p);
    for (int64_t r = begin; r < end; r++) {
        int64_t at = tg_attn_result_start(p, r / p->l, p->l, ev, ldo) + r % p->l * ldo;
        ATT_T d = 0;
        for (int64_t x = 0; x < ev; x++) d += j->dout[at + x] * j->out[at + x];
        j->delta[r] = d;
    }
}

/* dk, dv of tasks (problem, key block) in [begin, end): over every query block that sees it. */
static void ATT_FN(dkdv_chunk)(int64_t begin, int64_t end, void *ctx) {
    const ATT_FN(attn_job) *j = ctx;
    const tg_attn_plan *p = j->p;
    int64_t nk = (p->s + ATTN_BLOCK_K - 1) / ATTN_BLOCK_K;
    ATT_T *s = malloc(sizeof(ATT_T) * 2 * ATTN_BLOCK_Q * ATTN_BLOCK_K), *ds = s + ATTN_BLOCK_Q * ATTN_BLOCK_K;
    if (!s) return tg_kernel_fail("out of memory for the attention's score block");
    for (int64_t t = begin; t < end; t++) {
        int64_t b = t / nk, j0 = t % nk * ATTN_BLOCK_K, bj = p->s - j0 < ATTN_BLOCK_K ? p->s - j0 : ATTN_BLOCK_K;
        int64_t ldk = tg_attn_grad_row(p, p->e), ldv = tg_attn_grad_row(p, p->ev), ldo = tg_attn_out_row(p);
        ATT_T *dk = j->dk + tg_attn_result_start(p, b, p->s, p->e, ldk) + j0 * ldk;
        ATT_T *dv = j->dv + tg_attn_result_start(p, b, p->s, p->ev, ldv) + j0 * ldv;
        ATT_FN(zero_rows)(dk, bj, p->e, ldk);
        ATT_FN(zero_rows)(dv, bj, p->ev, ldv);
        const ATT_T *q = j->q + j->off[b];
        int64_t first = p->causal ? j0 / ATTN_BLOCK_Q * ATTN_BLOCK_Q : 0; /* query i sees key j only if i >= j */
        for (int64_t i0 = first; i0 < p->l; i0 += ATTN_BLOCK_Q) {
            int64_t bi = p->l - i0 < ATTN_BLOCK_Q ? p->l - i0 : ATTN_BLOCK_Q;
            ATT_FN(grad_block)(j, b, i0, bi, j0, bj, s, ds);
            const ATT_T *dout = j->dout + tg_attn_result_start(p, b, p->l, p->ev, ldo) + i0 * ldo;
            ATT_GEMM(true, false, bj, p->ev, bi, (ATT_T)1, s, ATTN_BLOCK_K, dout, ldo, (ATT_T)1, dv, ldv);
            ATT_GEMM(true, false, bj, p->e, bi, (ATT_T)p->scale, ds, ATTN_BLOCK_K, q + i0 * p->q_row, p->q_row,
                     (ATT_T)1, dk, ldk);
        }
    }
    free(s);
}

/* dq of tasks (problem, query block) in [begin, end). */
static void ATT_FN(dq_chunk)(int64_t begin, int64_t end, void *ctx) {
    const ATT_FN(attn_job) *j = ctx;
    const tg_attn_plan *p = j->p;
    int64_t nq = (p->l + ATTN_BLOCK_Q - 1) / ATTN_BLOCK_Q;
    ATT_T *s = malloc(sizeof(ATT_T) * 2 * ATTN_BLOCK_Q * ATTN_BLOCK_K), *ds = s + ATTN_BLOCK_Q * ATTN_BLOCK_K;
    if (!s) return tg_kernel_fail("out of memory for the attention's score block");
    for (int64_t t = begin; t < end; t++) {
        int64_t b = t / nq, i0 = t % nq * ATTN_BLOCK_Q, bi = p->l - i0 < ATTN_BLOCK_Q ? p->l - i0 : ATTN_BLOCK_Q;
        int64_t ldq = tg_attn_grad_row(p, p->e);
        ATT_T *dq = j->dq + tg_attn_result_start(p, b, p->l, p->e, ldq) + i0 * ldq;
        ATT_FN(zero_rows)(dq, bi, p->e, ldq);
        const ATT_T *k = j->k + j->off[p->batch + b];
        int64_t kend = ATT_FN(keys_end)(p, i0, bi);
        for (int64_t j0 = 0; j0 < kend; j0 += ATTN_BLOCK_K) {
            int64_t bj = kend - j0 < ATTN_BLOCK_K ? kend - j0 : ATTN_BLOCK_K;
            ATT_FN(grad_block)(j, b, i0, bi, j0, bj, s, ds);
            ATT_GEMM(false, false, bi, p->e, bj, (ATT_T)p->scale, ds, ATTN_BLOCK_K, k + j0 * p->k_row, p->k_row,
                     (ATT_T)1, dq, ldq);
        }
    }
    free(s);
}

/* One thread for small calls (the pool's hand-off costs more than they do). */
static int64_t ATT_FN(grain)(const tg_attn_plan *p, int64_t tasks) {
    return p->batch * p->l * p->s * (p->e + p->ev) >= (INT64_C(1) << 18) ? 1 : tasks;
}

void ATT_FN(tg_cpu_attention_forward)(const tg_attn_plan *plan, const int64_t *offsets, const ATT_T *q, const ATT_T *k,
                                      const ATT_T *v, const void *mask, ATT_T *out, ATT_T *lse) {
    ATT_FN(attn_job) j = {.p = plan, .off = offsets, .q = q, .k = k, .v = v, .mask = mask, .res = out, .lse_out = lse};
    if (ATT_FAST_FORWARD(&j)) return;
    int64_t tasks = plan->batch * ((plan->l + ATTN_BLOCK_Q - 1) / ATTN_BLOCK_Q);
    tg_parallel_for(tasks, ATT_FN(grain)(plan, tasks), ATT_FN(forward_chunk), &j);
}

void ATT_FN(tg_cpu_attention_backward)(const tg_attn_plan *plan, const int64_t *offsets, const ATT_T *q, const ATT_T *k,
                                       const ATT_T *v, const void *mask, const ATT_T *out, const ATT_T *dout,
                                       const ATT_T *lse, ATT_T *delta, ATT_T *dq, ATT_T *dk, ATT_T *dv) {
    ATT_FN(attn_job)
    j = {.p = plan,
         .off = offsets,
         .q = q,
         .k = k,
         .v = v,
         .mask = mask,
         .out = out,
         .dout = dout,
         .lse = lse,
         .delta = delta,
         .dq = dq,
         .dk = dk,
         .dv = dv};
    int64_t rows = plan->batch * plan->l;
    tg_parallel_for(rows, rows * plan->ev >= 32768 ? 1 : rows, ATT_FN(delta_chunk), &j);
    if (ATT_FAST_BACKWARD(&j)) return;
    int64_t kv_tasks = plan->batch * ((plan->s + ATTN_BLOCK_K - 1) / ATTN_BLOCK_K);
    tg_parallel_for(kv_tasks, ATT_FN(grain)(plan, kv_tasks), ATT_FN(dkdv_chunk), &j);
    int64_t q_tasks = plan->batch * ((plan->l + ATTN_BLOCK_Q - 1) / ATTN_BLOCK_Q);
    tg_parallel_for(q_tasks, ATT_FN(grain)(plan, q_tasks), ATT_FN(dq_chunk), &j);
}

#undef ATT_FN
#undef ATT_CAT
#undef ATT_CAT2
