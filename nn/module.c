/* The module system: members, iteration with dotted names, train/eval, device and
 * dtype moves, freeing, the printed summary. See nn/module.h. */
#include "nn/module.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"

typedef struct {
    char *name;
    tg_tensor *tensor; /* owned reference */
} member;

typedef struct {
    char *name;
    tg_module *module; /* owned */
} child;

typedef struct {
    member *items;
    int count, capacity;
} member_list;

/* The flattened, dotted views of a module tree (tg_named_parameters & co.), rebuilt
 * when the global generation moved (something was registered somewhere). */
typedef struct {
    uint64_t generation;
    tg_named_tensor *params, *buffers, *state;
    int num_params, num_buffers, num_state;
    tg_tensor **param_tensors;
    char **names; /* every dotted name the three lists point to */
    int num_names, names_capacity;
} flat_cache;

typedef struct {
    uint64_t id;
    tg_forward_pre_hook_fn pre; /* exactly one of pre / post is set */
    tg_forward_hook_fn post;
    void *user;
    void (*free_user)(void *user); /* NULL: user is borrowed */
} hook;

static atomic_uint_fast64_t next_hook_id = 1;

struct tg_module {
    const tg_module_type *type;
    void *state;
    bool training;
    tg_module *parent;
    member_list params, buffers;
    member_list attrs; /* plain tensor attributes (not state): a pruned module's "weight" */
    child *children;
    int num_children, children_capacity;
    flat_cache cache;
    hook *hooks; /* pre-hooks and forward hooks, in registration order */
    int num_hooks, hooks_capacity;
    bool has_output; /* tg_module_print: the shape of the last forward's output */
    tg_shape output_shape;
};

static atomic_uint_fast64_t generation = 1;

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    TG_ASSERT(d != NULL);
    memcpy(d, s, n);
    return d;
}

tg_module *tg_module_new(const tg_module_type *type, size_t state_size) {
    if (!type || !type->forward) {
        tg_error("tg_module_new: the module type %s has no forward function",
                 type && type->name ? type->name : "(NULL)");
        return NULL;
    }
    tg_module *m = calloc(1, sizeof *m);
    TG_ASSERT(m != NULL);
    m->type = type;
    m->training = true;
    if (state_size) {
        m->state = calloc(1, state_size);
        TG_ASSERT(m->state != NULL);
    }
    return m;
}

void *tg_module_state(tg_module *m) { return m ? m->state : NULL; }
const tg_module_type *tg_module_type_of(const tg_module *m) { return m ? m->type : NULL; }

static const char *type_name(const tg_module *m) { return m->type->name ? m->type->name : "Module"; }

static bool name_taken(const tg_module *m, const char *name) {
    for (int i = 0; i < m->params.count; i++)
        if (!strcmp(m->params.items[i].name, name)) return true;
    for (int i = 0; i < m->buffers.count; i++)
        if (!strcmp(m->buffers.items[i].name, name)) return true;
    for (int i = 0; i < m->num_children; i++)
        if (!strcmp(m->children[i].name, name)) return true;
    return false;
}

static tg_status check_name(const tg_module *m, const char *what, const char *name) {
    if (!name || !*name || strchr(name, '.'))
        return tg_error("%s: %s name \"%s\" must be non-empty and contain no '.'", type_name(m), what,
                        name ? name : "(NULL)");
    if (name_taken(m, name))
        return tg_error("%s: a member named \"%s\" already exists (registering a %s)", type_name(m), name, what);
    return TG_OK;
}

static void member_push(member_list *l, const char *name, tg_tensor *t) {
    if (l->count == l->capacity) {
        int cap = l->capacity ? 2 * l->capacity : 4;
        member *items = realloc(l->items, (size_t)cap * sizeof *items);
        TG_ASSERT(items != NULL);
        l->items = items;
        l->capacity = cap;
    }
    l->items[l->count++] = (member){dup_string(name), tg_retain(t)};
    atomic_fetch_add(&generation, 1);
}

