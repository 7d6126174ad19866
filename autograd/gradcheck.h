/* Gradient checking against central finite differences, in float64
 * (torch.autograd.gradcheck / gradgradcheck). */
#ifndef TG_AUTOGRAD_GRADCHECK_H
#define TG_AUTOGRAD_GRADCHECK_H

#include <stdbool.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The function under test: builds its output from the inputs with ops. */
typedef tg_tensor *(*tg_gradcheck_fn)(tg_tensor *const *inputs, void *user);

typedef struct {
    double eps;  /* finite-difference step; 0 means 1e-6 */
    double atol; /* 0 means 1e-5 */
    double rtol; /* 0 means 1e-3 */
    void *user;  /* passed to fn */
    /* Filled in: the element that violates the tolerance most, or, when none does, the
     * one with the largest absolute error (input, element, analytic, numeric, error). */
    int worst_input;
    long worst_element;
    double worst_analytic, worst_numeric, worst_error;
} tg_gradcheck_opts;

/* Compares every entry of the Jacobian of fn at `inputs` (float64 tensors on any
 * device, as PyTorch's; those that require grad are checked) computed by backward with
 * central differences, perturbing the inputs in place one element at a time.
 * Returns TG_OK when all agree within atol + rtol * |numeric|; otherwise TG_ERROR
 * with a message naming the worst element. Inputs are restored afterwards. */
tg_status tg_gradcheck(tg_gradcheck_fn fn, int num_inputs, tg_tensor *const *inputs, tg_gradcheck_opts *opts);

/* Second order: checks the gradient of the backward itself (with create_graph),
 * through a random projection of the first-order gradients (as PyTorch's fast
 * gradgradcheck does), with respect to the inputs and the output gradient. */
tg_status tg_gradgradcheck(tg_gradcheck_fn fn, int num_inputs, tg_tensor *const *inputs, tg_gradcheck_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
