/* safetensors reading and writing (format in io/safetensors.h). The header is parsed
 * with Debian's cJSON; it is written by hand because offsets must come out as plain
 * integers (cJSON prints large doubles in exponent form, which strict readers such
 * as the Rust reference implementation reject). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/scope.h"
#include "io/atomic_file.h"
#include "io/crc32c.h"
#include "io/safetensors.h"
#include "core/tensor_impl.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; a big-endian host needs byte swapping here"
#endif

/* The reference implementation's limit: a larger header is an attack, not a model. */
#define TG_SAFETENSORS_MAX_HEADER (100u * 1000 * 1000)

typedef struct {
    const char *name;
    tg_dtype dtype;
} st_dtype;

static const st_dtype DTYPES[] = {
    {"F32", TG_FLOAT32}, {"F64", TG_FLOAT64}, {"I64", TG_INT64},   {"I32", TG_INT32},
    {"U8", TG_UINT8},    {"BOOL", TG_BOOL},   {"F16", TG_FLOAT16}, {"BF16", TG_BFLOAT16},
};
/* Valid in the format, but tapegrad has no dtype for them. */
static const char *const UNSUPPORTED[] = {"I8", "I16", "U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F64_C", "C64"};

static const char *dtype_file_name(tg_dtype d) {
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (DTYPES[i].dtype == d) return DTYPES[i].name;
    return NULL;
}

/* ---- writing ---- */

/* A growable byte buffer; `failed` sticks after the first allocation failure. */
typedef struct {
    char *data;
    size_t len, cap;
    bool failed;
} sbuf;

static void sb_reserve(sbuf *b, size_t extra) {
    if (b->failed || b->len + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = true;
        return;
    }
    b->data = p;
    b->cap = cap;
}

static void sb_put(sbuf *b, const char *s, size_t n) {
    sb_reserve(b, n);
    if (b->failed) return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf_u64(sbuf *b, unsigned long long v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", v);
    sb_put(b, tmp, (size_t)n);
}

/* A JSON string literal (RFC 8259: escape '"', '\\' and control characters; UTF-8
 * passes through). */
static void sb_json_string(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char tmp[8];
        if (*p == '"' || *p == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)*p;
            sb_put(b, tmp, 2);
        } else if (*p < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", *p);
            sb_put(b, tmp, 6);
        } else {
            sb_put(b, (const char *)p, 1);
        }
    }
    sb_put(b, "\"", 1);
}

/* Where each tensor's bytes go: by element size, largest first (map order within a
 * size), so that every tensor starts aligned to its element size and a reader may map
 * the file and use the data in place; the header keeps map order. Returns the total. */
static size_t layout_data(const tg_tensor_map *m, int64_t count, size_t *sizes, size_t *offsets) {
    size_t total_data = 0;
    for (size_t es = 8; es >= 1; es /= 2)
        for (int64_t i = 0; i < count; i++) {
            tg_tensor *t = tg_tensor_map_tensor(m, i);
            if (tg_dtype_size(tg_dtype_of(t)) != es) continue;
            sizes[i] = (size_t)tg_numel(t) * es;
            offsets[i] = total_data;
            total_data += sizes[i];
        }
    return total_data;
}

/* Metadata first (as the reference writer does). It ends with one
 * "tapegrad.crc32c.<name>": "<8 hex digits>" per tensor (a string, as the format
 * wants), written as zeros here and filled in once the data is in place (crc_at: where
 * each one's digits are). A map's own keys of that form (a loaded file's) are stale and
 * left out. Returns whether anything was written (a comma is then due). */