tg_status tg_register_parameter(tg_module *m, const char *name, tg_tensor *t) {
    if (!m) return tg_error("tg_register_parameter: module is NULL");
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_register_parameter", t, 0);
    if (check_name(m, "parameter", name)) return TG_ERROR;
    if (!tg_dtype_is_floating(tg_dtype_of(t)))
        return tg_error("%s: parameter \"%s\" must be floating point, got %s", type_name(m), name,
                        tg_dtype_name(tg_dtype_of(t)));
    if (!tg_is_leaf(t))
        return tg_error("%s: parameter \"%s\" must be a leaf tensor (made by %s); pass tg_detach(t)", type_name(m),
                        name, tg_grad_fn_name(t));
    if (!tg_requires_grad_(t, true)) return TG_ERROR;
    member_push(&m->params, name, t);
    return TG_OK;
}

tg_status tg_register_buffer(tg_module *m, const char *name, tg_tensor *t) {
    if (!m) return tg_error("tg_register_buffer: module is NULL");
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_register_buffer", t, 0);
    if (check_name(m, "buffer", name)) return TG_ERROR;
    member_push(&m->buffers, name, t);
    return TG_OK;
}

tg_status tg_register_module(tg_module *m, const char *name, tg_module *c) {
    if (!m) {
        tg_module_free(c);
        return tg_error("tg_register_module: parent module is NULL");
    }
    if (!c) {
        if (!tg_has_error()) tg_error("%s: child module \"%s\" is NULL", type_name(m), name ? name : "");
        return TG_ERROR;
    }
    if (c->parent || c == m) {
        tg_error("%s: child \"%s\" (%s) already has a parent", type_name(m), name ? name : "", type_name(c));
        return TG_ERROR; /* not ours to free: it belongs to its parent */
    }
    if (check_name(m, "child module", name)) {
        tg_module_free(c);
        return TG_ERROR;
    }
    if (m->num_children == m->children_capacity) {
        int cap = m->children_capacity ? 2 * m->children_capacity : 4;
        child *items = realloc(m->children, (size_t)cap * sizeof *items);
        TG_ASSERT(items != NULL);
        m->children = items;
        m->children_capacity = cap;
    }
    m->children[m->num_children++] = (child){dup_string(name), c};
    c->parent = m;
    c->training = m->training;
    atomic_fetch_add(&generation, 1);
    return TG_OK;
}

/* Puts c in the place of m's child `name`; returns the old child, unparented (NULL +
 * error on failure, c freed unless it has a parent). */
static tg_module *swap_child(const char *op, tg_module *m, const char *name, tg_module *c) {
    if (!m) {
        tg_module_free(c);
        tg_error("%s: parent module is NULL", op);
        return NULL;
    }
    if (!c) {
        if (!tg_has_error()) tg_error("%s: new child module \"%s\" is NULL", type_name(m), name ? name : "");
        return NULL;
    }
    if (c->parent || c == m) {
        tg_error("%s: new child \"%s\" (%s) already has a parent", type_name(m), name ? name : "", type_name(c));
        return NULL;
    }
    for (int i = 0; name && i < m->num_children; i++) {
        if (strcmp(m->children[i].name, name)) continue;
        tg_module *old = m->children[i].module;
        old->parent = NULL;
        m->children[i].module = c;
        c->parent = m;
        c->training = m->training;
        atomic_fetch_add(&generation, 1);
        return old;
    }
    tg_module_free(c);
    tg_error("%s: no child module named \"%s\" to replace", type_name(m), name ? name : "(NULL)");
    return NULL;
}

tg_status tg_module_replace_child(tg_module *m, const char *name, tg_module *c) {
    tg_module *old = swap_child("tg_module_replace_child", m, name, c);
    if (!old) return TG_ERROR;
    tg_module_free(old);
    return TG_OK;
}

tg_module *tg_module_swap_child(tg_module *m, const char *name, tg_module *c) {
    return swap_child("tg_module_swap_child", m, name, c);
}

static tg_tensor *find_member(const member_list *l, const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < l->count; i++)
        if (!strcmp(l->items[i].name, name)) return l->items[i].tensor;
    return NULL;
}

