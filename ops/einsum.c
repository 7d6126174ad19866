/* einsum (see ops/einsum.h). Labels: 0..51 for A-Z a-z (ASCII order), 52.. for the
 * dims "..." stands for, right-aligned across operands. */
#include "ops/einsum.h"

#include <stdbool.h>
#include <string.h>

#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/slice.h"

#define LETTERS 52
#define MAX_LABELS (LETTERS + TG_MAX_DIMS)
#define MAX_OPERANDS 16

typedef struct {
    tg_tensor *t;
    int n;                   /* dims = labels */
    int labels[TG_MAX_DIMS]; /* label of each dim */
} term;

static int letter_label(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return 26 + c - 'a';
    return -1;
}

static int find(const int *labels, int n, int l) {
    for (int i = 0; i < n; i++)
        if (labels[i] == l) return i;
    return -1;
}

/* Parses one term (up to ',' '-' or the end) against a tensor of `ndim` dims (-1 for
 * the output, whose ellipsis takes `ell` labels). Returns the next position, or NULL. */
static const char *parse_term(const char *op, const char *eq, const char *p, int ndim, int ell, int *labels, int *n,
                              bool *has_ellipsis) {
    int before[TG_MAX_DIMS + 1], nb = 0, after[TG_MAX_DIMS + 1], na = 0;
    *has_ellipsis = false;
    for (; *p && *p != ',' && *p != '-'; p++) {
        if (*p == ' ') continue;
        if (*p == '.') {
            if (*has_ellipsis || strncmp(p, "...", 3) != 0)
                return tg_error("%s: \"%s\": expected one \"...\" per term", op, eq), NULL;
            *has_ellipsis = true;
            p += 2;
            continue;
        }
        int l = letter_label(*p);
        if (l < 0) return tg_error("%s: \"%s\": '%c' is not a letter", op, eq, *p), NULL;
        if ((*has_ellipsis ? na : nb) >= TG_MAX_DIMS) return tg_error("%s: \"%s\": too many letters", op, eq), NULL;
        if (*has_ellipsis) after[na++] = l;
        else before[nb++] = l;
    }
    int e = ndim >= 0 ? ndim - nb - na : ell; /* dims the ellipsis covers */
    if (ndim >= 0 && (e < 0 || (!*has_ellipsis && e != 0)))
        return tg_error("%s: \"%s\": a term of %d letters%s for an operand of %d dims", op, eq, nb + na,
                        *has_ellipsis ? " and \"...\"" : "", ndim),
               NULL;
    if (nb + e + na > TG_MAX_DIMS) return tg_error("%s: \"%s\": too many dims", op, eq), NULL;
    *n = 0;
    for (int i = 0; i < nb; i++) labels[(*n)++] = before[i];
    for (int i = 0; *has_ellipsis && i < e; i++) labels[(*n)++] = LETTERS + (ell - e) + i;
    for (int i = 0; i < na; i++) labels[(*n)++] = after[i];
    return p;
}

/* A letter twice in one term: its diagonal (sizes must agree), until labels are unique. */
static bool take_diagonals(const char *op, const char *eq, term *a) {
    for (int i = 0; i < a->n; i++) {
        int j = find(a->labels + i + 1, a->n - i - 1, a->labels[i]);
        if (j < 0) continue;
        j += i + 1;
        int64_t si = a->t->shape.dims[i], sj = a->t->shape.dims[j];
        if (si != sj)
            return !tg_error("%s: \"%s\": a repeated letter spans dims of sizes %lld and %lld", op, eq, (long long)si,
                             (long long)sj);
        int l = a->labels[i];
        a->t = tg_diagonal(a->t, 0, i, j); /* removes dims i and j, appends the diagonal */
        if (!a->t) return false;
        int k = 0;
        for (int d = 0; d < a->n; d++)
            if (d != i && d != j) a->labels[k++] = a->labels[d];
        a->labels[k++] = l;
        a->n = k;
        i = -1; /* start over */
    }
    return true;
}

/* Sums the dims whose labels `keep` does not hold. */
static bool sum_unkept(term *a, const bool *keep) {
    int dims[TG_MAX_DIMS], nd = 0, k = 0;
    for (int d = 0; d < a->n; d++)
        if (!keep[a->labels[d]]) dims[nd++] = d;
    if (nd == 0) return true;
    a->t = tg_sum_dims(a->t, dims, nd, false);
    for (int d = 0; d < a->n; d++)
        if (keep[a->labels[d]]) a->labels[k++] = a->labels[d];
    a->n = k;
    return a->t != NULL;
}

