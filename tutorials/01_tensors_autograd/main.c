/* Lesson 01: tensors, devices, views, scopes and ownership, a gradient, no-grad,
 * and the recorded graph as Graphviz DOT. README.md walks through this file. */
#include <math.h>
#include <stdio.h>

#include "tapegrad.h"
#include "tutorials/common/common.h"

/* A function that builds its result inside a scope of its own and hands it to the
 * caller with tg_scope_return: y = tanh(w * x + b). */
static tg_tensor *neuron(tg_tensor *w, tg_tensor *x, tg_tensor *b) {
    tg_tensor *y = NULL;
    TG_SCOPE {
        tg_tensor *z = tg_add(tg_mul(w, x), b); /* a temporary: freed at the closing brace */
        y = tg_scope_return(tg_tanh(z));        /* survives: moves to the caller's scope */
    }
    return y;
}

int main(int argc, char **argv) {
    const char *dot_path = NULL;
    tut_option extra[] = {{.name = "--dot",
                           .metavar = "FILE",
                           .value = &dot_path,
                           .help = "also write the graph to FILE (render: dot -Tsvg FILE)"}};
    tut_args args = {.options = TUT_OPT_DEVICE | TUT_OPT_SEED, .seed = 1};
    tut_parse_args(argc, argv, "Lesson 01: tensors, views, scopes, a gradient, no-grad, the graph as DOT.", &args,
                   extra, 1);
    tg_manual_seed(args.seed);

    printf("== 1. tensors ==\n");
    TG_SCOPE {
        tg_tensor *a = tg_from_data((float[]){1, 2, 3, 4, 5, 6}, TG_SHAPE(2, 3), (tg_opts){0});
        tg_tensor *r = tg_arange(0, 6, 1, (tg_opts){.dtype = TG_INT64});
        tg_tensor *n = tg_randn(TG_SHAPE(2, 3), (tg_opts){0});
        tg_print(a);
        tg_print(r);
        tg_print(n);
        tg_tensor *s = tg_add(a, tg_mul_scalar(n, 0.01)); /* broadcasting, dtypes and all, as PyTorch */
        printf("sum of a + 0.01 n = %.4f, mean of row 0 = %.4f\n", tg_item(tg_sum(s)),
               tg_item(tg_mean(tg_narrow(a, 0, 0, 1))));
    }

    printf("\n== 2. devices ==\n");
    printf("%s\n", tg_build_info());
    TG_SCOPE {
        tg_tensor *a = tg_ones(TG_SHAPE(2, 2), (tg_opts){0});
        tg_tensor *d = tg_to(a, args.device); /* a new reference to a itself when already there */
        char where[16];
        printf("--device %s: the tensor lives on %s", args.device_name, tg_device_str(tg_device_of(d), where));
        printf(tg_cuda_available() ? " (%d CUDA device(s) here)\n" : " (no CUDA device here)\n",
               tg_cuda_device_count());
        tg_print(tg_to(tg_mul_scalar(d, 3), TG_CPU)); /* computed where d is, printed from the CPU */
    }

    printf("\n== 3. views share storage ==\n");
    TG_SCOPE {
        tg_tensor *m = tg_arange(0, 12, 1, (tg_opts){0});
        tg_tensor *grid = tg_view(m, TG_SHAPE(3, 4)); /* same 12 floats, seen as 3 x 4 */
        tg_tensor *t = tg_transpose(grid, 0, 1);      /* 4 x 3, strides swapped, nothing copied */
        tg_tensor *col = tg_narrow(grid, 1, 1, 1);    /* column 1: [3, 1] */
        printf("grid strides [%lld, %lld], transposed strides [%lld, %lld], contiguous: %s / %s\n",
               (long long)tg_stride(grid, 0), (long long)tg_stride(grid, 1), (long long)tg_stride(t, 0),
               (long long)tg_stride(t, 1), tg_is_contiguous(grid) ? "yes" : "no", tg_is_contiguous(t) ? "yes" : "no");
        printf("same storage: %s\n", tg_same_storage(m, t) && tg_same_storage(m, col) ? "yes" : "no");
        tg_fill_(col, -1);               /* writes through the view ... */
        tg_print(grid);                  /* ... and the original sees it */
        tg_tensor *c = tg_contiguous(t); /* a real copy, row-major */
        printf("contiguous copy shares storage: %s\n", tg_same_storage(c, m) ? "yes" : "no");
    }

    printf("\n== 4. scopes and ownership ==\n");
    long before = tg_live_tensors();
    tg_tensor *kept = NULL;
    TG_SCOPE {
        tg_tensor *x = tg_randn(TG_SHAPE(1000), (tg_opts){0});
        tg_tensor *y = tg_exp(tg_mul_scalar(x, 0.5));
        printf("inside the scope: %ld live tensors more than before\n", tg_live_tensors() - before);
        kept = tg_retain(tg_sum(y)); /* our own reference: outlives the scope */
    }
    printf("after the scope: %ld more (only the retained one); its value %.3f\n", tg_live_tensors() - before,
           tg_item(kept));
    tg_release(kept); /* we own it, we release it */
    printf("after tg_release: %ld more\n", tg_live_tensors() - before);

    printf("\n== 5. a function and its gradient ==\n");
    /* f(w, b) = sum_i tanh(w x_i + b)^2 for a fixed x; df/dw and df/db by backprop,
     * checked against the formula 2 y (1 - y^2) (x_i or 1). */
    TG_SCOPE {
        tg_tensor *x = tg_from_data((float[]){-1.0f, 0.5f, 2.0f}, TG_SHAPE(3), (tg_opts){0});
        tg_tensor *w = tg_requires_grad_(tg_full(TG_SHAPE(1), 0.7, (tg_opts){0}), true);
        tg_tensor *b = tg_requires_grad_(tg_full(TG_SHAPE(1), -0.2, (tg_opts){0}), true);
        tg_tensor *y = neuron(w, x, b);
        tg_tensor *f = tg_sum(tg_square(y));
        printf("f = %.6f, made by %s, requires grad: %s\n", tg_item(f), tg_grad_fn_name(f),
               tg_requires_grad(f) ? "yes" : "no");
        tg_backward(f); /* fills w's and b's .grad */
        float xs[3] = {-1.0f, 0.5f, 2.0f}, ys[3];
        tg_copy_to_host(y, ys, sizeof ys);
        double dw = 0, db = 0;
        for (int i = 0; i < 3; i++) {
            double g = 2 * ys[i] * (1 - ys[i] * ys[i]);
            dw += g * xs[i];
            db += g;
        }
        printf("df/dw = %.6f (by hand %.6f), df/db = %.6f (by hand %.6f)\n", tg_item(tg_grad(w)), dw,
               tg_item(tg_grad(b)), db);

        printf("\n== 6. no-grad ==\n");
        tg_tensor *z = NULL;
        TG_NO_GRAD { z = tg_mul(w, x); } /* nothing recorded: evaluation, optimizer updates */
        printf("w * x under TG_NO_GRAD requires grad: %s; tg_detach(y) requires grad: %s\n",
               tg_requires_grad(z) ? "yes" : "no", tg_requires_grad(tg_detach(y)) ? "yes" : "no");

        printf("\n== 7. errors ==\n");
        /* The tutorials exit on the first error (TG_ERRORS_EXIT); a program's default is
         * TG_ERRORS_WARN, which prints each distinct error once. Here: record only. */
        tg_error_mode mode = tg_set_error_mode(TG_ERRORS_SILENT);
        tg_tensor *bad = tg_matmul(tg_ones(TG_SHAPE(2, 3), (tg_opts){0}), tg_ones(TG_SHAPE(2, 3), (tg_opts){0}));
        printf("tg_matmul returned %s: %s\n", bad ? "a tensor" : "NULL", tg_last_error());
        tg_clear_error();
        tg_set_error_mode(mode);

        printf("\n== 8. the graph, in Graphviz DOT ==\n");
        /* A fresh graph: the backward above freed the saved tensors of the first one. */
        tg_tensor *g = tg_sum(tg_square(neuron(w, x, b)));
        tg_graph_dot(g, stdout);
        if (dot_path) {
            FILE *out = fopen(tut_output_path(dot_path), "w");
            if (out) {
                tg_graph_dot(g, out);
                fclose(out);
                printf("written to %s\n", tut_output_path(dot_path));
            }
        }
    }
    printf("\nlive tensors at exit: %ld, live graph nodes: %ld\n", tg_live_tensors(), tg_live_graph_nodes());
    return 0;
}