tg_tensor *tg_module_param(tg_module *m, const char *name) {
    if (!m) return NULL;
    tg_tensor *t = find_member(&m->params, name);
    return t ? t : find_member(&m->attrs, name);
}

tg_tensor *tg_module_attr(tg_module *m, const char *name) { return m ? find_member(&m->attrs, name) : NULL; }

tg_status tg_module_set_attr(tg_module *m, const char *name, tg_tensor *t) {
    if (!m) return tg_error("tg_module_set_attr: module is NULL");
    if (!name || !*name || strchr(name, '.'))
        return tg_error("%s: attribute name \"%s\" must be non-empty and contain no '.'", type_name(m),
                        name ? name : "(NULL)");
    for (int i = 0; i < m->attrs.count; i++) {
        if (strcmp(m->attrs.items[i].name, name)) continue;
        tg_tensor *old = m->attrs.items[i].tensor;
        if (t) {
            m->attrs.items[i].tensor = tg_retain(t);
        } else {
            free(m->attrs.items[i].name);
            m->attrs.items[i] = m->attrs.items[--m->attrs.count];
        }
        tg_release(old);
        return TG_OK;
    }
    if (!t) return TG_OK;
    /* not member_push: attributes are in no cached list, so the generation stays */
    if (m->attrs.count == m->attrs.capacity) {
        int cap = m->attrs.capacity ? 2 * m->attrs.capacity : 2;
        member *items = realloc(m->attrs.items, (size_t)cap * sizeof *items);
        TG_ASSERT(items != NULL);
        m->attrs.items = items;
        m->attrs.capacity = cap;
    }
    m->attrs.items[m->attrs.count++] = (member){dup_string(name), tg_retain(t)};
    return TG_OK;
}

/* Removes `name` from l, handing its reference to the caller (NULL when absent). */
static tg_tensor *member_take(member_list *l, const char *name) {
    for (int i = 0; i < l->count; i++) {
        if (strcmp(l->items[i].name, name)) continue;
        tg_tensor *t = l->items[i].tensor;
        free(l->items[i].name);
        memmove(l->items + i, l->items + i + 1, (size_t)(l->count - i - 1) * sizeof *l->items);
        l->count--;
        atomic_fetch_add(&generation, 1);
        return t;
    }
    return NULL;
}

static tg_status unregister(tg_module *m, member_list *l, const char *what, const char *name) {
    if (!m) return tg_error("tg_unregister_%s: module is NULL", what);
    tg_tensor *t = name ? member_take(l, name) : NULL;
    if (!t) return tg_error("%s: no %s named \"%s\" to remove", type_name(m), what, name ? name : "(NULL)");
    tg_release(t);
    return TG_OK;
}

tg_status tg_unregister_parameter(tg_module *m, const char *name) {
    return unregister(m, m ? &m->params : NULL, "parameter", name);
}
tg_status tg_unregister_buffer(tg_module *m, const char *name) {
    return unregister(m, m ? &m->buffers : NULL, "buffer", name);
}

tg_tensor *tg_module_buffer(tg_module *m, const char *name) { return m ? find_member(&m->buffers, name) : NULL; }

tg_module *tg_module_child(tg_module *m, const char *name) {
    if (!m || !name) return NULL;
    for (int i = 0; i < m->num_children; i++)
        if (!strcmp(m->children[i].name, name)) return m->children[i].module;
    return NULL;
}

int tg_module_num_children(const tg_module *m) { return m ? m->num_children : 0; }

tg_module *tg_module_child_at(tg_module *m, int i, const char **name) {
    if (!m || i < 0 || i >= m->num_children) return NULL;
    if (name) *name = m->children[i].name;
    return m->children[i].module;
}

/* ---- flattened views ---- */

typedef struct {
    tg_named_tensor *items;
    int count, capacity;
} named_list;

static void named_push(named_list *l, const char *name, tg_tensor *t) {
    if (l->count == l->capacity) {
        int cap = l->capacity ? 2 * l->capacity : 16;
        tg_named_tensor *items = realloc(l->items, (size_t)cap * sizeof *items);
        TG_ASSERT(items != NULL);
        l->items = items;
        l->capacity = cap;
    }
    l->items[l->count++] = (tg_named_tensor){name, t};
}