/* a's dims in the order of `order` (a permutation of a's labels). */
static tg_tensor *permuted(const term *a, const int *order) {
    int perm[TG_MAX_DIMS];
    for (int i = 0; i < a->n; i++) perm[i] = find(a->labels, a->n, order[i]);
    return tg_permute(a->t, perm);
}

/* The product of a's sizes for labels[0..n). */
static int64_t size_product(const term *a, const int *labels, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= a->t->shape.dims[find(a->labels, a->n, labels[i])];
    return p;
}

/* a (x) b summed over their shared labels that `keep` does not hold: one batched
 * matmul of [batch, a_only, shared] by [batch, shared, b_only]. */
static bool contract(const char *op, const char *eq, term *a, term *b, const bool *keep, term *out) {
    int batch[TG_MAX_DIMS], nbatch = 0, shared[TG_MAX_DIMS], nshared = 0;
    int a_only[TG_MAX_DIMS], na = 0, b_only[TG_MAX_DIMS], nb = 0;
    for (int i = 0; i < a->n; i++) {
        int l = a->labels[i], j = find(b->labels, b->n, l);
        if (j < 0) {
            a_only[na++] = l;
            continue;
        }
        int64_t sa = a->t->shape.dims[i], sb = b->t->shape.dims[j];
        if (sa != sb && sa != 1 && sb != 1)
            return !tg_error("%s: \"%s\": a letter spans dims of sizes %lld and %lld", op, eq, (long long)sa,
                             (long long)sb);
        if (sa != sb) { /* size 1 broadcasts */
            term *small = sa == 1 ? a : b;
            tg_shape s = small->t->shape;
            s.dims[sa == 1 ? i : j] = sa == 1 ? sb : sa;
            small->t = tg_expand(small->t, s);
            if (!small->t) return false;
        }
        if (keep[l]) batch[nbatch++] = l;
        else shared[nshared++] = l;
    }
    for (int j = 0; j < b->n; j++)
        if (find(a->labels, a->n, b->labels[j]) < 0) b_only[nb++] = b->labels[j];
    if (nbatch + na + nb > TG_MAX_DIMS) return !tg_error("%s: \"%s\": the result has too many dims", op, eq);
    int order_a[TG_MAX_DIMS], order_b[TG_MAX_DIMS], k = 0;
    for (int i = 0; i < nbatch; i++) order_a[k++] = batch[i];
    for (int i = 0; i < na; i++) order_a[k++] = a_only[i];
    for (int i = 0; i < nshared; i++) order_a[k++] = shared[i];
    k = 0;
    for (int i = 0; i < nbatch; i++) order_b[k++] = batch[i];
    for (int i = 0; i < nshared; i++) order_b[k++] = shared[i];
    for (int i = 0; i < nb; i++) order_b[k++] = b_only[i];
    int64_t nbs = size_product(a, batch, nbatch), m = size_product(a, a_only, na);
    int64_t kk = size_product(a, shared, nshared), n = size_product(b, b_only, nb);
    tg_tensor *pa = tg_reshape(permuted(a, order_a), TG_SHAPE(nbs, m, kk));
    tg_tensor *pb = tg_reshape(permuted(b, order_b), TG_SHAPE(nbs, kk, n));
    tg_tensor *c = tg_matmul(pa, pb);
    tg_shape s = {0};
    out->n = 0;
    for (int i = 0; i < nbatch; i++) s.dims[s.ndim++] = a->t->shape.dims[find(a->labels, a->n, batch[i])];
    for (int i = 0; i < na; i++) s.dims[s.ndim++] = a->t->shape.dims[find(a->labels, a->n, a_only[i])];
    for (int i = 0; i < nb; i++) s.dims[s.ndim++] = b->t->shape.dims[find(b->labels, b->n, b_only[i])];
    for (int i = 0; i < nbatch; i++) out->labels[out->n++] = batch[i];
    for (int i = 0; i < na; i++) out->labels[out->n++] = a_only[i];
    for (int i = 0; i < nb; i++) out->labels[out->n++] = b_only[i];
    out->t = c ? tg_reshape(c, s) : NULL;
    return out->t != NULL;
}

