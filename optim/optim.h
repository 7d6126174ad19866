/* placeholder: filled by its issue */
#ifndef TG_OPTIM_OPTIM_H
#define TG_OPTIM_OPTIM_H
#endif
