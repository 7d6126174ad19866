/* placeholder: filled by its issue */
#ifndef TG_NN_MODULE_H
#define TG_NN_MODULE_H
#endif