tg_tensor *tg_einsum(const char *equation, tg_tensor *const *operands, int count) {
    const char *op = "tg_einsum";
    if (!equation) return tg_error("%s: the equation is NULL", op), NULL;
    if (count < 1 || count > MAX_OPERANDS || !operands)
        return tg_error("%s: \"%s\": expected 1 to %d operands, got %d", op, equation, MAX_OPERANDS, count), NULL;
    for (int i = 0; i < count; i++)
        if (tg_unusable_(operands[i])) return tg_error_unusable_input(op, operands[i], i), NULL;
    /* the widest ellipsis decides how many ellipsis labels there are */
    int ell = 0, terms = 1;
    for (const char *c = equation; *c && *c != '-'; c++) terms += *c == ',';
    if (terms != count)
        return tg_error("%s: \"%s\" has %d operand terms for %d operands", op, equation, terms, count), NULL;
    term t[MAX_OPERANDS];
    bool any_ellipsis = false, has;
    const char *p = equation;
    for (int pass = 0; pass < 2; pass++) { /* pass 0 measures the ellipses, pass 1 labels them */
        p = equation;
        for (int i = 0; i < count; i++) {
            int letters = 0;
            if (pass == 0) {
                for (const char *c = p; *c && *c != ',' && *c != '-'; c++) letters += letter_label(*c) >= 0;
                int e = operands[i]->shape.ndim - letters;
                if (e > ell) ell = e;
            }
            p = parse_term(op, equation, p, operands[i]->shape.ndim, ell, t[i].labels, &t[i].n, &has);
            if (!p) return NULL;
            any_ellipsis |= has;
            t[i].t = operands[i];
            if (*p == ',') p++;
        }
    }
    int out_labels[TG_MAX_DIMS], nout = 0;
    int uses[MAX_LABELS] = {0};
    for (int i = 0; i < count; i++)
        for (int d = 0; d < t[i].n; d++) uses[t[i].labels[d]]++;
    if (*p == '-') {
        if (p[1] != '>') return tg_error("%s: \"%s\": expected \"->\"", op, equation), NULL;
        p = parse_term(op, equation, p + 2, -1, ell, out_labels, &nout, &has);
        if (!p) return NULL;
        if (*p) return tg_error("%s: \"%s\": unexpected '%c' in the output", op, equation, *p), NULL;
        if (any_ellipsis && !has && ell > 0)
            return tg_error("%s: \"%s\": the output must contain \"...\" when an operand does", op, equation), NULL;
        for (int i = 0; i < nout; i++) {
            if (find(out_labels, i, out_labels[i]) >= 0)
                return tg_error("%s: \"%s\": an output letter appears twice", op, equation), NULL;
            if (!uses[out_labels[i]])
                return tg_error("%s: \"%s\": an output letter does not appear in the inputs", op, equation), NULL;
        }
    } else { /* implicit: the ellipsis dims, then the letters used once, in ASCII order */
        for (int l = LETTERS; any_ellipsis && l < LETTERS + ell; l++) out_labels[nout++] = l;
        for (int l = 0; l < LETTERS; l++)
            if (uses[l] == 1) {
                if (nout >= TG_MAX_DIMS) return tg_error("%s: \"%s\": too many output dims", op, equation), NULL;
                out_labels[nout++] = l;
            }
    }
    tg_tensor *result = NULL;
    TG_SCOPE {
        bool ok = true;
        for (int i = 0; ok && i < count; i++) ok = take_diagonals(op, equation, &t[i]);
        term acc = t[0];
        for (int i = 0; ok && i < count; i++) {
            /* labels needed after this step: the output's and those of the later operands */
            bool keep[MAX_LABELS] = {false};
            for (int k = 0; k < nout; k++) keep[out_labels[k]] = true;
            for (int j = i + 1; j < count; j++)
                for (int d = 0; d < t[j].n; d++) keep[t[j].labels[d]] = true;
            if (i == 0) {
                ok = sum_unkept(&acc, keep);
                continue;
            }
            bool keep_b[MAX_LABELS]; /* b keeps what is needed later or shared with acc */
            memcpy(keep_b, keep, sizeof keep_b);
            for (int d = 0; d < acc.n; d++) keep_b[acc.labels[d]] = true;
            ok = sum_unkept(&t[i], keep_b);
            bool keep_a[MAX_LABELS];
            memcpy(keep_a, keep, sizeof keep_a);
            for (int d = 0; ok && d < t[i].n; d++) keep_a[t[i].labels[d]] = true;
            ok = ok && sum_unkept(&acc, keep_a);
            term next;
            ok = ok && contract(op, equation, &acc, &t[i], keep, &next);
            if (ok) acc = next;
        }
        if (ok && acc.n != nout)
            ok = !tg_error("%s: \"%s\": internal error: %d dims left for %d output letters", op, equation, acc.n, nout);
        if (ok) {
            tg_tensor *r = permuted(&acc, out_labels);
            if (r) result = tg_scope_return(r == operands[0] ? tg_clone(r) : r);
        }
    }
    return result;
}
