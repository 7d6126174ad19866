/* Internal: how the library reads an options field whose zero means PyTorch's default
 * (core/options.h). Not installed. */
#ifndef TG_CORE_OPTION_DEFAULTS_H
#define TG_CORE_OPTION_DEFAULTS_H

#include <math.h>
#include <stdbool.h>

/* The field's value. A struct made by its TG_*_OPTS macro (defaults_filled) holds
 * PyTorch's defaults already: its fields are as written, but NAN, which the macros
 * write where the default depends on the call (sdpa's 1/sqrt(E), a group's inherited
 * value), is `dflt`. Otherwise a +0 field is the default and TG_ZERO (-0.0) a real zero. */
static inline double tg_option(double v, double dflt, bool defaults_filled) {
    if (defaults_filled) return isnan(v) ? dflt : v;
    if (v != 0) return v;
    return signbit(v) ? 0.0 : dflt;
}

/* Whether a field was given: an inheriting field (tg_param_group_opts) is NAN in a
 * struct from its macro, +0 in one written by hand. */
static inline bool tg_option_given(double v, bool defaults_filled) {
    return defaults_filled ? !isnan(v) : (v != 0 || signbit(v));
}

#endif
