#include "core/shape.h"

#include <stdio.h>
#include <string.h>

#include "core/tensor_impl.h"

tg_shape tg_shape_from(int ndim, const int64_t *dims) {
    tg_shape s = {0};
    s.ndim = ndim;
    if (ndim > 0) memcpy(s.dims, dims, (size_t)ndim * sizeof *dims);
    return s;
}

int64_t tg_shape_numel(tg_shape s) { return tg_shape_numel_inline(&s); }

bool tg_shape_equal(tg_shape a, tg_shape b) {
    if (a.ndim != b.ndim) return false;
    for (int i = 0; i < a.ndim; i++)
        if (a.dims[i] != b.dims[i]) return false;
    return true;
}

const char *tg_shape_str(tg_shape s, char *buf, size_t size) {
    if (s.ndim < 0 || s.ndim > TG_MAX_DIMS) { /* a malformed shape, named in an error */
        snprintf(buf, size, "[%d dims]", s.ndim);
        return buf;
    }
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < s.ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)s.dims[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

bool tg_broadcast_shapes(tg_shape a, tg_shape b, tg_shape *out) {
    tg_shape r = {0};
    r.ndim = a.ndim > b.ndim ? a.ndim : b.ndim;
    for (int i = 0; i < r.ndim; i++) {
        int ia = a.ndim - r.ndim + i, ib = b.ndim - r.ndim + i;
        int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        r.dims[i] = da == 1 ? db : da;
    }
    *out = r;
    return true;
}

int tg_wrap_dim(int dim, int ndim) {
    int n = ndim > 0 ? ndim : 1; /* a scalar accepts dim 0 and -1, as in PyTorch */
    if (dim < -n || dim >= n) return -1;
    return dim < 0 ? dim + n : dim;
}
