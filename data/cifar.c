/* CIFAR-10/100 binary records (see data/cifar.h). */
#include "data/cifar.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/scope.h"

enum { CIFAR_PATH_CAP = 4096, CIFAR_MAX_FILES = 5 };

static size_t label_bytes(tg_cifar_kind kind) { return kind == TG_CIFAR10 ? 1 : 2; }
static size_t record_bytes(tg_cifar_kind kind) { return label_bytes(kind) + TG_CIFAR_IMAGE_BYTES; }
static int num_classes(tg_cifar_kind kind) { return kind == TG_CIFAR10 ? 10 : kind == TG_CIFAR100 ? 100 : 20; }
static const char *label_name(tg_cifar_kind kind) {
    return kind == TG_CIFAR10 ? "label" : kind == TG_CIFAR100 ? "fine label" : "coarse label";
}

/* Checks that n bytes are whole records of `kind`; the record count, or -1 + error. */
static int64_t count_records(const char *op, size_t n, tg_cifar_kind kind, const char *name) {
    size_t rec = record_bytes(kind);
    if (n == 0) return tg_error("%s: %s: the file is empty (no %zu-byte records)", op, name, rec), -1;
    if (n % rec != 0)
        return tg_error("%s: %s: truncated record at byte offset %zu: %zu bytes are %zu whole %zu-byte records "
                        "and %zu bytes more (a %s file?)",
                        op, name, n / rec * rec, n, n / rec, rec, n % rec,
                        kind == TG_CIFAR10 ? "CIFAR-100 file read as CIFAR-10, or a cut"
                                           : "CIFAR-10 file read as CIFAR-100, or a cut"),
               -1;
    return (int64_t)(n / rec);
}

/* Copies `count` records into images/labels (room for them), checking each label. */
static bool parse_records(const char *op, const uint8_t *p, int64_t count, tg_cifar_kind kind, const char *name,
                          uint8_t *images, int64_t *labels) {
    size_t rec = record_bytes(kind);
    size_t at = kind == TG_CIFAR100 ? 1 : 0; /* CIFAR-100 records are coarse, fine */
    for (int64_t i = 0; i < count; i++) {
        const uint8_t *r = p + (size_t)i * rec;
        int label = r[at];
        if (label >= num_classes(kind))
            return tg_error("%s: %s: %s %d at byte offset %zu (record %lld) is out of range 0..%d", op, name,
                            label_name(kind), label, (size_t)i * rec + at, (long long)i, num_classes(kind) - 1),
                   false;
        labels[i] = label;
        memcpy(images + (size_t)i * TG_CIFAR_IMAGE_BYTES, r + label_bytes(kind), TG_CIFAR_IMAGE_BYTES);
    }
    return true;
}

/* Empty [count, 3, 32, 32] uint8 and [count] int64 tensors in the current scope. */
static tg_cifar make_empty(int64_t count) {
    tg_cifar c = {tg_empty(TG_SHAPE(count, 3, 32, 32), (tg_opts){.dtype = TG_UINT8}), NULL};
    if (c.images) c.labels = tg_empty(TG_SHAPE(count), (tg_opts){.dtype = TG_INT64});
    return c;
}

static bool valid_kind(const char *op, tg_cifar_kind kind) {
    if (kind == TG_CIFAR10 || kind == TG_CIFAR100 || kind == TG_CIFAR100_COARSE) return true;
    tg_error("%s: unknown kind %d (TG_CIFAR10, TG_CIFAR100 or TG_CIFAR100_COARSE)", op, (int)kind);
    return false;
}

tg_cifar tg_cifar_parse(const void *data, size_t nbytes, tg_cifar_kind kind, const char *name) {
    const char *op = "tg_cifar_parse";
    tg_cifar result = {NULL, NULL};
    if (!name) name = "<memory>";
    if (!valid_kind(op, kind)) return result;
    if (!data && nbytes) return tg_error("%s: %s: data is NULL", op, name), result;
    int64_t count = count_records(op, nbytes, kind, name);
    if (count < 0) return result;
    TG_SCOPE {
        tg_cifar c = make_empty(count);
        if (c.labels && parse_records(op, data, count, kind, name, tg_data_ptr(c.images), tg_data_ptr(c.labels))) {
            result.images = tg_scope_return(c.images);
            result.labels = tg_scope_return(c.labels);
        }
    }
    return result;
}

/* ---- files ---- */

typedef struct {
    char path[CIFAR_PATH_CAP + 32]; /* the folder (< CIFAR_PATH_CAP - 64) and a file name */
    size_t size;
} cifar_file;

/* The split's file names, in order. */
static int split_files(tg_cifar_kind kind, tg_cifar_split split, const char *names[CIFAR_MAX_FILES]) {
    if (kind != TG_CIFAR10) {
        names[0] = split == TG_CIFAR_TRAIN ? "train.bin" : "test.bin";
        return 1;
    }
    if (split == TG_CIFAR_TEST) {
        names[0] = "test_batch.bin";
        return 1;
    }
    static const char *const train[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                                        "data_batch_5.bin"};
    for (int i = 0; i < 5; i++) names[i] = train[i];
    return 5;
}

