/* IDX reading (see data/mnist.h for the format) and MNIST preprocessing. */
#include "data/mnist.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/convert.h"
#include "core/scope.h"
#include "core/tensor_impl.h"

enum { TG_PATH_CAP = 4096 };

/* ---- parsing ---- */

typedef struct {
    uint8_t code;
    const char *idx_name;
    int dtype; /* tg_dtype, or -1 when tapegrad has no dtype for it */
} idx_type;

static const idx_type IDX_TYPES[] = {
    {0x08, "ubyte", TG_UINT8}, {0x09, "sbyte", -1},           {0x0B, "int16", -1},
    {0x0C, "int32", TG_INT32}, {0x0D, "float32", TG_FLOAT32}, {0x0E, "float64", TG_FLOAT64},
};

static uint32_t read_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* `op` and `name` prefix every message: "tg_mnist_load: /dir/file: ...". */
static tg_tensor *idx_parse(const char *op, const void *data, size_t n, int expected_ndim, const char *name) {
    const uint8_t *p = data;
    if (!name) name = "<memory>";
    if (!p && n) return tg_error("%s: %s: data is NULL", op, name), NULL;
    if (n < 4) return tg_error("%s: %s: truncated IDX header: %zu bytes, an IDX file starts with 4", op, name, n), NULL;
    if (p[0] != 0 || p[1] != 0)
        return tg_error("%s: %s: wrong magic 0x%02x%02x%02x%02x: not an IDX file (expected "
                        "0x0000TTDD: two zero bytes, type code, dimension count)",
                        op, name, p[0], p[1], p[2], p[3]),
               NULL;
    const idx_type *type = NULL;
    for (size_t i = 0; i < sizeof IDX_TYPES / sizeof IDX_TYPES[0]; i++)
        if (IDX_TYPES[i].code == p[2]) type = &IDX_TYPES[i];
    if (!type)
        return tg_error("%s: %s: wrong magic 0x%02x%02x%02x%02x: unknown IDX type code 0x%02x", op, name, p[0], p[1],
                        p[2], p[3], p[2]),
               NULL;
    if (type->dtype < 0)
        return tg_error("%s: %s: IDX element type %s (0x%02x) has no tapegrad dtype", op, name, type->idx_name,
                        type->code),
               NULL;
    int ndim = p[3];
    if (ndim < 1 || ndim > TG_MAX_DIMS)
        return tg_error("%s: %s: wrong dimension count %d (tapegrad reads 1 to %d)", op, name, ndim, TG_MAX_DIMS), NULL;
    if (expected_ndim > 0 && ndim != expected_ndim)
        return tg_error("%s: %s: wrong dimension count %d, expected %d", op, name, ndim, expected_ndim), NULL;
    size_t header = 4 + 4 * (size_t)ndim;
    if (n < header)
        return tg_error("%s: %s: truncated IDX header: %zu bytes, %d dimensions need %zu", op, name, n, ndim, header),
               NULL;
    tg_shape shape = {.ndim = ndim};
    size_t elem = tg_dtype_size((tg_dtype)type->dtype);
    uint64_t need = elem; /* bytes of data the header promises */
    bool overflow = false;
    uint64_t nonzero = 1; /* product of the non-zero sizes */
    bool nonzero_overflow = false;
    for (int i = 0; i < ndim; i++) {
        shape.dims[i] = read_be32(p + 4 + 4 * i);
        /* A header can promise up to (2^32)^8 elements; anything beyond the input's own
         * length is an error anyway, so overflow only has to be detected. */
        if (!overflow && __builtin_mul_overflow(need, (uint64_t)shape.dims[i], &need)) overflow = true;
        if (shape.dims[i] && __builtin_mul_overflow(nonzero, (uint64_t)shape.dims[i], &nonzero))
            nonzero_overflow = true;
    }
    char shape_buf[128];
    tg_shape_str(shape, shape_buf, sizeof shape_buf);
    /* [0, 2^32-1, 2^32-1, ...] has no elements but sizes no tensor can describe
     * (element counts and strides are int64). */
    if (nonzero_overflow || nonzero > (uint64_t)INT64_MAX / 8)
        return tg_error("%s: %s: sizes %s are too large for a tensor", op, name, shape_buf), NULL;
    size_t have = n - header;
    if (overflow || need > have) {
        char need_buf[32] = "more than 2^64";
        if (!overflow) snprintf(need_buf, sizeof need_buf, "%llu", (unsigned long long)need);
        return tg_error("%s: %s: truncated data: the header says %s %s (%s bytes) but %zu "
                        "bytes follow",
                        op, name, shape_buf, type->idx_name, need_buf, have),
               NULL;
    }
    if (need < have)
        return tg_error("%s: %s: %zu trailing bytes after the %s %s data (a wrong header or "
                        "two files joined?)",
                        op, name, (size_t)(have - need), shape_buf, type->idx_name),
               NULL;
    tg_tensor *t = tg_empty(shape, (tg_opts){.dtype = (tg_dtype)type->dtype});
    if (!t) return NULL;
    uint8_t *dst = tg_data_ptr(t);
    const uint8_t *src = p + header;
    if (elem == 1) {
        memcpy(dst, src, (size_t)need);
    } else {
        /* IDX is big-endian; tapegrad's hosts are little-endian. */
        for (size_t i = 0; i < (size_t)need; i += elem)
            for (size_t b = 0; b < elem; b++) dst[i + b] = src[i + elem - 1 - b];
    }
    return t;
}