static bool write_metadata(sbuf *h, const tg_tensor_map *m, int64_t count, size_t *crc_at) {
    bool first = true, any = count > 0;
    for (int64_t i = 0; i < tg_tensor_map_metadata_size(m) && !any; i++)
        any = strncmp(tg_tensor_map_metadata_key(m, i), TG_SAFETENSORS_CRC_PREFIX, strlen(TG_SAFETENSORS_CRC_PREFIX));
    if (any) sb_puts(h, "\"__metadata__\":{");
    for (int64_t i = 0; i < tg_tensor_map_metadata_size(m); i++) {
        if (!strncmp(tg_tensor_map_metadata_key(m, i), TG_SAFETENSORS_CRC_PREFIX, strlen(TG_SAFETENSORS_CRC_PREFIX)))
            continue;
        if (!first) sb_put(h, ",", 1);
        first = false;
        sb_json_string(h, tg_tensor_map_metadata_key(m, i));
        sb_put(h, ":", 1);
        sb_json_string(h, tg_tensor_map_metadata_value(m, i));
    }
    for (int64_t i = 0; i < count; i++) {
        if (!first) sb_put(h, ",", 1);
        first = false;
        char *key = malloc(strlen(TG_SAFETENSORS_CRC_PREFIX) + strlen(tg_tensor_map_name(m, i)) + 1);
        if (!key) {
            h->failed = true;
            break;
        }
        strcpy(key, TG_SAFETENSORS_CRC_PREFIX);
        strcat(key, tg_tensor_map_name(m, i));
        sb_json_string(h, key);
        free(key);
        sb_puts(h, ":\"");
        crc_at[i] = h->len;
        sb_puts(h, "00000000\"");
    }
    if (any) sb_put(h, "}", 1);
    return any;
}

/* The tensors' entries, in map order: dtype, shape and data offsets. */
static tg_status write_entries(const char *op, sbuf *h, const tg_tensor_map *m, int64_t count, bool first,
                               const size_t *sizes, const size_t *offsets) {
    for (int64_t i = 0; i < count; i++) {
        tg_tensor *t = tg_tensor_map_tensor(m, i);
        const char *dt = dtype_file_name(tg_dtype_of(t));
        if (!dt)
            return tg_error("%s: tensor \"%s\" has dtype %s, which safetensors files from "
                            "tapegrad cannot hold yet (F32, F64, I64, I32, U8, BOOL, F16, BF16)",
                            op, tg_tensor_map_name(m, i), tg_dtype_name(tg_dtype_of(t)));
        if (!first) sb_put(h, ",", 1);
        first = false;
        sb_json_string(h, tg_tensor_map_name(m, i));
        sb_puts(h, ":{\"dtype\":\"");
        sb_puts(h, dt);
        sb_puts(h, "\",\"shape\":[");
        tg_shape s = tg_shape_of(t);
        for (int d = 0; d < s.ndim; d++) {
            if (d) sb_put(h, ",", 1);
            sb_printf_u64(h, (unsigned long long)s.dims[d]);
        }
        sb_puts(h, "],\"data_offsets\":[");
        sb_printf_u64(h, offsets[i]);
        sb_put(h, ",", 1);
        sb_printf_u64(h, offsets[i] + sizes[i]);
        sb_puts(h, "]}");
    }
    return TG_OK;
}

/* The file: header length, header, then each tensor's bytes and its CRC in the header. */
static uint8_t *assemble(const char *op, const sbuf *h, const tg_tensor_map *m, int64_t count, const size_t *sizes,
                         const size_t *offsets, const size_t *crc_at, size_t total) {
    uint8_t *out = malloc(total ? total : 1);
    if (!out) return tg_error("%s: out of memory for a %zu-byte file", op, total), NULL;
    uint64_t hl = h->len;
    for (int b = 0; b < 8; b++) out[b] = (uint8_t)(hl >> (8 * b));
    memcpy(out + 8, h->data, h->len);
    uint8_t *p = out + 8 + hl;
    for (int64_t i = 0; i < count; i++) {
        /* Any device, any strides: copied out in logical row-major order. */
        if (sizes[i] && tg_copy_to_host(tg_tensor_map_tensor(m, i), p + offsets[i], sizes[i])) {
            free(out);
            return NULL;
        }
        char hex[9];
        snprintf(hex, sizeof hex, "%08x", (unsigned)tg_crc32c(0, p + offsets[i], sizes[i]));
        memcpy(out + 8 + crc_at[i], hex, 8);
    }
    return out;
}

