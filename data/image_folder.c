/* The image-folder data set (see data/image_folder.h). */
#include "data/image_folder.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/scope.h"
#include "data/image_decode.h"

/* Folders below a class deeper than this are not walked (a link cycle). */
enum { MAX_DEPTH = 64 };

typedef struct {
    char *path;
    int64_t label;
} sample;

struct tg_image_folder {
    char **classes;
    int num_classes;
    sample *samples;
    int64_t size, cap;
};

/* A growable list of malloc'd strings. */
typedef struct {
    char **items;
    size_t n, cap;
} str_list;

static bool str_push(str_list *l, char *s) {
    if (!s) return false;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **grown = realloc(l->items, cap * sizeof *grown);
        if (!grown) return free(s), false;
        l->items = grown;
        l->cap = cap;
    }
    l->items[l->n++] = s;
    return true;
}

static void str_free(str_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->items[i]);
    free(l->items);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void sort_strs(str_list *l) {
    if (l->n > 1) qsort(l->items, l->n, sizeof *l->items, cmp_str); /* items may be NULL when empty */
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", dir, name);
    return s;
}

static bool is_image_name(const char *name) {
    size_t n = strlen(name);
    static const char *const exts[] = {".png", ".jpg", ".jpeg"};
    for (int i = 0; i < 3; i++) {
        size_t e = strlen(exts[i]);
        if (n >= e && strcasecmp(name + n - e, exts[i]) == 0) return true;
    }
    return false;
}

/* The entries of dir: subfolders into *dirs, image files into *files (names only),
 * both unsorted. stat, not lstat: links are followed, as os.walk(followlinks=True). */
static tg_status list_dir(const char *dir, str_list *dirs, str_list *files) {
    DIR *d = opendir(dir);
    if (!d) return tg_error("tg_image_folder_new: cannot read folder %s: %s", dir, strerror(errno));
    struct dirent *e;
    tg_status status = TG_OK;
    while (status == TG_OK && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char *path = join(dir, e->d_name);
        struct stat st;
        if (!path) {
            status = tg_error("tg_image_folder_new: out of memory listing %s", dir);
        } else if (stat(path, &st) != 0) {
            free(path); /* a dangling link: os.scandir's is_dir() is false too */
        } else if (S_ISDIR(st.st_mode) && dirs) {
            if (!str_push(dirs, strdup(e->d_name))) status = tg_error("tg_image_folder_new: out of memory");
            free(path);
        } else if (S_ISREG(st.st_mode) && files && is_image_name(e->d_name)) {
            if (!str_push(files, strdup(e->d_name))) status = tg_error("tg_image_folder_new: out of memory");
            free(path);
        } else {
            free(path);
        }
    }
    closedir(d);
    return status;
}

/* Every folder at and below dir (full paths), for sorting as os.walk's roots. */
static tg_status walk(const char *dir, int depth, str_list *out) {
    char *copy = strdup(dir);
    if (!str_push(out, copy)) return tg_error("tg_image_folder_new: out of memory");
    if (depth >= MAX_DEPTH) return TG_OK;
    str_list subs = {0};
    tg_status status = list_dir(dir, &subs, NULL);
    for (size_t i = 0; i < subs.n && status == TG_OK; i++) {
        char *path = join(dir, subs.items[i]);
        status = path ? walk(path, depth + 1, out) : tg_error("tg_image_folder_new: out of memory");
        free(path);
    }
    str_free(&subs);
    return status;
}

static tg_status add_sample(tg_image_folder *f, char *path, int64_t label) {
    if (!path) return tg_error("tg_image_folder_new: out of memory");
    if (f->size == f->cap) {
        int64_t cap = f->cap ? 2 * f->cap : 64;
        sample *grown = realloc(f->samples, (size_t)cap * sizeof *grown);
        if (!grown) return free(path), tg_error("tg_image_folder_new: out of memory for %lld samples", (long long)cap);
        f->samples = grown;
        f->cap = cap;
    }
    f->samples[f->size++] = (sample){path, label};
    return TG_OK;
}

/* The samples of class `label` in ImageFolder's order: sorted(os.walk(class_dir)), then
 * sorted(file names) in each folder. */
