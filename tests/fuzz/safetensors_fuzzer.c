/* libFuzzer target for the safetensors reader (io/safetensors.h): any input must
 * give a map or NULL + an error message; a map that parses must serialize and parse
 * back to the same names. Built by tests/fuzz/run.sh. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/scope.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_set_error_mode(TG_ERRORS_SILENT); /* malformed inputs are expected: record, do not print */
    tg_clear_error();
    tg_tensor_map *m = tg_safetensors_parse(data, size, "fuzz");
    TG_ASSERT(m || tg_last_error()[0]);
    if (m) {
        uint8_t *out = NULL;
        size_t n = 0;
        TG_ASSERT(tg_safetensors_serialize(m, &out, &n) == TG_OK);
        tg_tensor_map *back = tg_safetensors_parse(out, n, "reserialized");
        TG_ASSERT(back);
        TG_ASSERT(tg_tensor_map_size(back) == tg_tensor_map_size(m));
        for (int64_t i = 0; i < tg_tensor_map_size(m); i++)
            TG_ASSERT(strcmp(tg_tensor_map_name(m, i), tg_tensor_map_name(back, i)) == 0);
        tg_tensor_map_free(back);
        free(out);
        tg_tensor_map_free(m);
    }
    TG_ASSERT(tg_live_tensors() == 0);
    return 0;
}
