// A template formula header (docs/design.md, "One formula per op, both devices") for a
// CUDA file, included for float and for double: define TG_PER_TYPE_HEADER as its path
// and include this. Its functions get one overloaded name (NAME(f) is f), its structs
// one name per type (TYPED(f) is f_f32 / f_f64, as the C build names them). No include
// guard, on purpose: once per formula header.
#define NAME(f) f
#define T float
#define TYPED(f) f##_f32
#include TG_PER_TYPE_HEADER
#undef T
#undef TYPED
#define T double
#define TYPED(f) f##_f64
#include TG_PER_TYPE_HEADER
#undef T
#undef TYPED
#undef NAME
#undef TG_PER_TYPE_HEADER