tg_status tg_safetensors_serialize(const tg_tensor_map *m, uint8_t **data, size_t *nbytes) {
    const char *op = "tg_safetensors_serialize";
    if (!m || !data || !nbytes) return tg_error("%s: map or output pointer is NULL", op);
    *data = NULL;
    *nbytes = 0;
    int64_t count = tg_tensor_map_size(m);
    size_t *sizes = calloc((size_t)(count ? count : 1), sizeof *sizes);
    size_t *offsets = calloc((size_t)(count ? count : 1), sizeof *offsets);
    size_t *crc_at = calloc((size_t)(count ? count : 1), sizeof *crc_at);
    tg_status status = TG_OK;
    sbuf h = {0};
    if (!sizes || !offsets || !crc_at) {
        status = tg_error("%s: out of memory", op);
    } else {
        size_t total_data = layout_data(m, count, sizes, offsets);
        sb_put(&h, "{", 1);
        bool any_metadata = write_metadata(&h, m, count, crc_at);
        status = write_entries(op, &h, m, count, !any_metadata, sizes, offsets);
        sb_put(&h, "}", 1);
        /* Pad with spaces so the data starts 8-byte aligned (the reference writer does too). */
        while ((8 + h.len) % 8) sb_put(&h, " ", 1);
        size_t total = 8 + h.len + total_data;
        if (!status && h.failed) status = tg_error("%s: out of memory for a %zu-byte file", op, total);
        if (!status) *data = assemble(op, &h, m, count, sizes, offsets, crc_at, total);
        if (!status && !*data) status = TG_ERROR;
        if (!status) *nbytes = total;
    }
    free(h.data);
    free(sizes);
    free(offsets);
    free(crc_at);
    return status;
}

/* Durable and atomic (io/atomic_file.h): a crash leaves the old file or the new one. */
tg_status tg_safetensors_save(const tg_tensor_map *m, const char *path) {
    if (!path) return tg_error("tg_safetensors_save: path is NULL");
    uint8_t *data;
    size_t n;
    if (tg_safetensors_serialize(m, &data, &n)) return TG_ERROR;
    tg_status status = tg_write_file_atomic("tg_safetensors_save", path, data, n);
    free(data);
    return status;
}

tg_status tg_safetensors_save_tensor(tg_tensor *t, const char *name, const char *path) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_safetensors_save_tensor", t, 0);
    tg_tensor_map *m = tg_tensor_map_new();
    if (!m) return TG_ERROR;
    tg_status s = tg_tensor_map_set(m, name ? name : "tensor", t);
    if (!s) s = tg_safetensors_save(m, path);
    tg_tensor_map_free(m);
    return s;
}

/* ---- reading ---- */

typedef struct {
    const char *name; /* borrowed from the cJSON tree */
    tg_dtype dtype;
    tg_shape shape;
    uint64_t begin, end;
} st_entry;

/* A JSON number that is an integer in [0, 2^53] (every offset and size a real file
 * has; doubles are exact up to there). */
static bool json_uint(const cJSON *item, uint64_t *out) {
    if (!cJSON_IsNumber(item)) return false;
    double v = item->valuedouble;
    if (!(v >= 0 && v <= 9007199254740992.0) || v != (double)(uint64_t)v) return false;
    *out = (uint64_t)v;
    return true;
}

