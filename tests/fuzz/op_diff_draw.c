/* Drawing cases for the differential fuzzer: shapes within the case's size budget,
 * layouts (views of a leaf), and values in each input's domain. Every draw comes from
 * the case's own generator, so a (seed, case) pair always gives the same case. */
#include <math.h>
#include <string.h>

#include "op_diff.h"

/* splitmix64: tiny, and good enough to draw cases. */
uint64_t od_next(od_case *c) {
    uint64_t z = (c->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int64_t od_int(od_case *c, int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    return lo + (int64_t)(od_next(c) % (uint64_t)(hi - lo + 1));
}

double od_unif(od_case *c, double lo, double hi) { return lo + (hi - lo) * ((double)(od_next(c) >> 11) * 0x1.0p-53); }

bool od_coin(od_case *c, double p) { return od_unif(c, 0, 1) < p; }

int64_t od_dim(od_case *c) {
    if (c->max_size <= 0) return 0;
    double u = od_unif(c, 0, 1);
    if (u < 0.04) return 0; /* empty tensors: every op must give the empty result */
    if (u < 0.25) return 1; /* size-1 dims: broadcasting and squeezing edge cases */
    return od_int(c, 1, c->max_size);
}

tg_shape od_shape(od_case *c, int min_nd, int max_nd) {
    if (max_nd > c->max_ndim) max_nd = c->max_ndim;
    if (max_nd < min_nd) max_nd = min_nd;
    tg_shape s = {0};
    s.ndim = (int)od_int(c, min_nd, max_nd);
    for (int d = 0; d < s.ndim; d++) s.dims[d] = od_dim(c);
    return s;
}

tg_shape od_broadcastable(od_case *c, tg_shape s) {
    tg_shape b = {0};
    int drop = od_coin(c, 0.3) ? (int)od_int(c, 0, s.ndim) : 0;
    b.ndim = s.ndim - drop;
    for (int d = 0; d < b.ndim; d++) {
        b.dims[d] = s.dims[d + drop];
        if (od_coin(c, 0.4)) b.dims[d] = 1;
    }
    return b;
}

od_input *od_add(od_case *c, tg_shape shape, od_domain dom) {
    od_input *in = &c->in[c->n_in++];
    memset(in, 0, sizeof *in);
    in->shape = shape;
    in->dom = dom;
    return in;
}

int od_pick_dim(od_case *c, int ndim) {
    if (ndim == 0) return od_coin(c, 0.5) ? 0 : -1; /* a 0-dim tensor takes dim 0 and -1 */
    int d = (int)od_int(c, 0, ndim - 1);
    return od_coin(c, 0.5) ? d - ndim : d;
}

void od_draw_layouts(od_case *c) {
    for (int k = 0; k < c->n_in; k++) {
        od_input *in = &c->in[k];
        tg_shape s = in->shape;
        in->base = s;
        in->layout = LAYOUT_CONTIGUOUS;
        if (in->contiguous || od_coin(c, 0.4)) continue;
        od_layout l = (od_layout)od_int(c, 1, NUM_LAYOUTS - 1);
        if (s.ndim == 0 || (l == LAYOUT_TRANSPOSED && s.ndim < 2)) continue;
        in->layout = l;
        in->d0 = (int)od_int(c, 0, s.ndim - 1);
        switch (l) {
        case LAYOUT_TRANSPOSED:
            do in->d1 = (int)od_int(c, 0, s.ndim - 1);
            while (in->d1 == in->d0);
            in->base.dims[in->d0] = s.dims[in->d1];
            in->base.dims[in->d1] = s.dims[in->d0];
            break;
        case LAYOUT_STEPPED: in->base.dims[in->d0] = 2 * s.dims[in->d0] + 1; break;
        case LAYOUT_NARROWED: in->base.dims[in->d0] = s.dims[in->d0] + 2; break;
        case LAYOUT_EXPANDED: in->base = od_broadcastable(c, s); break;
        default: break;
        }
    }
}

tg_tensor *od_apply_layout(const od_input *in, tg_tensor *base) {
    switch (in->layout) {
    case LAYOUT_TRANSPOSED: return tg_transpose(base, in->d0, in->d1);
    case LAYOUT_STEPPED: return tg_slice(base, in->d0, 1, in->base.dims[in->d0], 2);
    case LAYOUT_NARROWED: return tg_narrow(base, in->d0, 2, in->shape.dims[in->d0]);
    case LAYOUT_EXPANDED: return tg_expand(base, in->shape);
    default: return base;
    }
}

/* bfloat16's round to nearest even of a float32, back as a double. */
static double round_bf16(double v) {
    float f = (float)v;
    if (isnan(f)) return v;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    bits += 0x7fff + ((bits >> 16) & 1);
    bits &= 0xffff0000u;
    memcpy(&f, &bits, 4);
    return f;
}

void od_draw_values(od_case *c, int k, double *values, int64_t n, tg_dtype dtype) {
    const od_input *in = &c->in[k];
    for (int64_t j = 0; j < n; j++) {
        double v;
        switch (in->dom) {
        case DOM_POS: v = od_unif(c, 0.5, 2.5); break;
        case DOM_NONZERO: v = od_unif(c, 0.5, 2) * (od_coin(c, 0.5) ? 1 : -1); break;
        case DOM_UNIT: v = od_unif(c, 0.05, 0.95); break;
        case DOM_SMALLINT: v = (double)od_int(c, -2, 2); break;
        case DOM_SPECIAL: {
            double specials[3] = {INFINITY, -INFINITY, NAN};
            v = od_coin(c, 0.6) ? od_unif(c, -2, 2) : specials[od_int(c, 0, 2)];
            break;
        }
        case DOM_INDEX: v = (double)od_int(c, 0, in->bound - 1); break;
        case DOM_BOOL: v = od_coin(c, 0.5); break;
        default: v = od_unif(c, -2, 2); break;
        }
        if (dtype == TG_FLOAT32 || (dtype == TG_BFLOAT16 && in->keep_f32)) v = (float)v;
        else if (dtype == TG_BFLOAT16) v = round_bf16(v);
        values[j] = v;
    }
}

void od_draw_unary(const od_row *row, od_case *c) { od_add(c, od_shape(c, 0, 4), row->dom); }

void od_draw_binary(const od_row *row, od_case *c) {
    tg_shape s = od_shape(c, 0, 4);
    bool first = od_coin(c, 0.5);
    od_add(c, first && od_coin(c, 0.5) ? od_broadcastable(c, s) : s, row->dom);
    od_add(c, !first && od_coin(c, 0.5) ? od_broadcastable(c, s) : s, row->dom2);
}

void od_draw_scalar(const od_row *row, od_case *c) {
    od_add(c, od_shape(c, 0, 4), row->dom);
    c->d[0] = (double)(float)od_unif(c, -2, 2);
    if (od_coin(c, 0.3)) c->d[0] = (double)od_int(c, -2, 2);
}

int od_one(tg_tensor *t, tg_tensor **out) {
    out[0] = t;
    return t ? 1 : 0;
}

int od_two(tg_tensor *a, tg_tensor *b, tg_tensor **out) {
    out[0] = a;
    out[1] = b;
    return a && b ? 2 : 0;
}

int od_run_f1(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(row->f1(in[0]), out);
}

int od_run_f2(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(row->f2(in[0], in[1]), out);
}

int od_run_fs(const od_row *row, const od_case *c, tg_tensor *const *in, tg_tensor **out) {
    return od_one(row->fs(in[0], c->d[0]), out);
}