static const char *cache_name(flat_cache *c, const char *prefix, const char *name) {
    size_t n = strlen(prefix) + strlen(name) + 1;
    char *s = malloc(n);
    TG_ASSERT(s != NULL);
    strcpy(s, prefix);
    strcat(s, name);
    if (c->num_names == c->names_capacity) {
        int cap = c->names_capacity ? 2 * c->names_capacity : 32;
        char **names = realloc(c->names, (size_t)cap * sizeof *names);
        TG_ASSERT(names != NULL);
        c->names = names;
        c->names_capacity = cap;
    }
    c->names[c->num_names++] = s;
    return s;
}

static bool listed(const named_list *l, const tg_tensor *t) {
    for (int i = 0; i < l->count; i++)
        if (l->items[i].tensor == t) return true;
    return false;
}

/* named_modules() order: a module's own members, then each child's, depth first. A
 * tensor registered twice (tied weights) is listed once in parameters and buffers,
 * under its first name, and under every name in the state dict, as in PyTorch. */
static void collect(flat_cache *c, tg_module *m, const char *prefix, named_list *params, named_list *buffers,
                    named_list *state) {
    for (int i = 0; i < m->params.count; i++) {
        const char *name = cache_name(c, prefix, m->params.items[i].name);
        if (!listed(params, m->params.items[i].tensor)) named_push(params, name, m->params.items[i].tensor);
        named_push(state, name, m->params.items[i].tensor);
    }
    for (int i = 0; i < m->buffers.count; i++) {
        const char *name = cache_name(c, prefix, m->buffers.items[i].name);
        if (!listed(buffers, m->buffers.items[i].tensor)) named_push(buffers, name, m->buffers.items[i].tensor);
        named_push(state, name, m->buffers.items[i].tensor);
    }
    for (int i = 0; i < m->num_children; i++) {
        size_t n = strlen(prefix) + strlen(m->children[i].name) + 2;
        char *child_prefix = malloc(n);
        TG_ASSERT(child_prefix != NULL);
        snprintf(child_prefix, n, "%s%s.", prefix, m->children[i].name);
        collect(c, m->children[i].module, child_prefix, params, buffers, state);
        free(child_prefix);
    }
}

static void cache_clear(flat_cache *c) {
    for (int i = 0; i < c->num_names; i++) free(c->names[i]);
    free(c->names);
    free(c->params);
    free(c->buffers);
    free(c->state);
    free(c->param_tensors);
    *c = (flat_cache){0};
}

static flat_cache *flat(tg_module *m) {
    uint64_t now = atomic_load(&generation);
    if (m->cache.generation == now) return &m->cache;
    cache_clear(&m->cache);
    named_list params = {0}, buffers = {0}, state = {0};
    collect(&m->cache, m, "", &params, &buffers, &state);
    flat_cache *c = &m->cache;
    c->params = params.items;
    c->num_params = params.count;
    c->buffers = buffers.items;
    c->num_buffers = buffers.count;
    c->state = state.items;
    c->num_state = state.count;
    c->param_tensors = malloc((size_t)(params.count ? params.count : 1) * sizeof *c->param_tensors);
    TG_ASSERT(c->param_tensors != NULL);
    for (int i = 0; i < params.count; i++) c->param_tensors[i] = params.items[i].tensor;
    c->generation = now;
    return c;
}

const tg_named_tensor *tg_named_parameters(tg_module *m, int *count) {
    if (!m) return (void)(count && (*count = 0)), NULL;
    flat_cache *c = flat(m);
    if (count) *count = c->num_params;
    return c->params;
}

const tg_named_tensor *tg_named_buffers(tg_module *m, int *count) {
    if (!m) return (void)(count && (*count = 0)), NULL;
    flat_cache *c = flat(m);
    if (count) *count = c->num_buffers;
    return c->buffers;
}

const tg_named_tensor *tg_state_dict(tg_module *m, int *count) {
    if (!m) return (void)(count && (*count = 0)), NULL;
    flat_cache *c = flat(m);
    if (count) *count = c->num_state;
    return c->state;
}

