/* For modules whose forward is not one op that tg_onnx_export can see: the recurrent
 * layers (a loop of small ops over time, exported as ONNX's LSTM / GRU / RNN) and the
 * int8 modules (kernels on raw buffers, exported as QuantizeLinear / DequantizeLinear).
 * While an export records, such a forward applies one tg_function whose forward runs
 * the same code as always (the ops inside an op are not recorded) and whose .onnx
 * writes the whole layer; otherwise it runs as before, so training and inference
 * compute exactly what they did.
 *
 *     if (tg_onnx_recording()) return tg_apply_args(&layer_fn, &x, &self, sizeof self);
 *     return layer_compute(self, x);
 */
#ifndef TG_ONNX_RECORDING_H
#define TG_ONNX_RECORDING_H

#include <stdbool.h>

#include "autograd/function.h"
#include "autograd/grad_mode.h"

/* True while an op observer (tg_onnx_export's recorder) watches this thread and grad
 * mode is off (as the export runs): an op without backward loses no gradient then. */
static inline bool tg_onnx_recording(void) {
    tg_op_observer o = tg_set_op_observer((tg_op_observer){0});
    tg_set_op_observer(o);
    return o.fn != NULL && !tg_is_grad_enabled();
}

/* Stops observing (a mapping that computes its constants with ops: they must not be
 * recorded as nodes); returns what tg_onnx_resume restores. */
static inline tg_op_observer tg_onnx_pause(void) { return tg_set_op_observer((tg_op_observer){0}); }
static inline void tg_onnx_resume(tg_op_observer o) { tg_set_op_observer(o); }

#endif
