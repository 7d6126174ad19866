/* A program outside the Bazel workspace, built against an installed tapegrad
 * (tests/install_test.sh): with pkg-config, statically, and with CMake. It fits
 * y = 2x + 1 with SGD and checks the result, the gradient of a known function, the
 * error reporting and that nothing leaks. Prints "ok" and exits 0 when all is well. */
#include <math.h>
#include <stdio.h>

#include "tapegrad.h"

int main(void) {
    tg_set_error_mode(TG_ERRORS_SILENT); /* the expected error below is read, not printed */
    int failures = 0;
    TG_SCOPE { /* d/dx sum(x^2) = 2x */
        tg_tensor *x = tg_requires_grad_(tg_from_data((float[]){1, 2, 3}, TG_SHAPE(3), (tg_opts){0}), true);
        tg_backward(tg_sum(tg_mul(x, x)));
        float g[3] = {0};
        tg_copy_to_host(tg_grad(x), g, sizeof g);
        if (g[0] != 2 || g[1] != 4 || g[2] != 6) {
            printf("gradient %g %g %g, expected 2 4 6\n", g[0], g[1], g[2]);
            failures++;
        }
    }
    tg_manual_seed(0);
    tg_module *model = tg_nn_linear(1, 1, (tg_linear_opts){0});
    tg_optim *opt = tg_sgd(model, (tg_sgd_opts){.lr = 0.1});
    double loss = NAN;
    for (int step = 0; step < 300; step++) {
        TG_SCOPE {
            tg_tensor *x = tg_view(tg_arange(-1, 1, 0.25, (tg_opts){0}), TG_SHAPE(8, 1));
            tg_tensor *y = tg_add_scalar(tg_mul_scalar(x, 2), 1);
            tg_tensor *l = tg_mse_loss(tg_forward(model, x), y);
            tg_backward(l);
            tg_optim_step(opt);
            tg_optim_zero_grad(opt);
            loss = tg_item(l);
        }
        if (tg_has_error()) break;
    }
    double w = tg_item(tg_module_param(model, "weight")), b = tg_item(tg_module_param(model, "bias"));
    if (!(loss < 1e-6) || fabs(w - 2) > 1e-3 || fabs(b - 1) > 1e-3) {
        printf("fit: loss %g, w %g, b %g (expected 2, 1): %s\n", loss, w, b, tg_last_error());
        failures++;
    }
    tg_optim_free(opt);
    tg_module_free(model);
    TG_SCOPE { /* errors name the op and the shapes */
        tg_tensor *bad = tg_add(tg_zeros(TG_SHAPE(2, 3), (tg_opts){0}), tg_zeros(TG_SHAPE(4), (tg_opts){0}));
        if (bad || !tg_has_error()) failures++;
        printf("expected error: %s\n", tg_last_error());
        tg_clear_error();
    }
    if (tg_live_tensors() != 0) {
        printf("%ld tensors leaked\n", tg_live_tensors());
        failures++;
    }
    printf("%s (w %.4f, b %.4f)\n", failures ? "FAILED" : "ok", w, b);
    return failures ? 1 : 0;
}
