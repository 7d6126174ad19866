/* tg_tensor_map: an ordered dictionary of owned tensor references plus string
 * metadata (see io/safetensors.h). Linear lookup: state dicts have hundreds of
 * entries, not millions, and insertion order must be kept anyway. */
#include <stdlib.h>
#include <string.h>

#include "core/scope.h"
#include "io/safetensors.h"
#include "core/tensor_impl.h"

typedef struct {
    char *name;
    tg_tensor *tensor; /* owned reference */
} map_entry;

typedef struct {
    char *key, *value;
} meta_entry;

struct tg_tensor_map {
    map_entry *entries;
    int64_t size, cap;
    meta_entry *meta;
    int64_t meta_size, meta_cap;
};

tg_tensor_map *tg_tensor_map_new(void) {
    tg_tensor_map *m = calloc(1, sizeof *m);
    if (!m) tg_error("tg_tensor_map_new: out of memory");
    return m;
}

void tg_tensor_map_free(tg_tensor_map *m) {
    if (!m) return;
    for (int64_t i = 0; i < m->size; i++) {
        free(m->entries[i].name);
        tg_release(m->entries[i].tensor);
    }
    for (int64_t i = 0; i < m->meta_size; i++) {
        free(m->meta[i].key);
        free(m->meta[i].value);
    }
    free(m->entries);
    free(m->meta);
    free(m);
}

static int64_t find(const tg_tensor_map *m, const char *name) {
    for (int64_t i = 0; i < m->size; i++)
        if (strcmp(m->entries[i].name, name) == 0) return i;
    return -1;
}

/* Grows an array of `elem`-byte items to hold one more; false on out of memory. */
static bool grow(void **items, int64_t size, int64_t *cap, size_t elem) {
    if (size < *cap) return true;
    int64_t new_cap = *cap ? *cap * 2 : 8;
    void *p = realloc(*items, (size_t)new_cap * elem);
    if (!p) return false;
    *items = p;
    *cap = new_cap;
    return true;
}

tg_status tg_tensor_map_set(tg_tensor_map *m, const char *name, tg_tensor *t) {
    if (!m || !name) return tg_error("tg_tensor_map_set: %s is NULL", m ? "name" : "map");
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_tensor_map_set", t, 0);
    if (!name[0]) return tg_error("tg_tensor_map_set: empty tensor name");
    if (strcmp(name, "__metadata__") == 0)
        return tg_error("tg_tensor_map_set: the name \"__metadata__\" is reserved by the "
                        "safetensors format");
    int64_t i = find(m, name);
    if (i >= 0) {
        tg_retain(t); /* before releasing: t may be the same tensor */
        tg_release(m->entries[i].tensor);
        m->entries[i].tensor = t;
        return TG_OK;
    }
    char *copy = strdup(name);
    if (!copy || !grow((void **)&m->entries, m->size, &m->cap, sizeof *m->entries)) {
        free(copy);
        return tg_error("tg_tensor_map_set: out of memory adding \"%s\"", name);
    }
    m->entries[m->size++] = (map_entry){copy, tg_retain(t)};
    return TG_OK;
}

tg_tensor *tg_tensor_map_get(const tg_tensor_map *m, const char *name) {
    if (!m || !name) return NULL;
    int64_t i = find(m, name);
    return i >= 0 ? m->entries[i].tensor : NULL;
}

bool tg_tensor_map_remove(tg_tensor_map *m, const char *name) {
    if (!m || !name) return false;
    int64_t i = find(m, name);
    if (i < 0) return false;
    free(m->entries[i].name);
    tg_release(m->entries[i].tensor);
    memmove(m->entries + i, m->entries + i + 1, (size_t)(m->size - i - 1) * sizeof *m->entries);
    m->size--;
    return true;
}

int64_t tg_tensor_map_size(const tg_tensor_map *m) { return m ? m->size : 0; }

const char *tg_tensor_map_name(const tg_tensor_map *m, int64_t i) {
    return m && i >= 0 && i < m->size ? m->entries[i].name : NULL;
}

tg_tensor *tg_tensor_map_tensor(const tg_tensor_map *m, int64_t i) {
    return m && i >= 0 && i < m->size ? m->entries[i].tensor : NULL;
}

tg_status tg_tensor_map_set_metadata(tg_tensor_map *m, const char *key, const char *value) {
    if (!m || !key || !value)
        return tg_error("tg_tensor_map_set_metadata: %s is NULL", !m ? "map" : !key ? "key" : "value");
    char *v = strdup(value);
    if (!v) return tg_error("tg_tensor_map_set_metadata: out of memory");
    for (int64_t i = 0; i < m->meta_size; i++) {
        if (strcmp(m->meta[i].key, key) == 0) {
            free(m->meta[i].value);
            m->meta[i].value = v;
            return TG_OK;
        }
    }
    char *k = strdup(key);
    if (!k || !grow((void **)&m->meta, m->meta_size, &m->meta_cap, sizeof *m->meta)) {
        free(k);
        free(v);
        return tg_error("tg_tensor_map_set_metadata: out of memory");
    }
    m->meta[m->meta_size++] = (meta_entry){k, v};
    return TG_OK;
}

const char *tg_tensor_map_metadata(const tg_tensor_map *m, const char *key) {
    if (!m || !key) return NULL;
    for (int64_t i = 0; i < m->meta_size; i++)
        if (strcmp(m->meta[i].key, key) == 0) return m->meta[i].value;
    return NULL;
}

int64_t tg_tensor_map_metadata_size(const tg_tensor_map *m) { return m ? m->meta_size : 0; }

const char *tg_tensor_map_metadata_key(const tg_tensor_map *m, int64_t i) {
    return m && i >= 0 && i < m->meta_size ? m->meta[i].key : NULL;
}

const char *tg_tensor_map_metadata_value(const tg_tensor_map *m, int64_t i) {
    return m && i >= 0 && i < m->meta_size ? m->meta[i].value : NULL;
}

tg_status tg_tensor_map_merge(tg_tensor_map *dst, const tg_tensor_map *src, const char *prefix) {
    if (!dst || !src) return tg_error("tg_tensor_map_merge: %s map is NULL", dst ? "src" : "dst");
    if (!prefix) prefix = "";
    size_t plen = strlen(prefix);
    for (int64_t i = 0; i < src->size; i++) {
        const char *name = src->entries[i].name;
        char *full = malloc(plen + strlen(name) + 1);
        if (!full) return tg_error("tg_tensor_map_merge: out of memory");
        memcpy(full, prefix, plen);
        strcpy(full + plen, name);
        tg_status s = tg_tensor_map_set(dst, full, src->entries[i].tensor);
        free(full);
        if (s) return s;
    }
    return TG_OK;
}

tg_tensor_map *tg_tensor_map_select(const tg_tensor_map *m, const char *prefix) {
    if (!m) return tg_error("tg_tensor_map_select: map is NULL"), NULL;
    if (!prefix) prefix = "";
    size_t plen = strlen(prefix);
    tg_tensor_map *out = tg_tensor_map_new();
    if (!out) return NULL;
    for (int64_t i = 0; i < m->size; i++) {
        const char *name = m->entries[i].name;
        /* An entry named exactly `prefix` would get an empty name: skip it. */
        if (strncmp(name, prefix, plen) != 0 || !name[plen]) continue;
        if (tg_tensor_map_set(out, name + plen, m->entries[i].tensor)) {
            tg_tensor_map_free(out);
            return NULL;
        }
    }
    return out;
}
