/* libFuzzer target for the CIFAR-10/100 record reader (data/cifar.h): any input gives
 * images + labels or NULL + a message naming the byte offset, for each kind; labels
 * are in range; nothing leaks. Built by tests/fuzz/run.sh. */
#include <stddef.h>
#include <stdint.h>

#include "core/scope.h"
#include "data/cifar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_set_error_mode(TG_ERRORS_SILENT);
    static const int classes[] = {10, 100, 20};
    TG_SCOPE {
        for (int kind = TG_CIFAR10; kind <= TG_CIFAR100_COARSE; kind++) {
            tg_clear_error();
            tg_cifar c = tg_cifar_parse(data, size, (tg_cifar_kind)kind, "fuzz");
            TG_ASSERT((c.images != NULL) == (c.labels != NULL));
            if (!c.images) {
                TG_ASSERT(tg_last_error()[0]);
                continue;
            }
            int64_t n = tg_size(c.labels, 0);
            TG_ASSERT(tg_size(c.images, 0) == n && (size_t)n * (3072 + (kind == TG_CIFAR10 ? 1 : 2)) == size);
            const int64_t *labels = tg_data_ptr(c.labels);
            for (int64_t i = 0; i < n; i++) TG_ASSERT(labels[i] >= 0 && labels[i] < classes[kind]);
        }
    }
    TG_ASSERT(tg_live_tensors() == 0);
    return 0;
}
