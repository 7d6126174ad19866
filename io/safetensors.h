/* placeholder: filled by its issue */
#ifndef TG_IO_SAFETENSORS_H
#define TG_IO_SAFETENSORS_H
#endif
