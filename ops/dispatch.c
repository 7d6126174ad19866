#include "ops/dispatch.h"

tg_status tg_check_same_device(const char *op, const tg_tensor *a, const tg_tensor *b, const char *what) {
    if (tg_device_equal(tg_device_of(a), tg_device_of(b))) return TG_OK;
    char da[16], db[16];
    return tg_error("%s: expected %s on one device, got %s and %s", op, what, tg_device_str(tg_device_of(a), da),
                    tg_device_str(tg_device_of(b), db));
}
