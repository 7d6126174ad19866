/* Graph nodes, for autograd's own files. A node is one recorded application of a
 * tg_function: its saved tensors and attributes, one edge per input, and the
 * metadata of each input and output. Nodes are reference-counted: tensors hold
 * their grad_fn, nodes hold the nodes (and leaf tensors) of their inputs. */
#ifndef TG_AUTOGRAD_NODE_H
#define TG_AUTOGRAD_NODE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "autograd/function.h"
#include "core/tensor_impl.h"

typedef struct tg_node tg_node;

typedef struct {
    tg_node *node;   /* producer of the input (owned), or NULL for a leaf / no grad */
    int output_nr;   /* which output of node */
    tg_tensor *leaf; /* the leaf tensor to accumulate into (owned), or NULL */
} tg_edge;

typedef struct {
    tg_shape shape;
    tg_dtype dtype;
    tg_device device;
} tg_tensor_meta;

typedef struct {
    tg_tensor *tensor; /* owned; for a saved output, a graph-less alias */
    uint64_t version;  /* storage version at save time */
    int output_index;  /* >= 0 when this is output k of the node itself */
} tg_saved;

typedef struct tg_hook_entry {
    tg_tensor *(*fn)(tg_tensor *grad, void *user);
    void *user;
    struct tg_hook_entry *next;
} tg_hook_entry;

typedef struct tg_post_hook_entry {
    void (*fn)(tg_tensor *leaf, void *user);
    void *user;
    struct tg_post_hook_entry *next;
} tg_post_hook_entry;

struct tg_hook_list {
    tg_hook_entry *first;
    tg_post_hook_entry *post_first; /* post-accumulate-grad hooks (leaves only) */
};

struct tg_ctx {
    tg_node *node; /* NULL while a forward runs without recording */
    const tg_function *fn;
    const void *args; /* forward-time attributes when not recording */
    tg_tensor *outputs[TG_MAX_OP_OUTPUTS];
    bool non_differentiable[TG_MAX_OP_OUTPUTS];
};

struct tg_node {
    long refcount;
    const tg_function *fn;
    uint64_t sequence_nr;
    int num_inputs, num_outputs;
    tg_edge edges[TG_MAX_OP_INPUTS];
    bool output_differentiable[TG_MAX_OP_OUTPUTS];
    tg_hook_entry *output_hooks[TG_MAX_OP_OUTPUTS]; /* hooks on non-leaf outputs (owned) */
    /* Not owned: the tensor whose .grad keeps output k's gradient (tg_retain_grad).
     * Cleared when that tensor is freed (free_tensor_slots) and moved with it by an
     * in-place write (tg_inplace_commit), so it never dangles. */
    tg_tensor *retains_grad[TG_MAX_OP_OUTPUTS];
    tg_saved *saved; /* saved_inline, or heap beyond its size */
    int num_saved, saved_capacity;
    bool saved_freed; /* released by a backward without retain_graph */
    void *attrs;      /* attrs_inline or heap */
    size_t attrs_size;
    /* The claim of the backward that is running this node. A backward's state
     * (dependencies, gradients) lives in its graph task, never here: the claim lets a
     * backward on a second thread refuse a node that one on the first is running, and
     * tells the claiming task where its state for the node is (read only by that task,
     * after checking the owner; a nested task on the same thread uses its own map). */
    _Atomic(const void *) backward_owner; /* the claiming thread's token, or NULL */
    const void *backward_task;            /* the claiming graph task */
    long backward_slot;                   /* the node's index in that task's state */
    bool needs_input_grad[TG_MAX_OP_INPUTS];
    tg_ctx ctx; /* ctx.node == this node; what forward and backward are given */
    /* Not cleared when a node struct is reused (TG_NODE_CLEARED_BYTES): each is
     * written before it is read, and clearing ~1.3 KB per op showed in the profile. */
    tg_tensor_meta input_meta[TG_MAX_OP_INPUTS];
    tg_tensor_meta output_meta[TG_MAX_OP_OUTPUTS];
    tg_saved saved_inline[4];
    _Alignas(16) unsigned char attrs_inline[96]; /* attribute structs hold doubles and pointers */
};
#define TG_NODE_CLEARED_BYTES offsetof(tg_node, input_meta)

/* What tg_ctx_grad_output reads: the summed output gradients of the node whose
 * backward this thread is running, set by the engine around each call (and put
 * back afterwards, so a backward inside a backward restores the outer one). */
typedef struct {
    const tg_node *node;
    tg_tensor **grads; /* [num_outputs], owned by the engine's graph task */
    bool capturing;    /* the backward is a tg_grad_of (leaves' .grad untouched): tg_checkpoint refuses it */
} tg_backward_frame;
/* Hidden: library state, not part of the exported ABI. */
extern __attribute__((visibility("hidden"))) _Thread_local tg_backward_frame tg_current_backward_frame;

void tg_node_retain(tg_node *n);
/* Drops a reference; frees at zero, iteratively (a 100,000-node chain does not recurse). */
void tg_node_release(tg_node *n);

#endif
