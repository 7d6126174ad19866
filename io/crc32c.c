/* CRC32C (io/crc32c.h): the reflected polynomial 0x82F63B78, slicing-by-8 tables for any
 * CPU, the SSE4.2 crc32 instruction (8 bytes per instruction) chosen at run time on x86. */
#include "io/crc32c.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

static uint32_t table[8][256];

static void make_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int b = 0; b < 8; b++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
}

static uint32_t crc_portable(uint32_t c, const uint8_t *p, size_t n) {
    for (; n >= 8; p += 8, n -= 8) { /* little-endian: the first 4 bytes are the low word */
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^ table[4][lo >> 24] ^
            table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^ table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
    }
    for (; n; p++, n--) c = (c >> 8) ^ table[0][(c ^ *p) & 0xFF];
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t c, const uint8_t *p, size_t n) {
    uint64_t c64 = c;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = _mm_crc32_u64(c64, v);
    }
    c = (uint32_t)c64;
    for (; n; p++, n--) c = _mm_crc32_u8(c, *p);
    return c;
}
#endif

static bool hw;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void) {
    make_tables();
#if defined(__x86_64__)
    hw = __builtin_cpu_supports("sse4.2");
#endif
}

uint32_t tg_crc32c_portable(uint32_t crc, const void *data, size_t n) {
    pthread_once(&once, init);
    return ~crc_portable(~crc, data, n);
}

uint32_t tg_crc32c(uint32_t crc, const void *data, size_t n) {
    pthread_once(&once, init);
#if defined(__x86_64__)
    if (hw) return ~crc_sse42(~crc, data, n);
#endif
    return ~crc_portable(~crc, data, n);
}