tg_tensor *const *tg_parameters(tg_module *m, int *count) {
    if (!m) return (void)(count && (*count = 0)), NULL;
    flat_cache *c = flat(m);
    if (count) *count = c->num_params;
    return c->param_tensors;
}

tg_tensor *tg_module_get(tg_module *m, const char *dotted_name) {
    if (!m || !dotted_name) return NULL;
    flat_cache *c = flat(m);
    for (int i = 0; i < c->num_state; i++)
        if (!strcmp(c->state[i].name, dotted_name)) return c->state[i].tensor;
    return NULL;
}

/* Elements of m's parameters and its descendants', each tensor once (tied weights). */
static int64_t own_and_descendant_params(tg_module *m, bool trainable_only) {
    int n = 0;
    tg_tensor *const *params = tg_parameters(m, &n);
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        if (!trainable_only || tg_requires_grad(params[i])) total += tg_numel(params[i]);
    return total;
}

int64_t tg_module_num_params(tg_module *m) { return m ? own_and_descendant_params(m, false) : 0; }

/* ---- running ---- */

/* ---- hooks ---- */

bool tg_module_has_hooks(const tg_module *m) { return m && m->num_hooks > 0; }

static tg_hook_handle add_hook(tg_module *m, hook h) {
    if (m->num_hooks == m->hooks_capacity) {
        int cap = m->hooks_capacity ? 2 * m->hooks_capacity : 4;
        hook *items = realloc(m->hooks, (size_t)cap * sizeof *items);
        TG_ASSERT(items != NULL);
        m->hooks = items;
        m->hooks_capacity = cap;
    }
    h.id = atomic_fetch_add(&next_hook_id, 1);
    m->hooks[m->num_hooks++] = h;
    return (tg_hook_handle){m, h.id};
}

tg_hook_handle tg_register_forward_pre_hook(tg_module *m, tg_forward_pre_hook_fn fn, void *user) {
    if (!m || !fn) {
        tg_error("tg_register_forward_pre_hook: %s is NULL", m ? "the hook function" : "module");
        return (tg_hook_handle){NULL, 0};
    }
    return add_hook(m, (hook){.pre = fn, .user = user});
}

tg_hook_handle tg_register_forward_pre_hook_owned(tg_module *m, tg_forward_pre_hook_fn fn, void *user,
                                                  void (*free_user)(void *user)) {
    if (!m || !fn) {
        tg_error("tg_register_forward_pre_hook_owned: %s is NULL", m ? "the hook function" : "module");
        if (free_user) free_user(user);
        return (tg_hook_handle){NULL, 0};
    }
    return add_hook(m, (hook){.pre = fn, .user = user, .free_user = free_user});
}

tg_hook_handle tg_forward_pre_hook_at(const tg_module *m, int i, tg_forward_pre_hook_fn *fn, void **user) {
    for (int k = 0; m && k < m->num_hooks; k++) {
        if (!m->hooks[k].pre || i-- > 0) continue;
        if (fn) *fn = m->hooks[k].pre;
        if (user) *user = m->hooks[k].user;
        return (tg_hook_handle){(tg_module *)m, m->hooks[k].id};
    }
    return (tg_hook_handle){NULL, 0};
}

tg_hook_handle tg_register_forward_hook(tg_module *m, tg_forward_hook_fn fn, void *user) {
    if (!m || !fn) {
        tg_error("tg_register_forward_hook: %s is NULL", m ? "the hook function" : "module");
        return (tg_hook_handle){NULL, 0};
    }
    return add_hook(m, (hook){.post = fn, .user = user});
}

bool tg_hook_remove(tg_hook_handle handle) {
    tg_module *m = handle.module;
    if (!m || !handle.id) return false;
    for (int i = 0; i < m->num_hooks; i++) {
        if (m->hooks[i].id != handle.id) continue;
        hook h = m->hooks[i];
        memmove(&m->hooks[i], &m->hooks[i + 1], (size_t)(m->num_hooks - i - 1) * sizeof *m->hooks);
        m->num_hooks--;
        if (h.free_user) h.free_user(h.user);
        return true;
    }
    return false;
}

