/* Observers of static quantisation (torch.ao.quantization.observer, PyTorch 1.13):
 * modules whose forward returns its input unchanged and records its range, from
 * which calculate_qparams derives a scale and a zero point.
 *
 * - MinMaxObserver: the running min and max (per tensor).
 * - MovingAverageMinMaxObserver: min += c * (batch min - min), the same for max
 *   (c = averaging_constant, 0.01 by default); the first batch sets them.
 * - PerChannelMinMaxObserver / MovingAveragePerChannelMinMaxObserver: the same per
 *   slice along ch_axis (a weight's output channels: ch_axis 0).
 * - HistogramObserver: a 2048-bin histogram of every value seen, re-binned when the
 *   range grows (upsampled by 128 and summed back), and calculate_qparams picks the
 *   min and max that minimise the L2 quantisation error over that histogram
 *   (_non_linear_param_search). PyTorch 1.13's quirks are kept so that the numbers
 *   are its own: torch.histc receives int(min) and int(max) (truncated), so a new
 *   histogram counts only the values inside that integer range (the whole data
 *   range when both truncate to the same integer).
 *
 * calculate_qparams (UniformQuantizationObserverBase._calculate_qparams), in float32:
 *   affine:    scale = max((max(max, 0) - min(min, 0)) / (qmax - qmin), eps),
 *              zero_point = clamp(qmin - round_half_even(min(min, 0) / scale), qmin, qmax)
 *   symmetric: scale = max(max(-min(min, 0), max(max, 0)) / ((qmax - qmin) / 2), eps),
 *              zero_point 0 (qint8) or 128 (quint8; (qmin + qmax) / 2 with a custom range)
 * with eps = float32's epsilon, and [qmin, qmax] = [0, 255] (quint8) or [-128, 127]
 * (qint8), halved by reduce_range ([0, 127], [-64, 63]) or given by
 * quant_min / quant_max. Before any input: scale 1, zero point 0.
 *
 * The state is in buffers named as PyTorch's state dict: "eps", "min_val", "max_val"
 * (0-dim per tensor, [C] per channel: [0] before the first input) and the
 * histogram's "histogram". Inputs may be on any device and of any floating dtype:
 * observers compute on a float32 CPU copy (PyTorch converts to float32 too). */
#ifndef TG_QUANT_OBSERVER_H
#define TG_QUANT_OBSERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "nn/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TG_QUINT8 = 0, TG_QINT8 = 1 } tg_qdtype;

typedef enum {
    TG_QSCHEME_DEFAULT = 0, /* per_tensor_affine, or per_channel_affine for the per-channel observers */
    TG_PER_TENSOR_AFFINE,
    TG_PER_TENSOR_SYMMETRIC,
    TG_PER_CHANNEL_AFFINE,
    TG_PER_CHANNEL_SYMMETRIC,
} tg_qscheme;

/* Zero fields are PyTorch's defaults. */
typedef struct {
    tg_qdtype dtype;              /* quint8 */
    tg_qscheme qscheme;           /* see TG_QSCHEME_DEFAULT */
    bool reduce_range;            /* one bit less of range (fbgemm / x86's activations) */
    int64_t quant_min, quant_max; /* both 0: the dtype's range; else a custom range containing 0 */
    double averaging_constant;    /* the moving-average observers: 0 means 0.01 */
    int ch_axis;                  /* the per-channel observers (negative counts from the end) */
    int bins;                     /* HistogramObserver: 0 means 2048 */
    int upsample_rate;            /* HistogramObserver: 0 means 128 */
} tg_observer_opts;

/* New observers (owned by the caller). NULL + error for options PyTorch refuses: a
 * per-channel qscheme on a per-tensor observer or the reverse, reduce_range with
 * symmetric quint8, a custom range that does not contain 0, is empty, or exceeds
 * 256 values or the dtype. */
tg_module *tg_nn_minmax_observer(tg_observer_opts opts);
tg_module *tg_nn_moving_average_minmax_observer(tg_observer_opts opts);
tg_module *tg_nn_per_channel_minmax_observer(tg_observer_opts opts);
tg_module *tg_nn_moving_average_per_channel_minmax_observer(tg_observer_opts opts);
tg_module *tg_nn_histogram_observer(tg_observer_opts opts);

/* observer.calculate_qparams(): *scale gets a float32 [1] or [C] tensor, *zero_point an
 * int64 one, both new references in the current scope, on the CPU. NULL inputs or a
 * module that is not an observer: TG_ERROR. */
tg_status tg_observer_calculate_qparams(tg_module *observer, tg_tensor **scale, tg_tensor **zero_point);

/* What an observer quantises to, after the defaults and reduce_range are applied. */
typedef struct {
    tg_qdtype dtype;
    tg_qscheme qscheme; /* never TG_QSCHEME_DEFAULT */
    int64_t quant_min, quant_max;
    int ch_axis; /* per-channel observers, as given */
    bool per_channel;
} tg_observer_info;

/* Fills *info; TG_ERROR for a module that is not an observer. */
tg_status tg_observer_get_info(tg_module *observer, tg_observer_info *info);
/* True for the modules made by the constructors above. */
bool tg_is_observer(tg_module *m);

#ifdef __cplusplus
}
#endif

#endif