tg_tensor *tg_idx_parse(const void *data, size_t nbytes, int expected_ndim, const char *name) {
    return idx_parse("tg_idx_parse", data, nbytes, expected_ndim, name);
}

/* ---- files ---- */

/* The whole (decompressed) contents of `path` in a malloc'd buffer, or NULL + error. */
static uint8_t *read_gz_file(const char *op, const char *path, size_t *size) {
    gzFile f = gzopen(path, "rb");
    if (!f) {
        int e = errno;
        tg_error("%s: cannot open %s: %s", op, path, e ? strerror(e) : "out of memory");
        return NULL;
    }
    gzbuffer(f, 1 << 17);
    size_t len = 0, cap = 1 << 20;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            tg_error("%s: %s: out of memory reading the file (%zu bytes so far)", op, path, len);
            gzclose(f);
            return NULL;
        }
        if (len == cap) {
            uint8_t *grown = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!grown) free(buf);
            buf = grown;
            cap *= 2;
            continue;
        }
        size_t want = cap - len < INT_MAX ? cap - len : INT_MAX;
        int got = gzread(f, buf + len, (unsigned)want);
        if (got > 0) {
            len += (size_t)got;
            continue;
        }
        int err = Z_OK;
        const char *msg = gzerror(f, &err);
        if (got < 0 || err != Z_OK) {
            /* zlib reports a stream cut short as Z_BUF_ERROR "unexpected end of file". */
            if (err == Z_BUF_ERROR)
                tg_error("%s: %s: gzip stream ends early (%s): the file is truncated", op, path, msg);
            else if (err == Z_ERRNO) tg_error("%s: %s: read error: %s", op, path, strerror(errno));
            else tg_error("%s: %s: corrupt gzip data (%s)", op, path, msg);
            free(buf);
            gzclose(f);
            return NULL;
        }
        break; /* end of file */
    }
    gzclose(f);
    *size = len;
    return buf;
}

static tg_tensor *idx_load(const char *op, const char *path, int expected_ndim) {
    if (!path) return tg_error("%s: path is NULL", op), NULL;
    size_t n = 0;
    uint8_t *data = read_gz_file(op, path, &n);
    if (!data) return NULL;
    tg_tensor *t = idx_parse(op, data, n, expected_ndim, path);
    free(data);
    return t;
}

tg_tensor *tg_idx_load(const char *path, int expected_ndim) { return idx_load("tg_idx_load", path, expected_ndim); }

/* Finds "<dir>/<prefix>-<kind>-idx<N>-ubyte[.gz]" or the "<prefix>-<kind>.idx<N>-ubyte"
 * spelling; writes the path into out (TG_PATH_CAP) or records an error listing the tries. */