static int compare_entries(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Checks one tensor entry of the header and fills e; records an error on failure. */
static bool parse_entry(const char *op, const char *file, const cJSON *item, st_entry *e) {
    const char *name = item->string;
    if (!cJSON_IsObject(item))
        return tg_error("%s: %s: tensor \"%s\": entry is not a JSON object", op, file, name), false;
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dtype) || !cJSON_IsArray(shape) || !cJSON_IsArray(offsets))
        return tg_error("%s: %s: tensor \"%s\": needs \"dtype\" (string), \"shape\" (array) "
                        "and \"data_offsets\" (array)",
                        op, file, name),
               false;
    e->name = name;
    bool known = false;
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (strcmp(dtype->valuestring, DTYPES[i].name) == 0) {
            e->dtype = DTYPES[i].dtype;
            known = true;
        }
    if (!known) {
        for (size_t i = 0; i < sizeof UNSUPPORTED / sizeof UNSUPPORTED[0]; i++)
            if (strcmp(dtype->valuestring, UNSUPPORTED[i]) == 0)
                return tg_error("%s: %s: tensor \"%s\": dtype %s is not supported by tapegrad "
                                "(it reads F32, F64, I64, I32, U8, BOOL, F16, BF16)",
                                op, file, name, UNSUPPORTED[i]),
                       false;
        return tg_error("%s: %s: tensor \"%s\": unknown dtype \"%.32s\"", op, file, name, dtype->valuestring), false;
    }
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > TG_MAX_DIMS)
        return tg_error("%s: %s: tensor \"%s\": %d dimensions, tapegrad supports at most %d", op, file, name, ndim,
                        TG_MAX_DIMS),
               false;
    e->shape = (tg_shape){.ndim = ndim};
    uint64_t bytes = tg_dtype_size(e->dtype);
    uint64_t nonzero = 1; /* product of the non-zero sizes */
    bool overflow = false, nonzero_overflow = false;
    int d = 0;
    for (const cJSON *s = shape->child; s; s = s->next, d++) {
        uint64_t size;
        if (!json_uint(s, &size))
            return tg_error("%s: %s: tensor \"%s\": shape entry %d is not a non-negative "
                            "integer",
                            op, file, name, d),
                   false;
        e->shape.dims[d] = (int64_t)size;
        if (__builtin_mul_overflow(bytes, size, &bytes)) overflow = true;
        if (size && __builtin_mul_overflow(nonzero, size, &nonzero)) nonzero_overflow = true;
    }
    /* [0, 2^50, 2^50] has no elements but sizes no tensor can describe (element
     * counts and strides are int64). */
    if (nonzero_overflow || nonzero > (uint64_t)INT64_MAX / 8) {
        char sbuf[160];
        tg_shape_str(e->shape, sbuf, sizeof sbuf);
        return tg_error("%s: %s: tensor \"%s\": sizes %s are too large for a tensor", op, file, name, sbuf), false;
    }
    if (cJSON_GetArraySize(offsets) != 2 || !json_uint(offsets->child, &e->begin) ||
        !json_uint(offsets->child->next, &e->end) || e->end < e->begin)
        return tg_error("%s: %s: tensor \"%s\": data_offsets must be two integers [begin, end] "
                        "with begin <= end",
                        op, file, name),
               false;
    if (overflow || e->end - e->begin != bytes) {
        char sbuf[160];
        tg_shape_str(e->shape, sbuf, sizeof sbuf);
        return tg_error("%s: %s: tensor \"%s\": data_offsets [%llu, %llu] hold %llu bytes but "
                        "shape %s of %s needs %s%llu",
                        op, file, name, (unsigned long long)e->begin, (unsigned long long)e->end,
                        (unsigned long long)(e->end - e->begin), sbuf, dtype->valuestring, overflow ? "more than " : "",
                        overflow ? (unsigned long long)UINT64_MAX : (unsigned long long)bytes),
               false;
    }
    return true;
}

/* Checks a tensor's bytes against its "tapegrad.crc32c.<name>" in the metadata, when the
 * file has one (files from other writers have none: nothing to check). */