/* Where the files are: dir itself, or the folder the archive unpacks to inside it. */
static bool find_dir(const char *dir, tg_cifar_kind kind, const char *first, char *out) {
    const char *sub = kind == TG_CIFAR10 ? "cifar-10-batches-bin" : "cifar-100-binary";
    char path[CIFAR_PATH_CAP + 32];
    for (int i = 0; i < 2; i++) {
        int len = i == 0 ? snprintf(out, CIFAR_PATH_CAP, "%s", dir) : snprintf(out, CIFAR_PATH_CAP, "%s/%s", dir, sub);
        if (len < 0 || len >= CIFAR_PATH_CAP - 64) {
            tg_error("tg_cifar_load: directory name too long (%zu characters)", strlen(dir));
            return false;
        }
        if (snprintf(path, sizeof path, "%s/%s", out, first) < (int)sizeof path && access(path, F_OK) == 0) return true;
    }
    tg_error("tg_cifar_load: missing file %s/%s (also looked in %s/%s/). CIFAR data is not shipped with tapegrad: "
             "unpack the binary version (%s) from https://www.cs.toronto.edu/~kriz/cifar.html",
             dir, first, dir, sub, kind == TG_CIFAR10 ? "cifar-10-binary.tar.gz" : "cifar-100-binary.tar.gz");
    return false;
}

/* The whole contents of f->path in a malloc'd buffer of f->size bytes, or NULL + error. */
static uint8_t *read_file(const cifar_file *f) {
    FILE *fp = fopen(f->path, "rb");
    if (!fp) return tg_error("tg_cifar_load: cannot open %s: %s", f->path, strerror(errno)), NULL;
    uint8_t *buf = malloc(f->size ? f->size : 1);
    size_t got = buf ? fread(buf, 1, f->size, fp) : 0;
    int e = ferror(fp) ? errno : 0;
    fclose(fp);
    if (!buf) return tg_error("tg_cifar_load: %s: out of memory for %zu bytes", f->path, f->size), NULL;
    if (got != f->size) {
        free(buf);
        tg_error("tg_cifar_load: %s: read %zu of %zu bytes%s%s (the file changed while read?)", f->path, got, f->size,
                 e ? ": " : "", e ? strerror(e) : "");
        return NULL;
    }
    return buf;
}

tg_cifar tg_cifar_load(const char *dir, tg_cifar_kind kind, tg_cifar_split split) {
    const char *op = "tg_cifar_load";
    tg_cifar result = {NULL, NULL};
    if (!dir) return tg_error("%s: dir is NULL", op), result;
    if (!valid_kind(op, kind)) return result;
    if (split != TG_CIFAR_TRAIN && split != TG_CIFAR_TEST)
        return tg_error("%s: unknown split %d (TG_CIFAR_TRAIN or TG_CIFAR_TEST)", op, (int)split), result;
    const char *names[CIFAR_MAX_FILES];
    int nfiles = split_files(kind, split, names);
    char base[CIFAR_PATH_CAP];
    if (!find_dir(dir, kind, names[0], base)) return result;
    /* Sizes first: the tensors are allocated once and each file is read into them. */
    cifar_file files[CIFAR_MAX_FILES];
    int64_t counts[CIFAR_MAX_FILES], total = 0;
    for (int i = 0; i < nfiles; i++) {
        if (snprintf(files[i].path, sizeof files[i].path, "%s/%s", base, names[i]) >= (int)sizeof files[i].path)
            return tg_error("%s: directory name too long", op), result;
        FILE *fp = fopen(files[i].path, "rb");
        if (!fp) return tg_error("%s: cannot open %s: %s", op, files[i].path, strerror(errno)), result;
        long size = fseek(fp, 0, SEEK_END) == 0 ? ftell(fp) : -1;
        fclose(fp);
        if (size < 0) return tg_error("%s: %s: cannot find its size (not a regular file?)", op, files[i].path), result;
        files[i].size = (size_t)size;
        counts[i] = count_records(op, files[i].size, kind, files[i].path);
        if (counts[i] < 0) return result;
        total += counts[i];
    }
    TG_SCOPE {
        tg_cifar c = make_empty(total);
        bool ok = c.labels != NULL;
        uint8_t *images = ok ? tg_data_ptr(c.images) : NULL;
        int64_t *labels = ok ? tg_data_ptr(c.labels) : NULL;
        for (int i = 0; i < nfiles && ok; i++) {
            uint8_t *buf = read_file(&files[i]);
            ok = buf && parse_records(op, buf, counts[i], kind, files[i].path, images, labels);
            free(buf);
            images += (size_t)counts[i] * TG_CIFAR_IMAGE_BYTES;
            labels += counts[i];
        }
        if (ok) {
            result.images = tg_scope_return(c.images);
            result.labels = tg_scope_return(c.labels);
        }
    }
    return result;
}
