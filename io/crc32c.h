/* CRC32C (Castagnoli, the iSCSI / ext4 / RocksDB checksum): what the safetensors writer
 * stores for each tensor's bytes (io/safetensors.h). Library-internal. */
#ifndef TG_IO_CRC32C_H
#define TG_IO_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The CRC32C of n bytes continued from crc (0 to start): tg_crc32c(0, "123456789", 9)
 * is 0xE3069283. SSE4.2's crc32 instruction where the CPU has it, else tables. */
uint32_t tg_crc32c(uint32_t crc, const void *data, size_t n);
/* The table-driven code alone (tests compare the two). */
uint32_t tg_crc32c_portable(uint32_t crc, const void *data, size_t n);

#ifdef __cplusplus
}
#endif

#endif