static bool check_crc(const char *op, const char *file, const cJSON *meta, const char *name, const uint8_t *bytes,
                      size_t nb) {
    char key[320];
    int kn = snprintf(key, sizeof key, "%s%s", TG_SAFETENSORS_CRC_PREFIX, name);
    const cJSON *v = NULL;
    if (kn > 0 && (size_t)kn < sizeof key) {
        v = cJSON_GetObjectItemCaseSensitive(meta, key);
    } else { /* a long name */
        for (const cJSON *kv = meta->child; kv && !v; kv = kv->next)
            if (kv->string && !strncmp(kv->string, TG_SAFETENSORS_CRC_PREFIX, strlen(TG_SAFETENSORS_CRC_PREFIX)) &&
                !strcmp(kv->string + strlen(TG_SAFETENSORS_CRC_PREFIX), name))
                v = kv;
    }
    if (!v) return true;
    const char *hex = cJSON_IsString(v) ? v->valuestring : NULL;
    uint32_t want = 0;
    bool valid = hex && strlen(hex) == 8;
    for (int i = 0; valid && i < 8; i++) {
        char c = hex[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        valid = d >= 0;
        want = want << 4 | (uint32_t)(d < 0 ? 0 : d);
    }
    if (!valid) return tg_error("%s: %s: metadata \"%s\" must be 8 hex digits (a CRC32C)", op, file, v->string), false;
    uint32_t got = tg_crc32c(0, bytes, nb);
    if (got != want)
        return tg_error("%s: %s: tensor \"%s\" is corrupted: the CRC32C of its %zu bytes is %08x, the file says "
                        "%08x",
                        op, file, name, nb, (unsigned)got, (unsigned)want),
               false;
    return true;
}

/* The 8-byte length and the JSON object after it: the parsed header (its buffer of
 * tensor data in *buffer, *buffer_size), or NULL + error. */
static cJSON *parse_header(const char *op, const uint8_t *p, size_t n, const char *file, const uint8_t **buffer,
                           uint64_t *buffer_size) {
    if (!p && n) return tg_error("%s: %s: data is NULL", op, file), NULL;
    if (n < 8)
        return tg_error("%s: %s: truncated: %zu bytes, a safetensors file starts with an 8-byte "
                        "header length",
                        op, file, n),
               NULL;
    uint64_t hl = 0;
    for (int b = 0; b < 8; b++) hl |= (uint64_t)p[b] << (8 * b);
    if (hl > n - 8)
        return tg_error("%s: %s: truncated or not a safetensors file: header length %llu but "
                        "only %zu bytes follow",
                        op, file, (unsigned long long)hl, n - 8),
               NULL;
    if (hl > TG_SAFETENSORS_MAX_HEADER)
        return tg_error("%s: %s: header of %llu bytes exceeds the %u-byte limit", op, file, (unsigned long long)hl,
                        TG_SAFETENSORS_MAX_HEADER),
               NULL;
    if (hl < 2 || p[8] != '{')
        return tg_error("%s: %s: the header must be a JSON object starting with '{'", op, file), NULL;
    const char *json = (const char *)p + 8;
    *buffer = p + 8 + hl;
    *buffer_size = n - 8 - hl;

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, (size_t)hl, &end, false);
    if (!root || !cJSON_IsObject(root)) {
        long at = end ? (long)(end - json) : -1;
        if (!root) {
            const char *e = cJSON_GetErrorPtr();
            if (e && e >= json && e <= json + hl) at = (long)(e - json);
        }
        cJSON_Delete(root);
        return tg_error("%s: %s: the header is not a valid JSON object (error near byte %ld of "
                        "%llu)",
                        op, file, at, (unsigned long long)hl),
               NULL;
    }
    /* Only spaces may follow the object (the padding). */
    if (end)
        for (const char *c = end; c < json + hl; c++)
            if (*c != ' ' && *c != '\t' && *c != '\n' && *c != '\r' && *c != '\0') {
                cJSON_Delete(root);
                return tg_error("%s: %s: unexpected bytes after the header's JSON object", op, file), NULL;
            }
    return root;
}

