/* Module state dicts and training checkpoints as safetensors files.
 *
 *     tg_save_state_dict(model, "mlp.safetensors");            // torch.save(model.state_dict())
 *     tg_load_state_dict(model, "mlp.safetensors", true);      // model.load_state_dict(..., strict=True)
 *
 *     tg_save_checkpoint("ck.safetensors", model, opt, (tg_checkpoint_info){.step = s, .epoch = e});
 *     tg_checkpoint_info info;
 *     tg_load_checkpoint("ck.safetensors", model, opt, &info);   // resume: same params, moments,
 *                                                               // lr, step/epoch and RNG stream
 *
 * A state-dict file holds the module's parameters and buffers under PyTorch's names
 * ("0.weight", "features.1.running_mean"), so it loads in PyTorch with
 * safetensors.torch.load_file + load_state_dict, and the other way round.
 *
 * A checkpoint holds "model.<name>" for the state dict, "optim.state.<i>.<key>" for
 * the optimizer's per-parameter state (optim/optim.h's names), and metadata:
 * "tapegrad.checkpoint" = "1", "step", "epoch", "optim.name", "optim.lr" (group 0's
 * lr), "optim.groups" (the number of parameter groups) and, per group g,
 * "optim.group.<g>.params" (its parameter count), "optim.group.<g>.lr" and
 * "optim.group.<g>.momentum" (SGD/RMSprop momentum or Adam beta1, which OneCycleLR
 * moves; optional when loading), the state of every LR scheduler made on the
 * optimizer ("sched.count"; per scheduler i "sched.<i>.name", "sched.<i>.settings",
 * "sched.<i>.last_epoch", "sched.<i>.step_count", "sched.<i>.groups" and per group g
 * "sched.<i>.group.<g>.base_lr" / ".last_lr"), and the RNG state "rng.seed",
 * "rng.offset" (core/rng.h), all decimal strings, and, when a GradScaler was made on
 * the optimizer (optim/grad_scaler.h), "scaler.scale", "scaler.growth_tracker",
 * "scaler.growth_factor", "scaler.backoff_factor", "scaler.growth_interval" and
 * "scaler.enabled" (loading restores them into the scaler made on the optimizer; a
 * file without them is then an error). Files written before parameter
 * groups have no "optim.groups": loading one sets every group's lr to "optim.lr".
 *
 * Loading is all or nothing: every name, shape and dtype is checked first, every
 * problem is reported in ONE message, and nothing is modified unless all is well.
 * Values are copied into the module's own tensors (tg_copy_), so optimizers and
 * anything else holding them keep working, on whatever device the module is. */
#ifndef TG_IO_CHECKPOINT_H
#define TG_IO_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "io/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_module tg_module; /* nn/module.h */
typedef struct tg_optim tg_optim;   /* optim/optim.h */

/* module.state_dict() as a new map sharing the module's tensors (no copies; the map
 * holds its own references). NULL + error on a NULL module or out of memory. */
tg_tensor_map *tg_module_state_map(tg_module *m);

/* Copies state into m's parameters and buffers (torch.nn.Module.load_state_dict).
 * strict: names must match exactly (missing and unexpected keys are errors);
 * non-strict: entries whose name the module lacks are ignored, and module tensors
 * without an entry keep their values. Shape and dtype must match in both modes
 * (PyTorch also fails on shapes; tapegrad refuses a silent dtype cast). On failure,
 * one message lists every missing key, unexpected key, shape and dtype mismatch, and
 * m is untouched. `what` labels the message (a path; NULL: "state dict"). */
tg_status tg_module_load_state_map(tg_module *m, const tg_tensor_map *state, bool strict, const char *what);

/* torch.save(m.state_dict(), path) in safetensors form. */
tg_status tg_save_state_dict(tg_module *m, const char *path);
/* m.load_state_dict(load_file(path), strict); errors as tg_module_load_state_map,
 * plus the file's own (missing, malformed). */
tg_status tg_load_state_dict(tg_module *m, const char *path, bool strict);

typedef struct {
    int64_t step;
    int64_t epoch;
} tg_checkpoint_info;

/* Writes model state, optimizer state, lrs and schedulers (opt may be NULL), step/epoch and the
 * global RNG state to path. */
tg_status tg_save_checkpoint(const char *path, tg_module *model, tg_optim *opt, tg_checkpoint_info info);
/* Restores what tg_save_checkpoint wrote: the model strictly, the optimizer (when
 * opt is not NULL: its kind must match, its parameter groups must have the file's
 * number and sizes, as PyTorch's load_state_dict checks, and its state entries must
 * fit), each group's lr, the state of the schedulers made on opt (they must be the
 * file's, in number, order, kind and settings; with none made, the file's are
 * ignored), the RNG state, and *info (when not NULL). Fails without modifying
 * anything when the file is not a tapegrad checkpoint, the groups, the schedulers or
 * the model part do not match; an optimizer state that does not fit is reported
 * after the model has been restored. */
tg_status tg_load_checkpoint(const char *path, tg_module *model, tg_optim *opt, tg_checkpoint_info *info);

#ifdef __cplusplus
}
#endif
#endif
