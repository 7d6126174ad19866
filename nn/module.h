/* The module system (torch.nn.Module): a module is a type (a small vtable: name,
 * forward, optional free and extra_repr), a block of per-module state, and three
 * ordered lists of named members: parameters (leaf tensors with requires_grad),
 * buffers (tensors that are state but not trained: BatchNorm's running statistics)
 * and children (sub-modules). Built-in layers (nn/layers.h) and user modules are
 * made the same way, so iteration, train/eval, device moves, printing and freeing
 * work for both.
 *
 * Ownership: a module holds its own reference to every parameter and buffer (it
 * tg_retain's what is registered) and owns its children outright;
 * tg_module_free(root) releases all of it. Accessors return BORROWED references.
 *
 * A user module:
 *
 *     typedef struct { int hidden; } mlp_state;
 *     static tg_tensor *mlp_forward(tg_module *self, tg_tensor *x) {
 *         x = tg_relu(tg_forward(tg_module_child(self, "fc1"), x));
 *         return tg_add(tg_forward(tg_module_child(self, "fc2"), x), tg_module_param(self, "offset"));
 *     }
 *     static const tg_module_type mlp_type = {.name = "MLP", .forward = mlp_forward};
 *
 *     tg_module *m = tg_module_new(&mlp_type, sizeof(mlp_state));
 *     tg_register_module(m, "fc1", tg_nn_linear(784, 128, (tg_linear_opts){0}));
 *     tg_register_module(m, "fc2", tg_nn_linear(128, 10, (tg_linear_opts){0}));
 *     TG_SCOPE { tg_register_parameter(m, "offset", tg_zeros(TG_SHAPE(10), (tg_opts){0})); }
 *
 * Names follow PyTorch's named_parameters()/state_dict(): a module's own members
 * first, in registration order, then each child's, prefixed "child." — so
 * Sequential(Linear, ReLU, Linear) has "0.weight", "0.bias", "2.weight", "2.bias". */
#ifndef TG_NN_MODULE_H
#define TG_NN_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/options.h" /* TG_OPTS_WITH_DEFAULTS */
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_module tg_module;

/* What a kind of module does. Static storage duration; only name and forward are required. */
typedef struct tg_module_type {
    const char *name; /* the class name shown by tg_module_print: "Linear" */
    /* Computes the output for x: a NEW reference, or NULL after recording an error.
     * Runs inside tg_forward's scope, so temporaries need no releasing. */
    tg_tensor *(*forward)(tg_module *self, tg_tensor *x);
    /* Optional: releases whatever the state block holds beyond registered members
     * (called by tg_module_free before the members and the state are freed). */
    void (*free)(tg_module *self);
    /* Optional: writes the constructor arguments, e.g. "in_features=784, out_features=10"
     * (PyTorch's extra_repr). */
    void (*extra_repr)(tg_module *self, char *buf, size_t size);
} tg_module_type;

/* A named member, as listed by the iteration functions below. Both pointers borrowed. */
typedef struct {
    const char *name; /* dotted: "features.0.weight" */
    tg_tensor *tensor;
} tg_named_tensor;

/* ---- making modules ---- */

/* A new, empty module of `type` in training mode, with a zeroed state block of
 * state_size bytes (tg_module_state). NULL + error when type or type->forward is NULL.
 * The caller owns it: tg_module_free, or register it as a child of another module. */
tg_module *tg_module_new(const tg_module_type *type, size_t state_size);
/* The state block (NULL when state_size was 0). Borrowed. */
void *tg_module_state(tg_module *m);
const tg_module_type *tg_module_type_of(const tg_module *m);

/* torch.nn.Module.register_parameter: adds t under `name` (no dots, unique within m)
 * and marks it requires_grad. The module takes a reference of its own (tg_retain); the
 * caller's reference is untouched (inside a scope, the scope drops it). Fails on a
 * NULL tensor, a duplicate or dotted name, or a non-floating tensor. */
tg_status tg_register_parameter(tg_module *m, const char *name, tg_tensor *t);
/* torch.nn.Module.register_buffer: as above, without requires_grad. */
tg_status tg_register_buffer(tg_module *m, const char *name, tg_tensor *t);
/* torch.nn.Module.add_module: m takes ownership of child (also on failure, when the
 * child is freed). Fails on NULL, a duplicate name, or a child that already has a parent. */
tg_status tg_register_module(tg_module *m, const char *name, tg_module *child);

/* setattr(module, name, child) for an existing child: frees the old child and puts
 * c in its place (same position in the iteration order). m takes ownership of c, also
 * on failure (freed), except when c already has a parent. Fails when m has no child
 * called name. */