/* "__metadata__"'s string pairs into the map (the CRC entries stay the file's). */
static bool parse_metadata(const char *op, const char *file, const cJSON *item, tg_tensor_map *m) {
    bool ok = true;
    for (const cJSON *kv = item->child; ok && kv; kv = kv->next) {
        if (cJSON_IsString(kv) && kv->string &&
            !strncmp(kv->string, TG_SAFETENSORS_CRC_PREFIX, strlen(TG_SAFETENSORS_CRC_PREFIX)))
            continue; /* a property of the file, checked below; not the map's */
        if (!cJSON_IsString(kv)) {
            tg_error("%s: %s: metadata \"%s\" is not a string (the format maps strings "
                     "to strings)",
                     op, file, kv->string ? kv->string : "");
            ok = false;
        } else if (tg_tensor_map_metadata(m, kv->string)) {
            tg_error("%s: %s: metadata key \"%s\" appears twice", op, file, kv->string);
            ok = false;
        } else {
            ok = !tg_tensor_map_set_metadata(m, kv->string, kv->valuestring);
        }
    }
    return ok;
}

/* The tensors must tile [0, buffer_size) exactly: no gap, overlap or tail. */
static bool check_tiling(const char *op, const char *file, const st_entry *entries, int num, uint64_t buffer_size) {
    st_entry *sorted = malloc((size_t)(num ? num : 1) * sizeof *sorted);
    if (!sorted) return tg_error("%s: %s: out of memory", op, file), false;
    memcpy(sorted, entries, (size_t)num * sizeof *sorted);
    qsort(sorted, (size_t)num, sizeof *sorted, compare_entries);
    bool ok = true;
    uint64_t at = 0;
    for (int i = 0; i < num && ok; i++) {
        if (sorted[i].begin != at) {
            tg_error("%s: %s: tensor \"%s\" starts at byte %llu of the data, expected "
                     "%llu (%s)",
                     op, file, sorted[i].name, (unsigned long long)sorted[i].begin, (unsigned long long)at,
                     sorted[i].begin > at ? "a gap before it" : "it overlaps another");
            ok = false;
        }
        at = sorted[i].end;
    }
    if (ok && at != buffer_size) {
        if (at > buffer_size)
            tg_error("%s: %s: truncated data: the header needs %llu bytes of tensor "
                     "data but the file has %llu",
                     op, file, (unsigned long long)at, (unsigned long long)buffer_size);
        else
            tg_error("%s: %s: %llu trailing bytes after the tensor data", op, file,
                     (unsigned long long)(buffer_size - at));
        ok = false;
    }
    free(sorted);
    return ok;
}

/* Tensors are made in header order, each a copy of its bytes, and handed to the map;
 * the scope drops our references so the map's are the only ones. */
static bool make_tensors(const char *op, const char *file, const st_entry *entries, int num, const cJSON *meta,
                         const uint8_t *buffer, tg_tensor_map *m) {
    bool ok = true;
    TG_SCOPE {
        for (int i = 0; i < num && ok; i++) {
            const st_entry *e = &entries[i];
            tg_tensor *t = tg_empty(e->shape, (tg_opts){.dtype = e->dtype});
            if (!t) {
                ok = false;
                break;
            }
            size_t nb = (size_t)(e->end - e->begin);
            if (meta && !check_crc(op, file, meta, e->name, buffer + e->begin, nb)) {
                ok = false;
                break;
            }
            if (e->dtype == TG_BOOL) {
                /* Any non-zero byte is true; a C bool must hold exactly 0 or 1. */
                bool *dst = tg_data_ptr(t);
                for (size_t k = 0; k < nb; k++) dst[k] = buffer[e->begin + k] != 0;
            } else if (nb) {
                memcpy(tg_data_ptr(t), buffer + e->begin, nb);
            }
            ok = !tg_tensor_map_set(m, e->name, t);
        }
    }
    return ok;
}

