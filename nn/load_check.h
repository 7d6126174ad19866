/* Values a state dict may not load (io/checkpoint.c runs it on every tensor before it
 * copies any): quantisation scales, zero points and prune masks. Library-internal. */
#ifndef TG_NN_LOAD_CHECK_H
#define TG_NN_LOAD_CHECK_H

#include "core/tensor.h"
#include "nn/module.h"

/* TG_OK, or an error "<op>: <what>: \"<key>\" holds <value> at [i]: <rule>, module
 * unchanged" when t (of the member `key` of model, already checked for shape and dtype)
 * breaks its module's rule. */
tg_status tg_check_loaded_value(const char *op, const char *what, tg_module *model, const char *key, tg_tensor *t);

#endif
