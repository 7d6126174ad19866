/* Shapes: up to TG_MAX_DIMS sizes, passed by value. TG_SHAPE(64, 784). */
#ifndef TG_CORE_SHAPE_H
#define TG_CORE_SHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TG_MAX_DIMS 8

typedef struct {
    int ndim;
    int64_t dims[TG_MAX_DIMS];
} tg_shape;

#ifdef __cplusplus
/* C++ (tests): tg_shape_of_list({64, 784}) */
#define TG_SHAPE(...) tg_shape_make({__VA_ARGS__})
#else
#define TG_SHAPE(...) \
    ((tg_shape){.ndim = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), .dims = {__VA_ARGS__}})
#endif
/* The shape of a 0-dim (scalar) tensor. */
#define TG_SCALAR_SHAPE ((tg_shape){0})

/* Shape from an array (ndim <= TG_MAX_DIMS is the caller's business). */
tg_shape tg_shape_from(int ndim, const int64_t *dims);
int64_t tg_shape_numel(tg_shape shape);
bool tg_shape_equal(tg_shape a, tg_shape b);
/* Writes "[64, 784]" into buf and returns buf. */
const char *tg_shape_str(tg_shape shape, char *buf, size_t size);
/* NumPy/PyTorch broadcasting. Returns false when the shapes do not broadcast. */
bool tg_broadcast_shapes(tg_shape a, tg_shape b, tg_shape *out);
/* Wraps a possibly negative dim into [0, ndim); returns -1 when out of range. */
int tg_wrap_dim(int dim, int ndim);

#ifdef __cplusplus
}
#include <initializer_list>
static inline tg_shape tg_shape_make(std::initializer_list<int64_t> dims) {
    tg_shape s = {};
    for (int64_t d : dims) s.dims[s.ndim++] = d;
    return s;
}
#endif
#endif