static tg_status scan_class(tg_image_folder *f, const char *class_dir, int64_t label) {
    str_list folders = {0};
    tg_status status = walk(class_dir, 0, &folders);
    if (status == TG_OK) sort_strs(&folders);
    int64_t before = f->size;
    for (size_t i = 0; i < folders.n && status == TG_OK; i++) {
        str_list files = {0};
        status = list_dir(folders.items[i], NULL, &files);
        if (status == TG_OK) sort_strs(&files);
        for (size_t j = 0; j < files.n && status == TG_OK; j++)
            status = add_sample(f, join(folders.items[i], files.items[j]), label);
        str_free(&files);
    }
    str_free(&folders);
    if (status == TG_OK && f->size == before)
        status = tg_error("tg_image_folder_new: class folder %s has no image file (.png, .jpg, .jpeg)", class_dir);
    return status;
}

tg_image_folder *tg_image_folder_new(const char *root) {
    if (!root) return tg_error("tg_image_folder_new: root is NULL"), NULL;
    tg_image_folder *f = calloc(1, sizeof *f);
    if (!f) return tg_error("tg_image_folder_new: out of memory"), NULL;
    str_list classes = {0};
    tg_status status = list_dir(root, &classes, NULL);
    if (status == TG_OK && classes.n == 0)
        status = tg_error("tg_image_folder_new: no class folder in %s (expected root/<class>/<image>)", root);
    if (status == TG_OK) sort_strs(&classes);
    f->classes = classes.items;
    f->num_classes = (int)classes.n;
    for (int c = 0; c < f->num_classes && status == TG_OK; c++) {
        char *dir = join(root, f->classes[c]);
        status = dir ? scan_class(f, dir, c) : tg_error("tg_image_folder_new: out of memory");
        free(dir);
    }
    if (status != TG_OK) {
        tg_image_folder_free(f);
        return NULL;
    }
    return f;
}

void tg_image_folder_free(tg_image_folder *f) {
    if (!f) return;
    for (int c = 0; c < f->num_classes; c++) free(f->classes[c]);
    free(f->classes);
    for (int64_t i = 0; i < f->size; i++) free(f->samples[i].path);
    free(f->samples);
    free(f);
}

int64_t tg_image_folder_size(const tg_image_folder *f) { return f ? f->size : 0; }
int tg_image_folder_num_classes(const tg_image_folder *f) { return f ? f->num_classes : 0; }

const char *tg_image_folder_class_name(const tg_image_folder *f, int c) {
    return f && c >= 0 && c < f->num_classes ? f->classes[c] : NULL;
}

const char *tg_image_folder_path(const tg_image_folder *f, int64_t i) {
    return f && i >= 0 && i < f->size ? f->samples[i].path : NULL;
}

int64_t tg_image_folder_label(const tg_image_folder *f, int64_t i) {
    return f && i >= 0 && i < f->size ? f->samples[i].label : -1;
}

tg_status tg_image_folder_get(const tg_image_folder *f, int64_t i, tg_tensor **image, tg_tensor **label) {
    if (image) *image = NULL;
    if (label) *label = NULL;
    if (!f || !image) return tg_error("tg_image_folder_get: %s is NULL", f ? "the image pointer" : "the folder");
    if (i < 0 || i >= f->size)
        return tg_error("tg_image_folder_get: index %lld is out of range for %lld samples", (long long)i,
                        (long long)f->size);
    tg_status status = TG_ERROR;
    TG_SCOPE {
        tg_tensor *img = tg_image_load(f->samples[i].path);
        tg_tensor *lab =
            img ? tg_full(TG_SCALAR_SHAPE, (double)f->samples[i].label, (tg_opts){.dtype = TG_INT64}) : NULL;
        if (lab) {
            *image = tg_scope_return(img);
            if (label) *label = tg_scope_return(lab);
            status = TG_OK;
        }
    }
    return status;
}

static tg_status dataset_get(void *ctx, int64_t index, tg_tensor **x, tg_tensor **y) {
    return tg_image_folder_get(ctx, index, x, y);
}

tg_dataset tg_image_folder_dataset(const tg_image_folder *f) {
    return (tg_dataset){.size = tg_image_folder_size(f), .get = dataset_get, .ctx = (void *)f};
}