static const hook *find_hook(const tg_module *m, uint64_t id) {
    for (int i = 0; i < m->num_hooks; i++)
        if (m->hooks[i].id == id) return &m->hooks[i];
    return NULL;
}

/* Pre-hooks, forward, forward hooks (in m's scope). The hooks present when the
 * forward starts run, in order, each looked up by id when its turn comes: a hook
 * may remove itself or others (a removed one is skipped), and one added meanwhile
 * waits for the next call. */
static tg_tensor *run_hooked(tg_module *m, tg_tensor *x) {
    int n = m->num_hooks;
    if (n == 0) return m->type->forward(m, x);
    uint64_t *ids = malloc((size_t)n * sizeof *ids);
    TG_ASSERT(ids != NULL);
    for (int i = 0; i < n; i++) ids[i] = m->hooks[i].id;
    tg_tensor *y = NULL;
    bool ok = true;
    for (int i = 0; ok && i < n; i++) {
        const hook *h = find_hook(m, ids[i]);
        if (!h || !h->pre) continue;
        tg_tensor *in = x;
        if (h->pre(m, &in, h->user)) ok = false;
        else if (!in) ok = false, tg_error("%s: a forward pre-hook set the input to NULL", type_name(m));
        else x = in;
    }
    if (ok) y = m->type->forward(m, x);
    for (int i = 0; y && i < n; i++) {
        const hook *h = find_hook(m, ids[i]);
        if (!h || !h->post) continue;
        tg_tensor *out = y;
        if (h->post(m, x, &out, h->user)) y = NULL;
        else if (!out) y = NULL, tg_error("%s: a forward hook set the output to NULL", type_name(m));
        else y = out;
    }
    free(ids);
    return y;
}

tg_tensor *tg_forward(tg_module *m, tg_tensor *x) {
    if (!m) {
        tg_error("tg_forward: module is NULL");
        return NULL;
    }
    if (!x) {
        tg_error_null_input(type_name(m), 0);
        return NULL;
    }
    unsigned long errors = tg_error_count();
    tg_scope_begin();
    tg_tensor *y = run_hooked(m, x);
    if (y) {
        tg_scope_return(y);
        m->has_output = true;
        m->output_shape = tg_shape_of(y);
    } else if (tg_error_count() == errors) {
        tg_error("%s: forward returned NULL without recording an error", type_name(m));
    }
    tg_scope_end();
    return y;
}

void tg_train(tg_module *m, bool on) {
    if (!m) return;
    m->training = on;
    for (int i = 0; i < m->num_children; i++) tg_train(m->children[i].module, on);
}

bool tg_is_training(const tg_module *m) { return m && m->training; }

void tg_module_zero_grad(tg_module *m) {
    int n = 0;
    tg_tensor *const *params = tg_parameters(m, &n);
    for (int i = 0; i < n; i++) tg_zero_grad(params[i]);
}

/* Replaces t's storage with a copy on `device` / in `dtype`, keeping the tensor
 * struct (and so every pointer to it) — PyTorch's module._apply(param.data = fn(...)). */
static tg_status convert_in_place(tg_tensor *t, tg_device device, tg_dtype dtype) {
    if (!t) return TG_OK;
    if (t->grad && convert_in_place(t->grad, device, dtype)) return TG_ERROR;
    if (tg_device_equal(tg_device_of(t), device) && tg_dtype_of(t) == dtype) return TG_OK;
    tg_status status = TG_ERROR;
    bool prev = tg_set_grad_enabled(false);
    tg_scope_begin();
    tg_tensor *plain = tg_detach(t);
    tg_tensor *cast = tg_dtype_of(t) == dtype ? plain : tg_cast(plain, dtype);
    tg_tensor *moved = cast ? tg_tensor_to(cast, device) : NULL;
    if (moved) {
        tg_tensor *fresh = tg_clone_values(moved); /* its own storage, contiguous */
        if (fresh) {
            tg_storage *s = t->storage;
            t->storage = fresh->storage;
            fresh->storage = s;
            int64_t offset = t->offset;
            t->offset = fresh->offset;
            fresh->offset = offset;
            for (int i = 0; i < TG_MAX_DIMS; i++) {
                int64_t st = t->strides[i];
                t->strides[i] = fresh->strides[i];
                fresh->strides[i] = st;
            }
            tg_dtype d = t->dtype;
            t->dtype = fresh->dtype;
            fresh->dtype = d;
            status = TG_OK;
        }
    }
    tg_scope_end();
    tg_set_grad_enabled(prev);
    return status;
}