static tg_tensor_map *parse(const char *op, const void *data, size_t n, const char *file) {
    if (!file) file = "<memory>";
    const uint8_t *buffer = NULL;
    uint64_t buffer_size = 0;
    cJSON *root = parse_header(op, data, n, file, &buffer, &buffer_size);
    if (!root) return NULL;

    int count = cJSON_GetArraySize(root);
    st_entry *entries = calloc((size_t)(count ? count : 1), sizeof *entries);
    tg_tensor_map *m = tg_tensor_map_new();
    int num = 0;
    bool ok = entries && m;
    if (!entries) tg_error("%s: %s: out of memory", op, file);
    const cJSON *meta = NULL;
    for (const cJSON *item = root->child; ok && item; item = item->next) {
        const char *name = item->string ? item->string : "";
        if (strcmp(name, "__metadata__") == 0) {
            if (meta || !cJSON_IsObject(item)) {
                tg_error("%s: %s: \"__metadata__\" must appear once, as an object", op, file);
                ok = false;
                break;
            }
            meta = item;
            ok = parse_metadata(op, file, item, m);
            continue;
        }
        if (!name[0]) {
            tg_error("%s: %s: a tensor has an empty name", op, file);
            ok = false;
            break;
        }
        for (int i = 0; i < num && ok; i++)
            if (strcmp(entries[i].name, name) == 0) {
                tg_error("%s: %s: tensor \"%s\" appears twice in the header", op, file, name);
                ok = false;
            }
        if (ok) ok = parse_entry(op, file, item, &entries[num++]);
    }
    ok = ok && check_tiling(op, file, entries, num, buffer_size);
    ok = ok && make_tensors(op, file, entries, num, meta, buffer, m);
    free(entries);
    cJSON_Delete(root);
    if (!ok) {
        tg_tensor_map_free(m);
        return NULL;
    }
    return m;
}

tg_tensor_map *tg_safetensors_parse(const void *data, size_t nbytes, const char *name) {
    return parse("tg_safetensors_parse", data, nbytes, name);
}

static uint8_t *read_file(const char *op, const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return tg_error("%s: cannot open %s: %s", op, path, strerror(errno)), NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return tg_error("%s: %s is not a regular file", op, path), NULL;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return tg_error("%s: %s: out of memory for %zu bytes", op, path, n), NULL;
    }
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    if (got != n) {
        free(buf);
        return tg_error("%s: %s: read %zu of %zu bytes", op, path, got, n), NULL;
    }
    *size = n;
    return buf;
}

static tg_tensor_map *load(const char *op, const char *path) {
    if (!path) return tg_error("%s: path is NULL", op), NULL;
    size_t n = 0;
    uint8_t *data = read_file(op, path, &n);
    if (!data) return NULL;
    tg_tensor_map *m = parse(op, data, n, path);
    free(data);
    return m;
}

tg_tensor_map *tg_safetensors_load(const char *path) { return load("tg_safetensors_load", path); }

tg_tensor *tg_safetensors_load_tensor(const char *path, const char *name) {
    const char *op = "tg_safetensors_load_tensor";
    tg_tensor_map *m = load(op, path);
    if (!m) return NULL;
    tg_tensor *t = NULL;
    if (name) {
        t = tg_tensor_map_get(m, name);
        if (!t) {
            char names[512] = "";
            size_t len = 0;
            for (int64_t i = 0; i < tg_tensor_map_size(m) && len < sizeof names - 1; i++) {
                int w = snprintf(names + len, sizeof names - len, "%s\"%s\"", i ? ", " : "", tg_tensor_map_name(m, i));
                if (w > 0) len += (size_t)w;
            }
            tg_error("%s: %s has no tensor \"%s\" (it has %s)", op, path, name, tg_tensor_map_size(m) ? names : "none");
        }
    } else if (tg_tensor_map_size(m) != 1) {
        tg_error("%s: %s holds %lld tensors; pass the name of the one to load", op, path,
                 (long long)tg_tensor_map_size(m));
    } else {
        t = tg_tensor_map_tensor(m, 0);
    }
    /* A new reference for the caller's scope, taken before the map lets go. */
    if (t) tg_scope_track(tg_retain(t));
    tg_tensor_map_free(m);
    return t;
}
