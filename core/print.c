/* tg_print: a readable repr like PyTorch's, summarised with "..." past 1000 elements. */
#include <math.h>
#include <stdlib.h>

#include "core/convert.h"
#include "core/scope.h"
#include "core/tensor_impl.h"

#define SUMMARY_THRESHOLD 1000
#define EDGE_ITEMS 3

typedef struct {
    FILE *f;
    const tg_tensor *t;
    bool summarise, scientific;
} printer;

static void print_value(const printer *p, const char *elem) {
    double v = tg_load_as_double(elem, p->t->dtype);
    switch (p->t->dtype) {
    case TG_BOOL: fprintf(p->f, "%s", v != 0 ? "True" : "False"); break;
    case TG_FLOAT16:
    case TG_BFLOAT16:
    case TG_FLOAT32:
    case TG_FLOAT64: fprintf(p->f, p->scientific ? "%.4e" : "%.4f", v); break;
    case TG_INT64: fprintf(p->f, "%lld", (long long)*(const int64_t *)elem); break;
    default: fprintf(p->f, "%lld", (long long)v); break;
    }
}

static void print_dim(const printer *p, int dim, const char *base, int indent) {
    const tg_tensor *t = p->t;
    int64_t n = t->shape.dims[dim], stride = t->strides[dim] * (int64_t)tg_dtype_size(t->dtype);
    fputc('[', p->f);
    for (int64_t i = 0; i < n; i++) {
        if (p->summarise && n > 2 * EDGE_ITEMS && i == EDGE_ITEMS) {
            fprintf(p->f, "...");
            i = n - EDGE_ITEMS - 1;
            goto separator;
        }
        if (dim == t->shape.ndim - 1) print_value(p, base + i * stride);
        else print_dim(p, dim + 1, base + i * stride, indent + 1);
    separator:
        if (i + 1 < n) {
            fputc(',', p->f);
            if (dim == t->shape.ndim - 1) {
                fputc(' ', p->f);
            } else {
                for (int k = dim; k < t->shape.ndim - 1; k++) fputc('\n', p->f);
                fprintf(p->f, "%*s", indent + 1, "");
            }
        }
    }
    fputc(']', p->f);
}

void tg_fprint(FILE *f, tg_tensor *t) {
    if (!t) {
        fprintf(f, "(null tensor)\n");
        return;
    }
    if (tg_unusable_(t)) { /* a stale handle: say so, where a dead struct would print garbage */
        tg_error_unusable_input("tg_print", t, 0);
        fprintf(f, "(freed tensor: %s)\n", tg_last_error());
        return;
    }
    char shape[128], dev[16];
    TG_SCOPE {
        tg_tensor *host = tg_tensor_to(t, TG_CPU);
        if (!host) {
            fprintf(f, "(unprintable tensor: %s)\n", tg_last_error());
        } else {
            printer p = {f, host, tg_numel(host) > SUMMARY_THRESHOLD, false};
            if (tg_dtype_is_floating(host->dtype)) {
                double lo = INFINITY, hi = 0;
                int64_t n = tg_numel(host);
                tg_tensor *c = tg_clone_values(host);
                for (int64_t i = 0; c && i < n; i++) {
                    double v = fabs(
                        tg_load_as_double((char *)tg_elem_ptr(c) + i * (int64_t)tg_dtype_size(c->dtype), c->dtype));
                    if (!isfinite(v)) continue;
                    if (v > hi) hi = v;
                    if (v > 0 && v < lo) lo = v;
                }
                p.scientific = hi >= 1e5 || (lo < 1e-4 && hi > 0);
            }
            fprintf(f, "tensor(");
            if (host->shape.ndim == 0) print_value(&p, tg_elem_ptr(host));
            else print_dim(&p, 0, tg_elem_ptr(host), 7);
            fprintf(f, ", shape=%s, dtype=%s, device=%s%s)\n", tg_shape_str(t->shape, shape, sizeof shape),
                    tg_dtype_name(t->dtype), tg_device_str(t->storage->device, dev),
                    t->requires_grad ? ", requires_grad=True" : "");
        }
    }
}

void tg_print(tg_tensor *t) { tg_fprint(stdout, t); }
