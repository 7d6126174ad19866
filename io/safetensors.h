/* safetensors files (https://github.com/huggingface/safetensors): named tensors and
 * string metadata, readable by PyTorch, NumPy and the Hugging Face tools.
 *
 *     tg_tensor_map *m = tg_tensor_map_new();
 *     tg_tensor_map_set(m, "weight", w);
 *     tg_tensor_map_set_metadata(m, "epoch", "3");
 *     if (tg_safetensors_save(m, "model.safetensors")) fprintf(stderr, "%s\n", tg_last_error());
 *     tg_tensor_map_free(m);
 *
 *     tg_tensor_map *back = tg_safetensors_load("model.safetensors");
 *     tg_tensor *w2 = tg_tensor_map_get(back, "weight");   // borrowed from the map
 *
 * Format: an 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
 *  "__metadata__": {"key": "value"}}, then the raw little-endian data of every tensor,
 * row-major, at [begin, end) of the byte buffer that follows the header. Dtypes:
 * F32, F64, I64, I32, U8, BOOL, F16, BF16 (tapegrad's dtypes). tapegrad writes the header in
 * map order, pads it with spaces to a multiple of 8 bytes and lays the data out
 * largest element size first, as the reference implementation does, so every
 * tensor's data is aligned to its element size; the output is a deterministic
 * function of the map (tests compare it byte for byte).
 *
 * Checksums: tapegrad's writer adds to "__metadata__" one "tapegrad.crc32c.<name>":
 * "<8 lowercase hex digits>" per tensor, the CRC32C (Castagnoli, as ext4 and iSCSI;
 * crc32c("123456789") = e3069283) of the tensor's bytes as stored; the reader checks
 * every tensor that has one and fails naming the file, the tensor and both sums, and
 * skips tensors without one (files from PyTorch and other writers). These keys are a
 * property of the file: a loaded map's metadata leaves them out.
 *
 * Module state dicts and checkpoints: io/checkpoint.h (included at the end). */
#ifndef TG_IO_SAFETENSORS_H
#define TG_IO_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The metadata key of a tensor's checksum is this prefix followed by its name. */
#define TG_SAFETENSORS_CRC_PREFIX "tapegrad.crc32c."

/* ---- tensor maps: an ordered name -> tensor dictionary plus string metadata ----
 *
 * A map holds its OWN reference to every tensor in it (tg_retain on set, released on
 * remove, replace and free); it is not tied to any scope. Getters return BORROWED
 * references, valid while the tensor stays in the map: tg_retain one to keep it
 * after tg_tensor_map_free. Insertion order is kept (and is the file's order). */
typedef struct tg_tensor_map tg_tensor_map;

/* A new, empty map, or NULL + error (out of memory). Free with tg_tensor_map_free. */
tg_tensor_map *tg_tensor_map_new(void);
/* Releases the map's references and frees it. NULL-safe. */
void tg_tensor_map_free(tg_tensor_map *m);

/* m[name] = t (the map retains t; the name is copied). A name already present is
 * replaced in place (its position kept). Fails on a NULL map/name/tensor, an empty
 * name, or "__metadata__" (reserved by the format). */
tg_status tg_tensor_map_set(tg_tensor_map *m, const char *name, tg_tensor *t);
/* m[name], BORROWED, or NULL when absent (no error recorded: absence is an answer). */
tg_tensor *tg_tensor_map_get(const tg_tensor_map *m, const char *name);
/* Removes name (releasing the map's reference); false when it was absent. */
bool tg_tensor_map_remove(tg_tensor_map *m, const char *name);
/* Number of tensors; the i-th name and tensor in insertion order (borrowed; NULL
 * when i is out of range). */
int64_t tg_tensor_map_size(const tg_tensor_map *m);
const char *tg_tensor_map_name(const tg_tensor_map *m, int64_t i);
tg_tensor *tg_tensor_map_tensor(const tg_tensor_map *m, int64_t i);

/* The file's "__metadata__": string -> string, ordered, copied. Replaces an existing key. */
tg_status tg_tensor_map_set_metadata(tg_tensor_map *m, const char *key, const char *value);
/* The value for key (borrowed from the map), or NULL when absent. */
const char *tg_tensor_map_metadata(const tg_tensor_map *m, const char *key);
int64_t tg_tensor_map_metadata_size(const tg_tensor_map *m);
const char *tg_tensor_map_metadata_key(const tg_tensor_map *m, int64_t i);
const char *tg_tensor_map_metadata_value(const tg_tensor_map *m, int64_t i);

/* Composition, for checkpoints that hold several state dicts in one file
 * ("model.0.weight", "optim.state.0.exp_avg", ...): */
/* dst[prefix + name] = src[name] for every tensor of src (shared references, no
 * copies); prefix may be NULL or "". Metadata is not copied. */
tg_status tg_tensor_map_merge(tg_tensor_map *dst, const tg_tensor_map *src, const char *prefix);
/* A new map of the entries of m whose names start with prefix, with the prefix
 * removed from their names (shared references). NULL + error only on out of memory. */
tg_tensor_map *tg_tensor_map_select(const tg_tensor_map *m, const char *prefix);

/* ---- reading and writing ---- */

/* Writes m to path (via path + ".tmp", fsync, rename and an fsync of the folder, so
 * neither an interrupted save nor a power loss leaves a half-written file under the
 * real name; a stale path.tmp from a killed save is unlinked first). Tensors may be on any device and have
 * any strides; they are written contiguous, little-endian. Fails (TG_ERROR + message)
 * on float16/bfloat16 tensors (no file dtype yet), an unwritable path, or out of memory. */
tg_status tg_safetensors_save(const tg_tensor_map *m, const char *path);
/* The bytes tg_safetensors_save writes, in a malloc'd buffer the caller free()s. */
tg_status tg_safetensors_serialize(const tg_tensor_map *m, uint8_t **data, size_t *nbytes);

/* Reads a safetensors file into a new map of CPU tensors (no grad). NULL + error
 * naming the path when the file is missing, unreadable, or malformed (see
 * tg_safetensors_parse). */
tg_tensor_map *tg_safetensors_load(const char *path);
/* Parses a safetensors image held in memory (the entry point of the loader and of
 * the fuzz target); `name` only labels messages (NULL: "<memory>"). Checks: the
 * 8-byte length fits the input; the header is a JSON object (at most 100 MB) whose
 * entries each have a known dtype, a shape of at most 8 non-negative integer sizes
 * and integer data_offsets [begin, end] with end - begin = numel * element size;
 * no duplicate names; the tensors tile the byte buffer exactly (no gaps, overlaps or
 * trailing bytes, as the format requires); "__metadata__" maps strings to strings.
 * BOOL bytes other than 0/1 read as true. */
tg_tensor_map *tg_safetensors_parse(const void *data, size_t nbytes, const char *name);

/* One tensor: saves t as the file's only tensor, under `name` ("tensor" when NULL). */
tg_status tg_safetensors_save_tensor(tg_tensor *t, const char *name, const char *path);
/* Loads the tensor called `name` from path, or the file's only tensor when name is
 * NULL. Returns a NEW reference (innermost scope, else the caller), or NULL + error
 * when the name is absent (the message lists the names present) or name is NULL and
 * the file does not hold exactly one tensor. */
tg_tensor *tg_safetensors_load_tensor(const char *path, const char *name);

#ifdef __cplusplus
}
#endif

/* Module state dicts and checkpoints, built on the map API above. */
#include "io/checkpoint.h"

#endif
