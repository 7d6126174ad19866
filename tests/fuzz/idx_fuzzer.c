/* libFuzzer target for the IDX reader (data/mnist.h): any input must give a tensor
 * or NULL + an error message, never a crash, leak or undefined behaviour. Built by
 * tests/fuzz/run.sh. */
#include <stddef.h>
#include <stdint.h>

#include "core/scope.h"
#include "data/mnist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_set_error_mode(TG_ERRORS_SILENT); /* malformed inputs are expected: record, do not print */
    tg_clear_error();
    TG_SCOPE {
        /* Both the "any rank" and the MNIST image/label paths. */
        for (int expected_ndim = 0; expected_ndim <= 3; expected_ndim += 1) {
            tg_tensor *t = tg_idx_parse(data, size, expected_ndim, "fuzz");
            TG_ASSERT(t || tg_last_error()[0]);
            if (t) TG_ASSERT(tg_ndim(t) >= 1);
        }
    }
    TG_ASSERT(tg_live_tensors() == 0);
    return 0;
}