tg_status tg_module_replace_child(tg_module *m, const char *name, tg_module *c);

/* As tg_module_replace_child, but the old child is returned (without a parent, owned
 * by the caller) instead of freed: how tg_fuse_modules moves a Conv2d into the fused
 * module that replaces it. NULL + error as tg_module_replace_child fails. */
tg_module *tg_module_swap_child(tg_module *m, const char *name, tg_module *c);

/* ---- members (borrowed) ---- */

/* m's own parameter / buffer called `name`, or NULL (no error recorded). As PyTorch's
 * getattr, tg_module_param falls back to a tensor attribute of that name (below):
 * a pruned Linear's "weight" is the attribute weight_orig * weight_mask. */
tg_tensor *tg_module_param(tg_module *m, const char *name);
tg_tensor *tg_module_buffer(tg_module *m, const char *name);
/* torch.nn.Module's `del module._parameters[name]` / `del module._buffers[name]`:
 * drops m's member and its reference. Fails when m has no such member. */
tg_status tg_unregister_parameter(tg_module *m, const char *name);
tg_status tg_unregister_buffer(tg_module *m, const char *name);

/* Plain tensor attributes (PyTorch's `module.weight = tensor` for a tensor that is
 * neither parameter nor buffer): not in the state dict, not moved by tg_module_to.
 * set_attr takes a reference of its own and replaces an attribute of the same name;
 * t NULL removes it. tg_module_attr returns a borrowed reference or NULL. */
tg_status tg_module_set_attr(tg_module *m, const char *name, tg_tensor *t);
tg_tensor *tg_module_attr(tg_module *m, const char *name);

/* m's direct child called `name`, or NULL. */
tg_module *tg_module_child(tg_module *m, const char *name);
int tg_module_num_children(const tg_module *m);
/* The i-th direct child (registration order), or NULL; *name (when not NULL) gets its name. */
tg_module *tg_module_child_at(tg_module *m, int i, const char **name);
/* Any parameter or buffer by its dotted state_dict name ("features.0.running_mean"), or NULL. */
tg_tensor *tg_module_get(tg_module *m, const char *dotted_name);

/* torch.nn.Module.named_parameters(), named_buffers(), state_dict() (parameters and
 * buffers, module by module, each module's parameters before its buffers) and
 * parameters(). Return a borrowed array of *count entries, owned by m and valid until
 * a member is registered anywhere or m is freed. NULL (count 0) for NULL m. A tensor
 * registered under two names (tied weights) appears once in parameters and buffers
 * (its first name) and under both names in the state dict, as in PyTorch. */
const tg_named_tensor *tg_named_parameters(tg_module *m, int *count);
const tg_named_tensor *tg_named_buffers(tg_module *m, int *count);
const tg_named_tensor *tg_state_dict(tg_module *m, int *count);
tg_tensor *const *tg_parameters(tg_module *m, int *count);
/* Total number of parameter elements (sum(p.numel() for p in m.parameters()), tied ones once). */
int64_t tg_module_num_params(tg_module *m);

/* ---- running ---- */

/* m(x): runs m's forward inside a scope of its own (its temporaries are freed when
 * it returns) and returns a NEW reference, owned by the caller's innermost scope
 * (or by the caller when none is open). NULL + error when m or x is NULL or forward
 * fails (built-in layers name themselves and the shapes in their own checks).
 * The vtable's forward must return a reference made by an op (tracked by the open
 * scope); an identity layer returns tg_scope_track(tg_retain(x)). */
tg_tensor *tg_forward(tg_module *m, tg_tensor *x);

/* ---- hooks (torch.nn.Module.register_forward_pre_hook / register_forward_hook) ----
 *
 * tg_forward(m, x) runs, inside m's scope: every pre-hook in registration order, each
 * seeing the input the previous one left; m's forward; every forward hook in order,
 * each seeing the (possibly replaced) input and the output the previous one left.
 * A hook returns TG_OK, or TG_ERROR after recording an error, which makes tg_forward
 * fail with that error (later hooks and the forward do not run). To replace the input
 * (pre-hook) or the output (forward hook), store a tensor made by an op into
 * *input / *output (PyTorch's "return a modified value"); leave it to keep it. Hooks
 * are not inherited: a hook on a Sequential runs once around the whole sequence, a
 * hook on a child each time the child runs. `user` is borrowed, passed through. */