static tg_status convert_module(tg_module *m, tg_device device, bool cast, tg_dtype dtype) {
    int n = 0;
    const tg_named_tensor *all = tg_state_dict(m, &n);
    for (int i = 0; i < n; i++) {
        tg_tensor *t = all[i].tensor;
        bool floating = tg_dtype_is_floating(tg_dtype_of(t));
        tg_dtype target = cast && floating ? dtype : tg_dtype_of(t);
        tg_device dev = cast ? tg_device_of(t) : device;
        if (convert_in_place(t, dev, target)) return TG_ERROR;
    }
    return TG_OK;
}

tg_status tg_module_to(tg_module *m, tg_device device) {
    if (!m) return tg_error("tg_module_to: module is NULL");
    return convert_module(m, device, false, TG_FLOAT32);
}

tg_status tg_module_cast(tg_module *m, tg_dtype dtype) {
    if (!m) return tg_error("tg_module_cast: module is NULL");
    if (!tg_dtype_is_floating(dtype) || !tg_dtype_is_supported(dtype))
        return tg_error("tg_module_cast: %s is not a supported floating dtype", tg_dtype_name(dtype));
    return convert_module(m, TG_CPU, true, dtype);
}

static void free_members(member_list *l) {
    for (int i = 0; i < l->count; i++) {
        free(l->items[i].name);
        tg_release(l->items[i].tensor);
    }
    free(l->items);
}

void tg_module_free(tg_module *m) {
    if (!m) return;
    if (m->type->free) m->type->free(m);
    for (int i = 0; i < m->num_children; i++) {
        m->children[i].module->parent = NULL;
        tg_module_free(m->children[i].module);
        free(m->children[i].name);
    }
    free(m->children);
    for (int i = 0; i < m->num_hooks; i++)
        if (m->hooks[i].free_user) m->hooks[i].free_user(m->hooks[i].user);
    free(m->hooks);
    free_members(&m->params);
    free_members(&m->buffers);
    free_members(&m->attrs);
    cache_clear(&m->cache);
    free(m->state);
    free(m);
    atomic_fetch_add(&generation, 1);
}

/* ---- summary ---- */

static void clear_outputs(tg_module *m) {
    m->has_output = false;
    for (int i = 0; i < m->num_children; i++) clear_outputs(m->children[i].module);
}

static void save_modes(tg_module *m, bool **modes, int *n, int *cap) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        *modes = realloc(*modes, (size_t)*cap * sizeof **modes);
        TG_ASSERT(*modes != NULL);
    }
    (*modes)[(*n)++] = m->training;
    for (int i = 0; i < m->num_children; i++) save_modes(m->children[i].module, modes, n, cap);
}

static void restore_modes(tg_module *m, const bool *modes, int *i) {
    m->training = modes[(*i)++];
    for (int c = 0; c < m->num_children; c++) restore_modes(m->children[c].module, modes, i);
}

/* Writes printf output to buf, ending it with "..." when it does not fit (the table
 * shows very deep names cut rather than overflowing). */
