/* Tensors: typed, strided views of a storage, with the slots autograd needs.
 *
 * Ownership (see scope.h): every function here that returns `tg_tensor *` returns a
 * NEW reference, owned by the innermost scope if one is open, else by the caller
 * (who calls tg_release). Accessors such as tg_grad() return BORROWED references.
 * Failing calls return NULL and record a message (core/error.h); NULL inputs give
 * NULL without overwriting the first message.
 *
 * The functions in this file do not record autograd graphs; the differentiable
 * views (tg_view, tg_reshape, tg_transpose, ...) are in ops/shape.h. */
#ifndef TG_CORE_TENSOR_H
#define TG_CORE_TENSOR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_tensor tg_tensor;

/* Creation options; zero fields mean the default (float32, CPU, no grad). */
typedef struct {
    tg_dtype dtype;
    tg_device device;
    bool requires_grad;
} tg_opts;

/* ---- creation (torch.empty, zeros, ones, full, arange, tensor) ---- */
/* Uninitialised. Fails on negative sizes, unsupported dtype, missing device, out of memory. */
tg_tensor *tg_empty(tg_shape shape, tg_opts opts);
tg_tensor *tg_zeros(tg_shape shape, tg_opts opts);
tg_tensor *tg_ones(tg_shape shape, tg_opts opts);
tg_tensor *tg_full(tg_shape shape, double value, tg_opts opts);
/* [start, end) by step, as torch.arange (dtype from opts: float32 unless told). */
tg_tensor *tg_arange(double start, double end, double step, tg_opts opts);
/* Copies numel(shape) elements of opts.dtype from the host array `data`. */
tg_tensor *tg_from_data(const void *data, tg_shape shape, tg_opts opts);
/* Same shape, dtype and device as `like` (torch.empty_like / zeros_like). */
tg_tensor *tg_empty_like(tg_tensor *like);
tg_tensor *tg_zeros_like(tg_tensor *like);
tg_tensor *tg_ones_like(tg_tensor *like);
/* torch.full_like(like, value): like's shape, dtype and device, every element value
 * (converted to the dtype as tg_fill_ converts it). */
tg_tensor *tg_full_like(tg_tensor *like, double value);

/* ---- reading ---- */
/* Copies the elements (in logical row-major order, any strides, any device) into the
 * host buffer `dst` of `nbytes`; fails when nbytes != numel * dtype size. Waits for the device. */
tg_status tg_copy_to_host(tg_tensor *t, void *dst, size_t nbytes);
/* The single element of a one-element tensor as a double (torch.Tensor.item). NaN +
 * error when t is NULL or has more than one element. */
double tg_item(tg_tensor *t);

/* ---- copies (no graph recorded) ----
 * tg_clone (differentiable) is in ops/shape.h; tg_copy_ and tg_fill_, which follow
 * the in-place rules and record gradients, in ops/inplace.h. */
/* A copy on `device`; returns a new reference to t itself when it is already there.
 * (For modules, tg_to in nn/module.h dispatches on the argument type.) */
tg_tensor *tg_tensor_to(tg_tensor *t, tg_device device);
/* ---- views sharing storage (no graph recorded; see ops/shape.h for the
 * differentiable ones). offset and strides are in elements. ---- */
/* Fails (naming tg_as_strided) when a size is negative, the rank is above
 * TG_MAX_DIMS, a product overflows or an element falls outside t's storage. */
tg_tensor *tg_as_strided(tg_tensor *t, tg_shape shape, const int64_t *strides, int64_t offset);
/* A tensor sharing t's storage and version but with no graph and no grad (torch.detach). */
tg_tensor *tg_detach(tg_tensor *t);

/* ---- properties (borrowed / by value) ---- */
tg_shape tg_shape_of(const tg_tensor *t);
int tg_ndim(const tg_tensor *t);
/* Size of dim (negative counts from the end); -1 + error when out of range. */
int64_t tg_size(const tg_tensor *t, int dim);
int64_t tg_numel(const tg_tensor *t);
int64_t tg_stride(const tg_tensor *t, int dim);
const int64_t *tg_strides(const tg_tensor *t);
int64_t tg_offset(const tg_tensor *t);
tg_dtype tg_dtype_of(const tg_tensor *t);
tg_device tg_device_of(const tg_tensor *t);
bool tg_is_contiguous(const tg_tensor *t);
/* True when a and b share a storage (views of each other). */
bool tg_same_storage(const tg_tensor *a, const tg_tensor *b);
/* Pointer to the first element (host or device memory). Borrowed; valid while t lives. */
void *tg_data_ptr(tg_tensor *t);
/* The version counter shared by t and its views (in-place writes bump it). */
uint64_t tg_version(const tg_tensor *t);
/* Marks an in-place write to t (custom in-place ops call this). */
void tg_bump_version(tg_tensor *t);

/* ---- printing ---- */
/* PyTorch-like repr: tensor([[1.0000, 2.0000]], shape=[1, 2], dtype=float32, device=cpu). */
void tg_fprint(FILE *f, tg_tensor *t);
void tg_print(tg_tensor *t);

/* Fills `strides` with the row-major contiguous strides of shape. */
void tg_contiguous_strides(tg_shape shape, int64_t *strides);

#ifdef __cplusplus
}
#endif
#endif
