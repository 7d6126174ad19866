#include "core/device.h"

#include <stdio.h>

tg_device tg_cuda(int index) { return (tg_device){TG_DEVICE_CUDA, index}; }

bool tg_device_equal(tg_device a, tg_device b) { return a.kind == b.kind && a.index == b.index; }

const char *tg_device_str(tg_device d, char *buf) {
    if (d.kind == TG_DEVICE_CPU) snprintf(buf, 16, "cpu");
    else snprintf(buf, 16, "cuda:%d", d.index);
    return buf;
}

static const tg_device_backend *cuda_table(void) { return tg_cuda_backend ? tg_cuda_backend() : NULL; }

int tg_cuda_device_count(void) {
    const tg_device_backend *b = cuda_table();
    return b ? b->device_count() : 0;
}

bool tg_cuda_available(void) { return tg_cuda_device_count() > 0; }

void tg_cuda_synchronize(void) {
    const tg_device_backend *b = cuda_table();
    if (b && b->device_count() > 0) b->synchronize();
}

const tg_device_backend *tg_backend_for(tg_device device, const char *op) {
    if (device.kind != TG_DEVICE_CUDA) return NULL; /* the CPU needs no table */
    const tg_device_backend *b = cuda_table();
    if (!b) {
        tg_error("%s: device cuda:%d requested but this build of tapegrad has no CUDA "
                 "(built with --config=cpu_only or without a CUDA toolkit)",
                 op, device.index);
        return NULL;
    }
    int count = b->device_count();
    if (device.index < 0 || device.index >= count) {
        tg_error("%s: device cuda:%d requested but %d CUDA device%s present", op, device.index, count,
                 count == 1 ? " is" : "s are");
        return NULL;
    }
    return b;
}

#define TG_STR2(x) #x
#define TG_STR(x) TG_STR2(x)

const char *tg_build_info(void) {
    return "tapegrad: "
#ifdef TG_WITH_CUDA
           "CUDA " TG_CUDA_VERSION " (" TG_CUDA_ARCHS "), cuBLAS, cuRAND"
#else
           "no CUDA"
#endif
           ", OpenBLAS, thread pool";
}
