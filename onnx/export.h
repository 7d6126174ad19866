/* ONNX export: a trained model as a file ONNX Runtime, OpenCV, TensorRT or a browser
 * can run (torch.onnx.export).
 *
 *     tg_tensor *x = tg_zeros(TG_SHAPE(1, 1, 28, 28), (tg_opts){0});  // an example input
 *     if (tg_onnx_export(model, x, "lenet.onnx", NULL)) fprintf(stderr, "%s\n", tg_last_error());
 *
 * The model's forward runs once on the example, in evaluation mode (dropout off, batch
 * norm on its running statistics) and without gradients; every op it applies is
 * written as ONNX nodes by that op's mapping (the .onnx of its tg_function, beside its
 * definition: onnx/graph.h), parameters and buffers as initializers with their
 * state-dict names ("features.0.weight"). The input's first dim is named "batch", so
 * the file takes any batch size. The model's training mode is restored afterwards.
 *
 * Errors (a NULL or status return, no file written, nothing left behind): an op with
 * no mapping or an option ONNX cannot express (named with the module it sits in: "
 * tg_onnx_export: grid_sample in decoder.2 (Upsampler): no ONNX mapping"), an opset
 * outside 13..17, a path that cannot be written. The file is written as
 * io/atomic_file.h says: a failure leaves the old file or none. */
#ifndef TG_ONNX_EXPORT_H
#define TG_ONNX_EXPORT_H

#include <stdbool.h>

#include "core/error.h"
#include "core/tensor.h"
#include "nn/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int opset;               /* ONNX opset version, 13 to 17; 0: 17 (LayerNormalization needs 17) */
    const char *input_name;  /* NULL: "input" */
    const char *output_name; /* NULL: "output" */
    bool static_batch;       /* true: the input's first dim is fixed at the example's */
} tg_onnx_opts;

/* Writes `model` run on `example_input` to `path` (opts may be NULL: the defaults). */
tg_status tg_onnx_export(tg_module *model, tg_tensor *example_input, const char *path, const tg_onnx_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
