/* Autocast (torch.autocast), per thread: inside TG_AUTOCAST(device, dtype) { ... },
 * ops on tensors of that device kind run in the dtype PyTorch's autocast picks.
 *
 *     TG_AUTOCAST(TG_DEVICE_CPU, TG_BFLOAT16) {
 *         tg_tensor *logits = tg_forward(model, x);   // linear layers in bfloat16
 *         tg_tensor *loss = tg_cross_entropy(logits, y); // losses in float32
 *     }
 *     tg_backward(loss);   // float32 parameters get float32 gradients
 *
 * Each op declares its class (`autocast` in tg_function, autograd/function.h), as
 * PyTorch 1.13's lists (aten/src/ATen/autocast_mode.cpp):
 *   - lower precision (matmul, linear, conv2d, addmm, baddbmm): floating inputs are
 *     cast to the autocast dtype;
 *   - float32 (the losses): cast to float32;
 *   - float32 on CUDA only (softmax, log_softmax, exp, log, pow, sum, cumsum, norm,
 *     logsumexp, layer_norm): PyTorch's CUDA list; its CPU list leaves them in
 *     their inputs' dtype, and so does tapegrad;
 *   - everything else runs in its inputs' dtypes (binary ops and where promote
 *     mixed inputs anyway; tg_cat refuses them, where PyTorch's autocast promotes).
 * Only floating tensors on the autocast device kind are cast, never float64. The
 * casts are recorded ops, so gradients flow back in each input's own dtype.
 * Autocast does not apply inside an op's forward or backward (PyTorch excludes its
 * dispatch key there too), so `tg_backward` may be called inside or outside.
 *
 * Devices and dtypes, as PyTorch 1.13: on the CPU only bfloat16 (the default); on
 * CUDA float16 (the default) or bfloat16. Another dtype is an error recorded by
 * tg_set_autocast, and autocast stays off for that scope (PyTorch warns and
 * disables).
 *
 * Cast cache, as torch.autocast(cache_enabled=True): inside a region, the cast of a
 * float32 leaf that requires grad (a parameter) is made once and reused by every op
 * of the region; the cache is emptied when the outermost region ends (nested
 * TG_AUTOCAST / TG_AUTOCAST_IF blocks, enabled or not, keep it). Unlike PyTorch's, a
 * cached cast is made again after an in-place write to the leaf (its version moved)
 * and when it was made under no_grad and grad is on now. */
#ifndef TG_AUTOGRAD_AUTOCAST_H
#define TG_AUTOGRAD_AUTOCAST_H

#include <stdbool.h>

#include "core/device.h"
#include "core/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    bool enabled;
    tg_dtype dtype;
} tg_autocast_state;

/* torch.is_autocast_enabled() (CUDA) / torch.is_autocast_cpu_enabled(). */
bool tg_is_autocast_enabled(tg_device_kind device);
/* torch.get_autocast_gpu_dtype() / get_autocast_cpu_dtype(). */
tg_dtype tg_get_autocast_dtype(tg_device_kind device);
/* Sets the state for one device kind and returns the previous one (for
 * tg_restore_autocast). enabled with an unusable dtype records an error and turns
 * autocast off for that device kind. */
tg_autocast_state tg_set_autocast(tg_device_kind device, bool enabled, tg_dtype dtype);
void tg_restore_autocast(tg_device_kind device, tg_autocast_state previous);
/* torch.is_autocast_cache_enabled() / torch.set_autocast_cache_enabled(): per thread,
 * on by default; the setter returns the previous value. */
bool tg_is_autocast_cache_enabled(void);
bool tg_set_autocast_cache_enabled(bool enabled);

/* TG_AUTOCAST(device, dtype) { ... } and TG_AUTOCAST_IF(device, dtype, enabled) { ... }
 * (torch.autocast(device_type, dtype, enabled)): nest, and restore the previous
 * state however the block is left, as TG_NO_GRAD. TG_AUTOCAST_IF(..., false) turns
 * autocast off inside an enclosing region. */
typedef struct {
    tg_device_kind device;
    tg_autocast_state prev;
    int once;
} tg_autocast_guard_;
static inline tg_autocast_guard_ tg_autocast_begin_(tg_device_kind device, tg_dtype dtype, bool enabled) {
    tg_autocast_guard_ g = {device, tg_set_autocast(device, enabled, dtype), 1};
    return g;
}
static inline void tg_autocast_end_(tg_autocast_guard_ *g) { tg_restore_autocast(g->device, g->prev); }
#define TG_AUTOCAST_CONCAT2(a, b) a##b
#define TG_AUTOCAST_CONCAT(a, b) TG_AUTOCAST_CONCAT2(a, b)
#define TG_AUTOCAST_IF(device, dtype, enabled)                                                              \
    for (tg_autocast_guard_ TG_AUTOCAST_CONCAT(tg_autocast_, __LINE__)                                      \
             __attribute__((cleanup(tg_autocast_end_))) = tg_autocast_begin_((device), (dtype), (enabled)); \
         TG_AUTOCAST_CONCAT(tg_autocast_, __LINE__).once; TG_AUTOCAST_CONCAT(tg_autocast_, __LINE__).once = 0)
#define TG_AUTOCAST(device, dtype) TG_AUTOCAST_IF(device, dtype, true)

#ifdef __cplusplus
}
#endif
#endif
