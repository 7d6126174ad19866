/* AMX availability and tile configuration (core/amx.h). */
#include "core/amx.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static bool wanted;
static void read_env(void) {
    const char *env = getenv("TG_AMX");
    wanted = !(env && env[0] == '0');
}

bool tg_amx_wanted(void) {
    pthread_once(&env_once, read_env);
    return wanted;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static bool has_bf16, has_int8;

static void probe(void) {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 24))) return; /* AMX-TILE */
    /* ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18) */
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return;
    has_bf16 = edx & (1u << 22);
    has_int8 = edx & (1u << 25);
}

bool tg_amx_available(tg_amx_kind kind) {
    pthread_once(&probe_once, probe);
    return kind == TG_AMX_BF16 ? has_bf16 : has_int8;
}

typedef struct {
    unsigned char palette, start_row, reserved[14];
    unsigned short colsb[16];
    unsigned char rows[16];
} tile_config;

__attribute__((target("amx-tile"))) void tg_amx_configure(void) {
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.rows[t] = 16, cfg.colsb[t] = 64;
    _tile_loadconfig(&cfg);
}
#else
bool tg_amx_available(tg_amx_kind kind) {
    (void)kind;
    return false;
}
void tg_amx_configure(void) {}
#endif