typedef tg_status (*tg_forward_pre_hook_fn)(tg_module *m, tg_tensor **input, void *user);
typedef tg_status (*tg_forward_hook_fn)(tg_module *m, tg_tensor *input, tg_tensor **output, void *user);

/* PyTorch's RemovableHandle: pass it to tg_hook_remove. id 0 marks a failed registration. */
typedef struct {
    tg_module *module;
    uint64_t id;
} tg_hook_handle;

/* Adds a hook to m; the handle removes it. A NULL m or fn records an error and returns {NULL, 0}. */
tg_hook_handle tg_register_forward_pre_hook(tg_module *m, tg_forward_pre_hook_fn fn, void *user);
tg_hook_handle tg_register_forward_hook(tg_module *m, tg_forward_hook_fn fn, void *user);
/* handle.remove(): removes the hook if still there (a second remove does nothing, as in
 * PyTorch). The module must still be alive. Returns whether a hook was removed. */
bool tg_hook_remove(tg_hook_handle handle);
/* A pre-hook that owns `user`: free_user(user) runs when the hook is removed or m is
 * freed (also right away when registration fails). For hooks that carry state, as
 * pruning's (quant/prune.h). */
tg_hook_handle tg_register_forward_pre_hook_owned(tg_module *m, tg_forward_pre_hook_fn fn, void *user,
                                                  void (*free_user)(void *user));
/* Whether m has any forward pre-hook or forward hook (a caller that runs a module's
 * computation without tg_forward, as tg_nn_batch_norm_add_relu, goes through tg_forward
 * when it does). */
bool tg_module_has_hooks(const tg_module *m);
/* The i-th forward pre-hook of m (registration order), its function and user pointer
 * (borrowed) through the pointers that are not NULL; {NULL, 0} past the end. Lets code
 * find a hook it added before (pruning finds its own by function and name). */
tg_hook_handle tg_forward_pre_hook_at(const tg_module *m, int i, tg_forward_pre_hook_fn *fn, void **user);

/* torch.nn.Module.train(on) / eval(): sets the mode of m and all its descendants. */
void tg_train(tg_module *m, bool on);
static inline void tg_eval(tg_module *m) { tg_train(m, false); }
bool tg_is_training(const tg_module *m);

/* torch.nn.Module.zero_grad(set_to_none=True): drops every parameter's .grad. */
void tg_module_zero_grad(tg_module *m);

/* torch.nn.Module.to(device): moves every parameter, buffer and gradient to device
 * in place, keeping the tensors' identity (an optimizer made before the move keeps
 * working, as with PyTorch's param.data = ...). Fails (and leaves the remaining
 * tensors where they were) when a copy fails. */
tg_status tg_module_to(tg_module *m, tg_device device);
/* torch.nn.Module.to(dtype) (.double(), .float()): casts floating parameters,
 * buffers and gradients in place; integer buffers (num_batches_tracked) stay. */
tg_status tg_module_cast(tg_module *m, tg_dtype dtype);

/* Frees m, its children (recursively), and its references to parameters and
 * buffers (the tensors die with them unless someone else holds a reference, e.g. an
 * optimizer until tg_optim_free). NULL-safe. Do not free a module that has a parent:
 * free the root. */
void tg_module_free(tg_module *m);

/* Writes a summary: one line per module (dotted name, type, output shape for an
 * input of `input_shape` (batch dim included), parameter count including
 * descendants), then total and trainable parameter counts. Runs one forward of
 * zeros in eval mode without grad (the train/eval mode is restored; running
 * statistics are untouched); the input has the dtype and device of m's first
 * parameter (float32 CPU when none). Layers whose forward fails show "?". */
tg_status tg_module_print(tg_module *m, tg_shape input_shape, FILE *out);
/* tg_module_print on a given example input of any dtype and device (token ids for a
 * model that starts with an Embedding: int64), whose values the forward sees; the
 * header names its shape and dtype. The example is borrowed and left as it is. */
tg_status tg_module_print_input(tg_module *m, tg_tensor *example, FILE *out);

#ifdef __cplusplus
}

/* tg_to(x, device) for tensors and modules alike. */
static inline tg_tensor *tg_to(tg_tensor *t, tg_device device) { return tg_tensor_to(t, device); }
static inline tg_status tg_to(tg_module *m, tg_device device) { return tg_module_to(m, device); }
#else
/* tg_to(x, device): tg_tensor_to for a tensor (a NEW reference), tg_module_to for a
 * module (a tg_status; the module is moved in place). */
#define tg_to(x, device) _Generic((x), tg_tensor * : tg_tensor_to, tg_module * : tg_module_to)((x), (device))
#endif

#endif