static bool find_idx_file(const char *dir, const char *prefix, const char *kind, int ndim, char *out) {
    static const char *const patterns[] = {"%s/%s-%s-idx%d-ubyte", "%s/%s-%s-idx%d-ubyte.gz", "%s/%s-%s.idx%d-ubyte",
                                           "%s/%s-%s.idx%d-ubyte.gz"};
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        int len = snprintf(out, TG_PATH_CAP, patterns[i], dir, prefix, kind, ndim);
        if (len < 0 || len >= TG_PATH_CAP) {
            tg_error("tg_mnist_load: directory name too long (%zu characters)", strlen(dir));
            return false;
        }
        if (access(out, F_OK) == 0) return true;
    }
    tg_error("tg_mnist_load: missing file %s/%s-%s-idx%d-ubyte (also tried .gz and the "
             "'%s-%s.idx%d-ubyte' spelling). MNIST-format data is not shipped with tapegrad: "
             "Debian's package dataset-fashion-mnist provides Fashion-MNIST in %s",
             dir, prefix, kind, ndim, prefix, kind, ndim, TG_FASHION_MNIST_DIR);
    return false;
}

/* uint8 labels -> int64, the dtype cross-entropy takes. */
static tg_tensor *labels_to_int64(tg_tensor *labels) {
    int64_t n = tg_numel(labels);
    tg_tensor *out = tg_empty(tg_shape_of(labels), (tg_opts){.dtype = TG_INT64});
    if (!out) return NULL;
    const uint8_t *src = tg_data_ptr(labels);
    int64_t *dst = tg_data_ptr(out);
    for (int64_t i = 0; i < n; i++) dst[i] = src[i];
    return out;
}

tg_mnist tg_mnist_load(const char *dir, tg_mnist_split split) {
    tg_mnist result = {NULL, NULL};
    if (!dir) return tg_error("tg_mnist_load: dir is NULL"), result;
    if (split != TG_MNIST_TRAIN && split != TG_MNIST_TEST)
        return tg_error("tg_mnist_load: unknown split %d (TG_MNIST_TRAIN or TG_MNIST_TEST)", (int)split), result;
    const char *prefix = split == TG_MNIST_TRAIN ? "train" : "t10k";
    char image_path[TG_PATH_CAP], label_path[TG_PATH_CAP];
    if (!find_idx_file(dir, prefix, "images", 3, image_path) || !find_idx_file(dir, prefix, "labels", 1, label_path))
        return result;
    TG_SCOPE {
        tg_tensor *images = idx_load("tg_mnist_load", image_path, 3);
        tg_tensor *labels = images ? idx_load("tg_mnist_load", label_path, 1) : NULL;
        if (images && labels) {
            if (tg_dtype_of(images) != TG_UINT8) {
                tg_error("tg_mnist_load: %s: images are %s, expected ubyte (uint8)", image_path,
                         tg_dtype_name(tg_dtype_of(images)));
            } else if (tg_dtype_of(labels) != TG_UINT8) {
                tg_error("tg_mnist_load: %s: labels are %s, expected ubyte (uint8)", label_path,
                         tg_dtype_name(tg_dtype_of(labels)));
            } else if (tg_size(images, 0) != tg_size(labels, 0)) {
                tg_error("tg_mnist_load: image and label counts differ: %lld images in %s, "
                         "%lld labels in %s",
                         (long long)tg_size(images, 0), image_path, (long long)tg_size(labels, 0), label_path);
            } else {
                tg_tensor *labels64 = labels_to_int64(labels);
                if (labels64) {
                    result.images = tg_scope_return(images);
                    result.labels = tg_scope_return(labels64);
                }
            }
        }
    }
    return result;
}

/* ---- preprocessing ---- */

/* A contiguous CPU tensor with t's values: t itself when it already is one. New
 * reference in the current scope. */
static tg_tensor *host_contiguous(tg_tensor *t) {
    tg_tensor *c = tg_tensor_to(t, TG_CPU);
    if (c && !tg_is_contiguous(c)) c = tg_clone_values(c);
    return c;
}

static bool check_input(const char *op, tg_tensor *x) {
    if (tg_unusable_(x)) return tg_error_unusable_input(op, x, 0), false;
    if (!tg_dtype_is_supported(tg_dtype_of(x)))
        return tg_error("%s: dtype %s is not supported", op, tg_dtype_name(tg_dtype_of(x))), false;
    return true;
}

