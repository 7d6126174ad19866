/* Intel AMX (Advanced Matrix Extensions, Sapphire Rapids and later): eight tile
 * registers of up to 16 rows x 64 bytes and a multiply unit for them. Library-internal:
 * the bfloat16 GEMM (ops/cpu/gemm_bf16.c) and the int8 GEMM (ops/cpu/qgemm.c) use them where
 * this says they may. */
#ifndef TG_CORE_AMX_H
#define TG_CORE_AMX_H

#include <stdbool.h>

typedef enum {
    TG_AMX_BF16, /* TDPBF16PS: bfloat16 pairs into float32 */
    TG_AMX_INT8, /* TDPBUSD: uint8 x int8 quads into int32 */
} tg_amx_kind;

/* True when the CPU has the tile unit and `kind`'s multiply, and Linux granted this
 * process the tile registers (arch_prctl ARCH_REQ_XCOMP_PERM, asked once per process;
 * refused by kernels before 5.16). x86-64 with GCC only; false elsewhere. */
bool tg_amx_available(tg_amx_kind kind);

/* False when the environment says TG_AMX=0 (the kernels then keep their AVX-512 forms);
 * read once. Tests switch kernels through the kernels' own setters instead. */
bool tg_amx_wanted(void);

/* Loads the configuration the kernels share into the calling thread's tile unit: all
 * eight tiles 16 rows x 64 bytes. Each thread calls it before its first tile
 * instruction (the configuration is per thread) and _tile_release() when done. */
void tg_amx_configure(void);

/* GCC's _tile_loadd is an asm statement that names an address but not the memory behind
 * it (_tile_stored clobbers memory): a kernel puts this between plain stores to a buffer
 * and the tile loads that read it, so that the compiler neither drops nor delays them. */
#define TG_AMX_MEMORY_BARRIER() __asm__ volatile("" : : : "memory")

#endif
