/* placeholder: filled by its issue */
#ifndef TG_DATA_MNIST_H
#define TG_DATA_MNIST_H
#endif
