/* Writing a whole file durably and atomically: the bytes go to path.tmp, which is
 * fsync'ed, renamed over path, and the folder fsync'ed; a crash or a failure leaves the
 * old file or the new one, never a mix or a partial file. A path.tmp left by a killed
 * write is unlinked first (also when it is a symlink or read-only: O_EXCL then creates
 * a fresh file, never writing through a link). Used by the safetensors and ONNX writers. */
#ifndef TG_IO_ATOMIC_FILE_H
#define TG_IO_ATOMIC_FILE_H

#include <stddef.h>

#include "core/error.h"

/* Errors start with `op` ("tg_safetensors_save: cannot create x.tmp: ..."). */
tg_status tg_write_file_atomic(const char *op, const char *path, const void *data, size_t n);

#endif
