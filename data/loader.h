/* placeholder: filled by its issue */
#ifndef TG_DATA_LOADER_H
#define TG_DATA_LOADER_H
#endif
