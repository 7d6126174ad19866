/* placeholder: filled by its issue */
#ifndef TG_NN_LAYERS_H
#define TG_NN_LAYERS_H
#endif
