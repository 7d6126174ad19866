/* tapegrad: a small PyTorch in C. Tensors on the CPU or a CUDA GPU, operations
 * recorded as they run, reverse-mode backprop, nn modules and optimizers.
 *
 *     #include "tapegrad.h"
 *
 *     int main(void) {
 *         TG_SCOPE {
 *             tg_tensor *x = tg_requires_grad_(tg_from_data((float[]){1, 2, 3}, TG_SHAPE(3), (tg_opts){0}), true);
 *             tg_tensor *y = tg_sum(tg_mul(x, x));   // y = sum(x^2)
 *             tg_backward(y);
 *             tg_print(tg_grad(x));                   // tensor([2.0000, 4.0000, 6.0000], ...)
 *         }                                           // every tensor made above is freed here
 *         return 0;
 *     }
 *
 * Ownership, errors and the op API are described in core/scope.h, core/error.h and
 * autograd/function.h; docs/ and tutorials/ walk through the rest. */
#ifndef TAPEGRAD_H
#define TAPEGRAD_H

#include "core/denormal.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/options.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/scope.h"
#include "core/shape.h"
#include "core/storage.h"
#include "core/tensor.h"

#include "autograd/function.h"
#include "autograd/autocast.h"
#include "autograd/checkpoint.h"
#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/profile.h"

#include "ops/attention.h"
#include "ops/composite.h"
#include "ops/conv.h"
#include "ops/distance.h"
#include "ops/einsum.h"
#include "ops/elementwise.h"
#include "ops/fake_quantize.h"
#include "ops/index.h"
#include "ops/inplace.h"
#include "ops/interpolate.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "ops/pad.h"
#include "ops/pool.h"
#include "ops/random.h"
#include "ops/rearrange.h"
#include "ops/scan.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/slice.h"
#include "ops/sort.h"
#include "core/cuda/runtime.h"

#include "nn/module.h"
#include "nn/layers.h"
#include "nn/conv_layers.h"
#include "nn/norm_layers.h"
#include "nn/recurrent.h"
#include "nn/attention.h"
#include "nn/transformer.h"
#include "quant/fake_quantize.h"
#include "quant/observer.h"
#include "quant/prune.h"
#include "quant/qat.h"
#include "quant/static_quant.h"
#include "quant/quantize.h"
#include "optim/optim.h"
#include "optim/decay_groups.h"
#include "optim/grad_scaler.h"
#include "onnx/graph.h"
#include "onnx/export.h"

#include "data/mnist.h"
#include "data/loader.h"
#include "data/cifar.h"
#include "data/transforms.h"
#include "data/image_decode.h"
#include "data/image_folder.h"
#include "io/safetensors.h"
#include "io/checkpoint.h"

/* Last: the leak report's source lines (core/trace.h). */
#include "core/trace.h"
#include "core/trace_macros.h"

#endif