static void format_cut(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void format_cut(char *buf, size_t size, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(buf, size, fmt, args);
    va_end(args);
    if (n >= (int)size && size > 4) memcpy(buf + size - 4, "...", 4);
}

static void print_rows(tg_module *m, const char *name, int depth, FILE *out) {
    char label[160], shape[96];
    format_cut(label, sizeof label, "%*s%s (%s)", 2 * depth, "", name, type_name(m));
    if (m->has_output) tg_shape_str(m->output_shape, shape, sizeof shape);
    else snprintf(shape, sizeof shape, "?");
    fprintf(out, "%-40s %-24s %12" PRId64 "\n", label, shape, own_and_descendant_params(m, false));
    for (int i = 0; i < m->num_children; i++) {
        char child_name[160];
        if (depth == 0 && !*name) format_cut(child_name, sizeof child_name, "%s", m->children[i].name);
        else format_cut(child_name, sizeof child_name, "%s.%s", name, m->children[i].name);
        print_rows(m->children[i].module, child_name, depth + 1, out);
    }
}

/* The summary of m run once on x (NULL: an input that could not be made, every row
 * "?"); `input` is the header's description of the input. */
static tg_status print_summary(tg_module *m, tg_tensor *x, const char *input, FILE *out) {
    bool *modes = NULL;
    int num_modes = 0, cap = 0, restored = 0;
    save_modes(m, &modes, &num_modes, &cap);
    tg_train(m, false);
    clear_outputs(m);
    unsigned long errors = tg_error_count();
    bool prev = tg_set_grad_enabled(false);
    tg_scope_begin();
    tg_tensor *y = x ? tg_forward(m, x) : NULL;
    tg_scope_end();
    tg_set_grad_enabled(prev);
    restore_modes(m, modes, &restored);
    free(modes);
    if (!y && tg_error_count() != errors) tg_clear_error(); /* the summary shows "?" instead */

    char shape[96];
    fprintf(out, "%s (input %s)\n", type_name(m), input);
    fprintf(out, "%-40s %-24s %12s\n", "Layer (type)", "Output Shape", "Param #");
    for (int i = 0; i < 78; i++) fputc('=', out);
    fputc('\n', out);
    if (m->num_children == 0) {
        print_rows(m, "", 0, out);
    } else {
        for (int i = 0; i < m->num_children; i++) print_rows(m->children[i].module, m->children[i].name, 0, out);
        int64_t own = 0;
        for (int i = 0; i < m->params.count; i++) own += tg_numel(m->params.items[i].tensor);
        if (own) fprintf(out, "%-40s %-24s %12" PRId64 "\n", "(own parameters)", "", own);
    }
    for (int i = 0; i < 78; i++) fputc('=', out);
    fputc('\n', out);
    int64_t total = own_and_descendant_params(m, false), trainable = own_and_descendant_params(m, true);
    fprintf(out, "Output: %s\n", m->has_output ? tg_shape_str(m->output_shape, shape, sizeof shape) : "?");
    fprintf(out, "Total params: %" PRId64 "\nTrainable params: %" PRId64 "\nNon-trainable params: %" PRId64 "\n", total,
            trainable, total - trainable);
    return TG_OK;
}

tg_status tg_module_print(tg_module *m, tg_shape input_shape, FILE *out) {
    if (!m) return tg_error("tg_module_print: module is NULL");
    if (!out) return tg_error("tg_module_print: FILE is NULL");
    int n = 0;
    tg_tensor *const *params = tg_parameters(m, &n);
    tg_opts opts = {0};
    if (n > 0) {
        opts.dtype = tg_dtype_of(params[0]);
        opts.device = tg_device_of(params[0]);
    }
    char shape[96];
    tg_shape_str(input_shape, shape, sizeof shape);
    tg_status status;
    TG_SCOPE {
        unsigned long errors = tg_error_count();
        tg_tensor *x = tg_zeros(input_shape, opts);
        if (!x && tg_error_count() != errors) tg_clear_error();
        status = print_summary(m, x, shape, out);
    }
    return status;
}

tg_status tg_module_print_input(tg_module *m, tg_tensor *example, FILE *out) {
    if (!m) return tg_error("tg_module_print_input: module is NULL");
    if (!out) return tg_error("tg_module_print_input: FILE is NULL");
    if (tg_unusable_(example)) return tg_error_unusable_input("tg_module_print_input", example, 0);
    char shape[96], input[128];
    snprintf(input, sizeof input, "%s %s", tg_shape_str(tg_shape_of(example), shape, sizeof shape),
             tg_dtype_name(tg_dtype_of(example)));
    return print_summary(m, example, input, out);
}