/* out = (x * scale - mean) / std in out_dtype, on x's device. */
static tg_tensor *affine(const char *op, tg_tensor *x, double scale, double mean, double std, tg_dtype out_dtype) {
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *src = host_contiguous(x);
        tg_tensor *out = src ? tg_empty(tg_shape_of(x), (tg_opts){.dtype = out_dtype}) : NULL;
        if (out) {
            int64_t n = tg_numel(x);
            tg_dtype dt = tg_dtype_of(src);
            const char *in = tg_data_ptr(src);
            size_t es = tg_dtype_size(dt);
            double inv = 1.0 / std;
            if (dt == TG_UINT8 && out_dtype == TG_FLOAT32) {
                /* The common case (MNIST bytes): a table of the 256 possible results. */
                float table[256];
                for (int v = 0; v < 256; v++) table[v] = (float)((v * scale - mean) * inv);
                float *o = tg_data_ptr(out);
                for (int64_t i = 0; i < n; i++) o[i] = table[(uint8_t)in[i]];
            } else {
                char *o = tg_data_ptr(out);
                size_t os = tg_dtype_size(out_dtype);
                for (int64_t i = 0; i < n; i++)
                    tg_store_from_double(o + i * os, out_dtype,
                                         (tg_load_as_double(in + i * es, dt) * scale - mean) * inv);
            }
            result = tg_scope_return(tg_tensor_to(out, tg_device_of(x)));
        }
    }
    (void)op;
    return result;
}

tg_tensor *tg_mnist_to_float(tg_tensor *images) {
    if (!check_input("tg_mnist_to_float", images)) return NULL;
    return affine("tg_mnist_to_float", images, 1.0 / 255.0, 0.0, 1.0, TG_FLOAT32);
}

tg_tensor *tg_mnist_normalize(tg_tensor *x, double mean, double std) {
    if (!check_input("tg_mnist_normalize", x)) return NULL;
    if (!isfinite(mean) || !isfinite(std) || std <= 0)
        return tg_error("tg_mnist_normalize: need a finite mean and a positive std, got mean %g, "
                        "std %g",
                        mean, std),
               NULL;
    tg_dtype out = tg_dtype_of(x) == TG_FLOAT64 ? TG_FLOAT64 : TG_FLOAT32;
    return affine("tg_mnist_normalize", x, 1.0, mean, std, out);
}

tg_tensor *tg_mnist_to_normalized(tg_tensor *images, double mean, double std) {
    if (!check_input("tg_mnist_to_normalized", images)) return NULL;
    if (!isfinite(mean) || !isfinite(std) || std <= 0)
        return tg_error("tg_mnist_to_normalized: need a finite mean and a positive std, got mean %g, "
                        "std %g",
                        mean, std),
               NULL;
    return affine("tg_mnist_to_normalized", images, 1.0 / 255.0, mean, std, TG_FLOAT32);
}

tg_status tg_mnist_mean_std(tg_tensor *x, double *mean, double *std) {
    if (!check_input("tg_mnist_mean_std", x)) return TG_ERROR;
    if (!mean || !std) return tg_error("tg_mnist_mean_std: mean or std pointer is NULL");
    int64_t n = tg_numel(x);
    if (n == 0) return tg_error("tg_mnist_mean_std: x has no elements");
    tg_status status = TG_ERROR;
    TG_SCOPE {
        tg_tensor *src = host_contiguous(x);
        if (src) {
            tg_dtype dt = tg_dtype_of(src);
            const char *in = tg_data_ptr(src);
            size_t es = tg_dtype_size(dt);
            /* Two passes: the sum of squared deviations does not cancel the way
             * E[x^2] - E[x]^2 does. */
            double sum = 0;
            for (int64_t i = 0; i < n; i++) sum += tg_load_as_double(in + i * es, dt);
            double m = sum / (double)n, ss = 0;
            for (int64_t i = 0; i < n; i++) {
                double d = tg_load_as_double(in + i * es, dt) - m;
                ss += d * d;
            }
            *mean = m;
            *std = sqrt(ss / (double)n);
            status = TG_OK;
        }
    }
    return status;
}
