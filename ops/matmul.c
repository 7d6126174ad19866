/* Matrix products: matmul (torch.matmul) and linear (torch.nn.functional.linear).
 * CPU through OpenBLAS (ops/cpu/gemm.h; bfloat16 through ops/cpu/gemm_bf16.c), CUDA through ops/cuda/matmul.cu (cuBLAS). Both go through
 * one strided-batched GEMM description (gemm_desc below), so a transposed view is
 * passed as a transpose flag instead of being copied. */
#include "ops/matmul.h"

#include <string.h>

#include "autograd/autocast_impl.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/parallel.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "onnx/graph.h"
#include "ops/cuda/matmul.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/cpu/gemm.h"
#include "ops/reduce.h"
#include "ops/shape.h"

/* ======================= GEMM on any device ======================= */

/* How one operand matrix [rows, cols] (with element strides rs, cs) reaches BLAS:
 * row-major as is, or the row-major transpose of a row-major matrix. */
typedef struct {
    bool trans;
    int64_t ld;
} blas_layout;

/* False when neither layout fits (the caller then makes the operand contiguous). */
static bool layout_of(int64_t rows, int64_t cols, int64_t rs, int64_t cs, blas_layout *l) {
    int64_t min_ld_rows = cols > 1 ? cols : 1, min_ld_cols = rows > 1 ? rows : 1;
    /* A size-1 dim's stride is meaningless: BLAS only needs a valid leading dim. */
    if (rows == 1) rs = min_ld_rows;
    if (cols == 1) cs = min_ld_cols;
    if (cs == 1 && rs >= min_ld_rows) {
        *l = (blas_layout){false, rs};
        return true;
    }
    if (rs == 1 && cs >= min_ld_cols) {
        *l = (blas_layout){true, cs};
        return true;
    }
    if (rows == 1 && cols == 1) {
        *l = (blas_layout){false, 1};
        return true;
    }
    return false;
}

/* C_i [m, n] = alpha * op(A_i) op(B_i) + beta * C_i for i < batch (row-major). */
typedef struct {
    tg_dtype dtype;
    tg_device device;
    int64_t m, n, k;
    blas_layout la, lb;
    int64_t ldc;
    double alpha, beta;
} gemm_desc;

/* Product i of a batch on the CPU (split over the thread pool when large and not nested). */
static void gemm_one(const gemm_desc *g, const void *a, int64_t stride_a, const void *b, int64_t stride_b, void *c,
                     int64_t stride_c, int64_t i) {
    if (g->dtype == TG_FLOAT32)
        tg_gemm_f32(g->la.trans, g->lb.trans, g->m, g->n, g->k, (float)g->alpha, (const float *)a + i * stride_a,
                    g->la.ld, (const float *)b + i * stride_b, g->lb.ld, (float)g->beta, (float *)c + i * stride_c,
                    g->ldc);
    else
        tg_gemm_f64(g->la.trans, g->lb.trans, g->m, g->n, g->k, g->alpha, (const double *)a + i * stride_a, g->la.ld,
                    (const double *)b + i * stride_b, g->lb.ld, g->beta, (double *)c + i * stride_c, g->ldc);
}

typedef struct {
    const gemm_desc *g;
    const void *a;
    int64_t stride_a;
    const void *b;
    int64_t stride_b;
    void *c;
    int64_t stride_c;
} batch_job;

static void gemm_batch_chunk(int64_t i0, int64_t i1, void *arg) {
    const batch_job *j = arg;
    for (int64_t i = i0; i < i1; i++) gemm_one(j->g, j->a, j->stride_a, j->b, j->stride_b, j->c, j->stride_c, i);
}

static tg_status gemm_run(const char *op, const gemm_desc *g, const void *a, int64_t stride_a, const void *b,
                          int64_t stride_b, void *c, int64_t stride_c, int64_t batch) {
    if (g->m == 0 || g->n == 0 || batch == 0) return TG_OK;
    if (g->device.kind == TG_DEVICE_CUDA)
        return TG_CUDA_CALL(op, tg_cuda_gemm, g->dtype, g->device.index, g->la.trans, g->lb.trans, g->m, g->n, g->k,
                            g->alpha, a, g->la.ld, stride_a, b, g->lb.ld, stride_b, g->beta, c, g->ldc, stride_c,
                            batch);
    if (g->dtype != TG_FLOAT32 && g->dtype != TG_FLOAT64) /* low precision widens before it gets here */
        return tg_error("%s: no CPU GEMM for %s", op, tg_dtype_name(g->dtype));
    if (batch > 1 && g->m * g->n * g->k < TG_GEMM_PARALLEL_MIN && batch * g->m * g->n * g->k >= TG_GEMM_PARALLEL_MIN) {
        /* Many small products: whole products per thread. */
        batch_job j = {g, a, stride_a, b, stride_b, c, stride_c};
        tg_parallel_for(batch, 1, gemm_batch_chunk, &j);
        return TG_OK;
    }
    for (int64_t i = 0; i < batch; i++) gemm_one(g, a, stride_a, b, stride_b, c, stride_c, i);
    return TG_OK;
}

/* The operand as BLAS can read it: t itself when its last two dims fit a layout,
 * else a contiguous copy (owned by the current scope). */
static tg_tensor *blas_operand(tg_tensor *t, blas_layout *l) {
    int nd = t->shape.ndim;
    int64_t rows = t->shape.dims[nd - 2], cols = t->shape.dims[nd - 1];
    if (layout_of(rows, cols, t->strides[nd - 2], t->strides[nd - 1], l)) return t;
    tg_tensor *c = tg_contiguous(t);
    if (c) layout_of(rows, cols, c->strides[nd - 2], c->strides[nd - 1], l);
    return c;
}

/* True when dims [0, ndim) of t (rows; its last dim, k wide, is the columns) are one
 * run of rows at a uniform stride that BLAS accepts as a leading dim. */
static bool uniform_rows(const tg_tensor *t, int ndim, int64_t k, int64_t *row_stride) {
    if (k > 1 && t->strides[ndim] != 1) return false;
    int64_t stride = -1, expected = -1;
    for (int d = ndim - 1; d >= 0; d--) {
        if (t->shape.dims[d] == 1) continue;
        if (stride < 0) stride = t->strides[d];
        else if (t->strides[d] != expected) return false;
        expected = t->strides[d] * t->shape.dims[d];
    }
    if (stride < 0) stride = k > 1 ? k : 1; /* a single row */
    *row_stride = stride;
    return stride >= (k > 1 ? k : 1);
}

static tg_status check_pair(const char *op, tg_tensor *a, tg_tensor *b, const char *what_b) {
    char da[16], db[16];
    if (!tg_dtype_is_floating(a->dtype))
        return tg_error("%s: expected float32, float64, float16 or bfloat16 tensors, got %s", op,
                        tg_dtype_name(a->dtype));
    if (a->dtype != b->dtype)
        return tg_error("%s: expected tensors of one dtype, got %s and %s (%s)", op, tg_dtype_name(a->dtype),
                        tg_dtype_name(b->dtype), what_b);
    if (!tg_device_equal(a->storage->device, b->storage->device))
        return tg_error("%s: expected tensors on one device, got %s and %s (%s)", op,
                        tg_device_str(a->storage->device, da), tg_device_str(b->storage->device, db), what_b);
    return TG_OK;
}

/* ======================= batched matmul (both operands >= 2-D) ======================= */

/* float16 / bfloat16 on the CPU: bfloat16 goes to the AVX512-BF16 kernel where the CPU
 * has it (bf16_kernel_for below); otherwise the forwards below run the float32 GEMM on
 * widened copies and round the result once (PyTorch's CPU kernels accumulate in float32 too;
 * docs/mixed-precision.md). On CUDA they go to cublasGemmEx (ops/cuda/matmul.cu). */
static bool low_precision_on_cpu(const tg_tensor *t) {
    return tg_dtype_is_low_precision(t->dtype) && t->storage->device.kind == TG_DEVICE_CPU;
}

/* bfloat16 on a CPU with AVX512-BF16: vdpbf16ps (ops/cpu/gemm_bf16.c) into float32, rounded
 * once; the same numbers as the widened float32 GEMM up to float32 summation order. */
static bool bf16_kernel_for(const tg_tensor *t) {
    return t->dtype == TG_BFLOAT16 && t->storage->device.kind == TG_DEVICE_CPU && tg_gemm_bf16_supported();
}

/* Products [i0, i1) of a batch of bfloat16 matrices, each read through its strides. */
typedef struct {
    const tg_tensor *a, *b; /* expanded to the full batch */
    const tg_shape *batch;
    int64_t n, k, m;
    float *out;
    uint16_t *out16; /* instead of out: rounded by the kernel (tg_gemm_bf16_rounded) */
} bf16_batch_job;

static void bf16_batch_chunk(int64_t i0, int64_t i1, void *arg) {
    const bf16_batch_job *j = arg;
    int nb = j->batch->ndim;
    const uint16_t *pa = tg_elem_ptr(j->a), *pb = tg_elem_ptr(j->b);
    for (int64_t i = i0; i < i1; i++) {
        int64_t off_a = 0, off_b = 0, rest = i;
        for (int d = nb - 1; d >= 0; d--) {
            int64_t idx = rest % j->batch->dims[d];
            rest /= j->batch->dims[d];
            off_a += idx * j->a->strides[d];
            off_b += idx * j->b->strides[d];
        }
        if (j->out16)
            tg_gemm_bf16_rounded(j->n, j->m, j->k, pa + off_a, j->a->strides[nb], j->a->strides[nb + 1], pb + off_b,
                                 j->b->strides[nb], j->b->strides[nb + 1], j->out16 + i * j->n * j->m, j->m);
        else
            tg_gemm_bf16(j->n, j->m, j->k, pa + off_a, j->a->strides[nb], j->a->strides[nb + 1], pb + off_b,
                         j->b->strides[nb], j->b->strides[nb + 1], false, j->out + i * j->n * j->m, j->m);
    }
}

static tg_tensor *bmm_bf16(tg_tensor *a, tg_tensor *b, tg_shape batch, tg_shape full_a, tg_shape full_b,
                           tg_shape out_shape) {
    int nb = batch.ndim;
    int64_t n = full_a.dims[nb], k = full_a.dims[nb + 1], m = full_b.dims[nb + 1], count = tg_shape_numel(batch);
    /* A short k (a weight's gradient over a batch) is rounded by the kernel: no float32 result */
    bool rounded = k > 0 && tg_gemm_bf16_rounds(k);
    tg_tensor *out =
        tg_empty(out_shape, (tg_opts){.dtype = rounded ? TG_BFLOAT16 : TG_FLOAT32, .device = a->storage->device});
    tg_tensor *ea = tg_expand(a, full_a), *eb = tg_expand(b, full_b); /* stride 0 on broadcast dims */
    if (!out || !ea || !eb) return NULL;
    bf16_batch_job j = {ea, eb, &batch, n, k, m, rounded ? NULL : tg_elem_ptr(out), rounded ? tg_elem_ptr(out) : NULL};
    if (count > 1 && n * m * k < TG_GEMM_PARALLEL_MIN && count * n * m * k >= TG_GEMM_PARALLEL_MIN)
        tg_parallel_for(count, 1, bf16_batch_chunk, &j); /* many small products: whole ones per thread */
    else bf16_batch_chunk(0, count, &j);
    return rounded ? out : tg_cast(out, TG_BFLOAT16);
}

/* a [..., n, k] x b [..., k, m] -> [batch..., n, m]; the checks are done by tg_matmul. */
static tg_tensor *bmm_forward(tg_ctx *ctx, tg_tensor *const *in) {
    tg_tensor *a = in[0], *b = in[1];
    int na = a->shape.ndim, nb = b->shape.ndim;
    int64_t n = a->shape.dims[na - 2], k = a->shape.dims[na - 1], m = b->shape.dims[nb - 1];
    tg_shape batch_a = {.ndim = na - 2}, batch_b = {.ndim = nb - 2}, batch;
    memcpy(batch_a.dims, a->shape.dims, sizeof(int64_t) * (size_t)(na - 2));
    memcpy(batch_b.dims, b->shape.dims, sizeof(int64_t) * (size_t)(nb - 2));
    tg_broadcast_shapes(batch_a, batch_b, &batch); /* checked by tg_matmul */
    tg_shape out_shape = batch, full_a = batch, full_b = batch;
    out_shape.dims[out_shape.ndim++] = n;
    out_shape.dims[out_shape.ndim++] = m;
    full_a.dims[full_a.ndim++] = n;
    full_a.dims[full_a.ndim++] = k;
    full_b.dims[full_b.ndim++] = k;
    full_b.dims[full_b.ndim++] = m;
    tg_opts opts = {.dtype = a->dtype, .device = a->storage->device};
    if (bf16_kernel_for(a)) {
        tg_ctx_save(ctx, a);
        tg_ctx_save(ctx, b);
        return bmm_bf16(a, b, batch, full_a, full_b, out_shape);
    }
    if (low_precision_on_cpu(a)) { /* float32 GEMM, rounded once */
        tg_ctx_save(ctx, a);
        tg_ctx_save(ctx, b);
        return tg_cast(tg_matmul(tg_cast(a, TG_FLOAT32), tg_cast(b, TG_FLOAT32)), a->dtype);
    }
    tg_tensor *out = k == 0 ? tg_zeros(out_shape, opts) : tg_empty(out_shape, opts);
    if (!out) return NULL;
    tg_ctx_save(ctx, a);
    tg_ctx_save(ctx, b);
    if (k == 0 || tg_shape_numel(out_shape) == 0) return out;

    gemm_desc g = {
        .dtype = a->dtype, .device = a->storage->device, .m = n, .n = m, .k = k, .ldc = m, .alpha = 1, .beta = 0};
    /* Views broadcast to the full batch (stride 0 on broadcast dims), no copies. */
    tg_tensor *ea = tg_expand(a, full_a), *eb = tg_expand(b, full_b);
    if (!ea || !eb || !(ea = blas_operand(ea, &g.la)) || !(eb = blas_operand(eb, &g.lb))) return NULL;
    int nbatch = batch.ndim;
    char *pa = tg_elem_ptr(ea), *pb = tg_elem_ptr(eb), *pc = tg_elem_ptr(out);
    size_t es = tg_dtype_size(a->dtype);

    /* One GEMM for all of a's rows when b is shared by the whole batch and a's batch
     * and row dims form one uniform run of rows (the common x [B, T, k] @ w [k, m]). */
    bool b_shared = true;
    for (int d = 0; d < nbatch; d++) b_shared &= eb->strides[d] == 0 || batch.dims[d] == 1;
    int64_t row_stride;
    if (nbatch == 0 || (b_shared && uniform_rows(ea, nbatch + 1, k, &row_stride))) {
        gemm_desc whole = g;
        whole.m = n * tg_shape_numel(batch);
        if (nbatch > 0) whole.la = (blas_layout){false, row_stride};
        return gemm_run("tg_matmul", &whole, pa, 0, pb, 0, pc, 0, 1) ? NULL : out;
    }
    /* Otherwise: one strided-batched call per index of the outer batch dims, over the last one. */
    int64_t last = batch.dims[nbatch - 1], outer = tg_shape_numel(batch) / (last ? last : 1);
    for (int64_t o = 0; o < outer && last > 0; o++) {
        int64_t off_a = 0, off_b = 0, rest = o;
        for (int d = nbatch - 2; d >= 0; d--) {
            int64_t i = rest % batch.dims[d];
            rest /= batch.dims[d];
            off_a += i * ea->strides[d];
            off_b += i * eb->strides[d];
        }
        if (gemm_run("tg_matmul", &g, pa + off_a * (int64_t)es, ea->strides[nbatch - 1], pb + off_b * (int64_t)es,
                     eb->strides[nbatch - 1], pc + o * last * n * m * (int64_t)es, n * m, last))
            return NULL;
    }
    return out;
}

/* d(a @ b): grad_a = g @ b^T, grad_b = a^T @ g; both have the broadcast batch shape
 * and the engine sums them back to the inputs' shapes. */
static void bmm_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    tg_tensor *a = tg_ctx_saved(ctx, 0), *b = tg_ctx_saved(ctx, 1);
    if (!a || !b) return;
    if (tg_ctx_needs_input_grad(ctx, 0)) grad_in[0] = tg_matmul(g, tg_transpose(b, -1, -2));
    if (tg_ctx_needs_input_grad(ctx, 1)) grad_in[1] = tg_matmul(tg_transpose(a, -1, -2), g);
}

static tg_status matmul_onnx(tg_onnx_op *op) { return tg_onnx_add_node_same(op, "MatMul") ? TG_OK : TG_ERROR; }

static const tg_function bmm_fn = {.name = "matmul",
                                   .num_inputs = 2,
                                   .forward = bmm_forward,
                                   .backward = bmm_backward,
                                   .low_precision = TG_LOW_PRECISION_NATIVE,
                                   .autocast = TG_AUTOCAST_LOWER,
                                   .onnx = matmul_onnx};

static tg_tensor *matmul_checked(tg_tensor *a, tg_tensor *b) {
    if (tg_unusable_(a)) return tg_error_unusable_input("tg_matmul", a, 0), NULL;
    if (tg_unusable_(b)) return tg_error_unusable_input("tg_matmul", b, 1), NULL;
    char sa[128], sb[128];
    tg_shape_str(a->shape, sa, sizeof sa);
    tg_shape_str(b->shape, sb, sizeof sb);
    if (a->shape.ndim == 0 || b->shape.ndim == 0)
        return tg_error("tg_matmul: both arguments need at least 1 dim, got %s and %s", sa, sb), NULL;
    if (check_pair("tg_matmul", a, b, "second argument")) return NULL;
    int na = a->shape.ndim, nb = b->shape.ndim;
    int64_t ka = a->shape.dims[na - 1], kb = b->shape.dims[nb > 1 ? nb - 2 : 0];
    if (ka != kb)
        return tg_error("tg_matmul: cannot multiply %s by %s: inner sizes %lld != %lld", sa, sb, (long long)ka,
                        (long long)kb),
               NULL;
    tg_shape batch_a = {.ndim = na > 2 ? na - 2 : 0}, batch_b = {.ndim = nb > 2 ? nb - 2 : 0}, batch;
    memcpy(batch_a.dims, a->shape.dims, sizeof(int64_t) * (size_t)batch_a.ndim);
    memcpy(batch_b.dims, b->shape.dims, sizeof(int64_t) * (size_t)batch_b.ndim);
    if (!tg_broadcast_shapes(batch_a, batch_b, &batch))
        return tg_error("tg_matmul: batch dims of %s and %s cannot be broadcast together", sa, sb), NULL;
    if (batch.ndim + 2 > TG_MAX_DIMS)
        return tg_error("tg_matmul: result of %s by %s would exceed %d dims", sa, sb, TG_MAX_DIMS), NULL;
    if (na >= 2 && nb >= 2) return tg_apply(&bmm_fn, (tg_tensor *[]){a, b});
    /* A 1-D operand becomes a one-row (a) or one-column (b) matrix; that dim is
     * removed from the result, as in PyTorch. */
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *a2 = na == 1 ? tg_unsqueeze(a, 0) : a, *b2 = nb == 1 ? tg_unsqueeze(b, 1) : b;
        tg_tensor *r = tg_apply(&bmm_fn, (tg_tensor *[]){a2, b2});
        if (r && nb == 1) r = tg_squeeze(r, -1);
        if (r && na == 1) r = tg_squeeze(r, -2 + (nb == 1));
        result = tg_scope_return(r);
    }
    return result;
}

/* ======================= linear ======================= */

/* x [N..., in] * w [out, in]^T + b [out]; inputs: x, w[, b]. */
static tg_tensor *linear_forward(tg_ctx *ctx, tg_tensor *const *in) {
    tg_tensor *x = in[0], *w = in[1], *bias = tg_ctx_function(ctx)->num_inputs == 3 ? in[2] : NULL;
    int64_t in_features = w->shape.dims[1], out_features = w->shape.dims[0];
    int64_t rows = 1; /* x's leading dims, flattened */
    for (int d = 0; d < x->shape.ndim - 1; d++) rows *= x->shape.dims[d];
    tg_shape out_shape = x->shape;
    out_shape.dims[out_shape.ndim - 1] = out_features;
    tg_opts opts = {.dtype = x->dtype, .device = x->storage->device};
    if (bf16_kernel_for(x)) { /* bias in float32, then x w^T added by vdpbf16ps, rounded once */
        tg_tensor *out = tg_empty(TG_SHAPE(rows, out_features), (tg_opts){.dtype = TG_FLOAT32, .device = opts.device});
        tg_tensor *x2 = tg_reshape(x, TG_SHAPE(rows, in_features));
        if (!out || !x2 || (bias && tg_copy_values_(out, tg_cast(bias, TG_FLOAT32)))) return NULL;
        tg_gemm_bf16(rows, out_features, in_features, tg_elem_ptr(x2), x2->strides[0], x2->strides[1], tg_elem_ptr(w),
                     w->strides[1], w->strides[0], bias != NULL, tg_elem_ptr(out), out_features);
        tg_ctx_save(ctx, x);
        tg_ctx_save(ctx, w);
        return tg_reshape(tg_cast(out, TG_BFLOAT16), out_shape);
    }
    if (low_precision_on_cpu(x)) { /* float32 GEMM and bias, rounded once */
        tg_ctx_save(ctx, x);
        tg_ctx_save(ctx, w);
        return tg_cast(
            tg_linear(tg_cast(x, TG_FLOAT32), tg_cast(w, TG_FLOAT32), bias ? tg_cast(bias, TG_FLOAT32) : NULL),
            x->dtype);
    }
    tg_tensor *out = tg_empty(TG_SHAPE(rows, out_features), opts);
    tg_tensor *x2 = tg_reshape(x, TG_SHAPE(rows, in_features)); /* a view unless x is scattered */
    if (!out || !x2) return NULL;
    /* float32 on the CPU: the bias added by the GEMM to blocks of out while they are in cache */
    bool gemm_adds_bias = bias && x->dtype == TG_FLOAT32 && x->storage->device.kind == TG_DEVICE_CPU && in_features > 0;
    if (!gemm_adds_bias && (bias ? tg_copy_values_(out, bias) : tg_fill_values_(out, 0)))
        return NULL; /* bias broadcast over the rows */
    gemm_desc g = {.dtype = x->dtype,
                   .device = x->storage->device,
                   .m = rows,
                   .n = out_features,
                   .k = in_features,
                   .ldc = out_features,
                   .alpha = 1,
                   .beta = 1};
    tg_tensor *wt = tg_transpose(w, 0, 1); /* [in, out]: a transposed view, no copy */
    if (!wt || !(x2 = blas_operand(x2, &g.la)) || !(wt = blas_operand(wt, &g.lb))) return NULL;
    if (gemm_adds_bias) {
        tg_tensor *b = tg_contiguous(bias);
        if (!b) return NULL;
        tg_gemm_f32_bias(g.la.trans, g.lb.trans, rows, out_features, in_features, tg_elem_ptr(x2), g.la.ld,
                         tg_elem_ptr(wt), g.lb.ld, tg_elem_ptr(b), tg_elem_ptr(out), out_features);
    } else if (in_features > 0 &&
               gemm_run("tg_linear", &g, tg_elem_ptr(x2), 0, tg_elem_ptr(wt), 0, tg_elem_ptr(out), 0, 1)) {
        return NULL;
    }
    tg_ctx_save(ctx, x);
    tg_ctx_save(ctx, w);
    return tg_reshape(out, out_shape);
}

/* Both gradients of a float32/float64 CPU linear as two GEMMs side by side
 * (tg_gemm_many): dx = g w and dw = g^T x, and where dx runs in oneDNN's blocks of rows
 * the bias gradient summed from the blocks of g that it reads. False when this path does not apply. Not
 * when backward records a graph (create_graph): then the products go through tg_matmul
 * so that they are differentiable themselves. */
static bool linear_grads_side_by_side(tg_ctx *ctx, tg_tensor *g, tg_tensor *x, tg_tensor *w, tg_tensor **grad_in) {
    tg_dtype dt = w->dtype;
    if (tg_is_grad_enabled() || w->storage->device.kind != TG_DEVICE_CPU || (dt != TG_FLOAT32 && dt != TG_FLOAT64) ||
        x->dtype != dt || g->dtype != dt || !tg_ctx_needs_input_grad(ctx, 0) || !tg_ctx_needs_input_grad(ctx, 1))
        return false;
    tg_shape xs = tg_ctx_input_shape(ctx, 0);
    int64_t rows = 1, in_features = tg_size(w, 1), out_features = tg_size(w, 0);
    for (int d = 0; d < xs.ndim - 1; d++) rows *= xs.dims[d];
    if (rows == 0 || in_features == 0 || out_features == 0) return false;
    blas_layout lg, lx, lw;
    tg_tensor *g2 = tg_reshape(g, TG_SHAPE(rows, out_features)), *x2 = tg_reshape(x, TG_SHAPE(rows, in_features));
    tg_opts opts = {.dtype = dt, .device = w->storage->device};
    tg_tensor *dx = tg_empty(TG_SHAPE(rows, in_features), opts), *dw = tg_empty(w->shape, opts);
    if (!g2 || !x2 || !dx || !dw || !(g2 = blas_operand(g2, &lg)) || !(x2 = blas_operand(x2, &lx)) ||
        !(w = blas_operand(w, &lw)))
        return true; /* the error is recorded; the gradients stay unset */
    bool f64 = dt == TG_FLOAT64;
    tg_gemm_args products[2] = {
        /* dx [rows, in] = g [rows, out] w [out, in] */
        {f64, lg.trans, lw.trans, rows, in_features, out_features, 1, tg_elem_ptr(g2), lg.ld, tg_elem_ptr(w), lw.ld, 0,
         tg_elem_ptr(dx), in_features, NULL},
        /* dw [out, in] = g^T [out, rows] x [rows, in] */
        {f64, !lg.trans, lx.trans, out_features, in_features, rows, 1, tg_elem_ptr(g2), lg.ld, tg_elem_ptr(x2), lx.ld,
         0, tg_elem_ptr(dw), in_features, NULL},
    };
    /* the bias gradient (g's column sums) from the blocks of g that dx's product reads */
    tg_tensor *db = NULL;
    if (tg_ctx_function(ctx)->num_inputs == 3 && tg_ctx_needs_input_grad(ctx, 2) &&
        tg_gemm_sums_a_in_blocks(&products[0])) {
        if (!(db = tg_empty(TG_SHAPE(out_features), opts))) return true;
        products[0].a_col_sums = tg_elem_ptr(db);
    }
    tg_gemm_many(products, 2);
    grad_in[0] = tg_reshape(dx, xs);
    grad_in[1] = dw;
    if (db) grad_in[2] = db;
    return true;
}

static void linear_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    tg_tensor *x = tg_ctx_saved(ctx, 0), *w = tg_ctx_saved(ctx, 1);
    if (!x || !w) return;
    if (linear_grads_side_by_side(ctx, g, x, w, grad_in)) {
        if (tg_ctx_function(ctx)->num_inputs == 3 && tg_ctx_needs_input_grad(ctx, 2) && !grad_in[2])
            grad_in[2] = tg_sum_to(g, tg_ctx_input_shape(ctx, 2));
        return;
    }
    if (tg_ctx_needs_input_grad(ctx, 0)) grad_in[0] = tg_matmul(g, w); /* [..., out] @ [out, in] */
    if (tg_ctx_needs_input_grad(ctx, 1)) {                             /* sum over rows of g^T x */
        tg_shape xs = tg_ctx_input_shape(ctx, 0);
        int64_t rows = 1, in_features = tg_size(w, 1), out_features = tg_size(w, 0);
        for (int d = 0; d < xs.ndim - 1; d++) rows *= xs.dims[d];
        tg_tensor *g2 = tg_reshape(g, TG_SHAPE(rows, out_features));
        tg_tensor *x2 = tg_reshape(x, TG_SHAPE(rows, in_features));
        grad_in[1] = tg_matmul(tg_transpose(g2, 0, 1), x2);
    }
    if (tg_ctx_function(ctx)->num_inputs == 3 && tg_ctx_needs_input_grad(ctx, 2))
        grad_in[2] = tg_sum_to(g, tg_ctx_input_shape(ctx, 2));
}

/* Gemm(x, W, b, transB) for a 2-D x (torch.onnx's form), else MatMul by W^T (+ b). */
static tg_status linear_onnx(tg_onnx_op *op) {
    if (tg_onnx_input(op, 0)->shape.ndim == 2) {
        tg_onnx_node *n = tg_onnx_add_node_same(op, "Gemm");
        tg_onnx_attr_int(n, "transB", 1);
        return n ? TG_OK : TG_ERROR;
    }
    bool bias = tg_onnx_num_inputs(op) == 3;
    const char *w = tg_onnx_input_name(op, 1), *wt = tg_onnx_value(op);
    const char *y = tg_onnx_output_name(op, 0), *xw = bias ? tg_onnx_value(op) : y;
    tg_onnx_attr_ints(tg_onnx_add_node(op, "Transpose", 1, &w, 1, &wt), "perm", (int64_t[]){1, 0}, 2);
    if (!tg_onnx_add_node(op, "MatMul", 2, (const char *[]){tg_onnx_input_name(op, 0), wt}, 1, &xw)) return TG_ERROR;
    return !bias || tg_onnx_add_node(op, "Add", 2, (const char *[]){xw, tg_onnx_input_name(op, 2)}, 1, &y) ? TG_OK
                                                                                                           : TG_ERROR;
}

static const tg_function linear_fn = {.name = "linear",
                                      .num_inputs = 3,
                                      .forward = linear_forward,
                                      .backward = linear_backward,
                                      .low_precision = TG_LOW_PRECISION_NATIVE,
                                      .autocast = TG_AUTOCAST_LOWER,
                                      .onnx = linear_onnx};
static const tg_function linear_no_bias_fn = {.name = "linear",
                                              .num_inputs = 2,
                                              .forward = linear_forward,
                                              .backward = linear_backward,
                                              .low_precision = TG_LOW_PRECISION_NATIVE,
                                              .autocast = TG_AUTOCAST_LOWER,
                                              .onnx = linear_onnx};

static tg_tensor *linear_checked(tg_tensor *x, tg_tensor *weight, tg_tensor *bias) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_linear", x, 0), NULL;
    if (tg_unusable_(weight)) return tg_error_unusable_input("tg_linear", weight, 1), NULL;
    char sx[128], sw[128], sb[128];
    tg_shape_str(x->shape, sx, sizeof sx);
    tg_shape_str(weight->shape, sw, sizeof sw);
    if (weight->shape.ndim != 2)
        return tg_error("tg_linear: weight must be 2-D [out_features, in_features], got %s", sw), NULL;
    if (x->shape.ndim == 0) return tg_error("tg_linear: input must have at least 1 dim, got %s", sx), NULL;
    if (check_pair("tg_linear", x, weight, "input and weight")) return NULL;
    if (x->shape.dims[x->shape.ndim - 1] != weight->shape.dims[1])
        return tg_error("tg_linear: cannot multiply input %s by weight %s transposed: in_features %lld != %lld", sx, sw,
                        (long long)x->shape.dims[x->shape.ndim - 1], (long long)weight->shape.dims[1]),
               NULL;
    if (!bias) return tg_apply(&linear_no_bias_fn, (tg_tensor *[]){x, weight});
    tg_shape_str(bias->shape, sb, sizeof sb);
    if (check_pair("tg_linear", x, bias, "input and bias")) return NULL;
    if (bias->shape.ndim != 1 || bias->shape.dims[0] != weight->shape.dims[0])
        return tg_error("tg_linear: bias must be [%lld] for weight %s, got %s", (long long)weight->shape.dims[0], sw,
                        sb),
               NULL;
    return tg_apply(&linear_fn, (tg_tensor *[]){x, weight, bias});
}

/* ======================= linear under CPU bfloat16 autocast ======================= */

/* autocast's linear on a float32 weight is linear(cast(x), cast(w), cast(b)). On a CPU with
 * the bfloat16 kernel the casts of the parameters are fused into the products instead of
 * being passes of their own (every step, over every weight, twice): w is rounded to
 * bfloat16 while it is packed (the forward, and dx = g w), and dw = g^T x is stored as
 * float32 values already rounded to bfloat16 (the cast's backward widens them). The same
 * bits as the composition (tests/autograd/autocast_fused_linear_test.cc). Inputs: x
 * (bfloat16), w (float32)[, b (float32)]. */
static tg_tensor *autocast_linear_forward(tg_ctx *ctx, tg_tensor *const *in) {
    tg_tensor *x = in[0], *w = in[1], *bias = tg_ctx_function(ctx)->num_inputs == 3 ? in[2] : NULL;
    int64_t in_features = w->shape.dims[1], out_features = w->shape.dims[0], rows = 1;
    for (int d = 0; d < x->shape.ndim - 1; d++) rows *= x->shape.dims[d];
    tg_shape out_shape = x->shape;
    out_shape.dims[out_shape.ndim - 1] = out_features;
    /* k within the kernel's slice (the tutorials' layers): the kernel starts the sums from the
     * rounded bias and rounds them itself, so neither a float32 output nor a pass filling it */
    bool by_kernel = tg_gemm_bf16_rounds(in_features);
    tg_tensor *out = tg_empty(TG_SHAPE(rows, out_features), (tg_opts){.dtype = by_kernel ? TG_BFLOAT16 : TG_FLOAT32});
    tg_tensor *x2 = tg_reshape(x, TG_SHAPE(rows, in_features));
    tg_tensor *b16 = bias ? tg_contiguous(tg_cast(bias, TG_BFLOAT16)) : NULL; /* the rounded bias */
    if (!out || !x2 || (bias && !b16) || (b16 && !by_kernel && tg_copy_values_(out, b16))) return NULL;
    tg_gemm_bf16_general((tg_gemm_bf16_args){.m = rows,
                                             .n = out_features,
                                             .k = in_features,
                                             .a = tg_elem_ptr(x2),
                                             .a_rs = x2->strides[0],
                                             .a_cs = x2->strides[1],
                                             .b32 = tg_elem_ptr(w),
                                             .b_rs = w->strides[1],
                                             .b_cs = w->strides[0],
                                             .c_kind = by_kernel ? TG_BF16_C_BF16 : TG_BF16_C_F32,
                                             .accumulate = b16 && !by_kernel,
                                             .bias = b16 && by_kernel ? tg_elem_ptr(b16) : NULL,
                                             .c = tg_elem_ptr(out),
                                             .ldc = out_features});
    tg_ctx_save(ctx, x);
    tg_ctx_save(ctx, w);
    return tg_reshape(by_kernel ? out : tg_cast(out, TG_BFLOAT16), out_shape);
}

/* A [m, n] product on the bfloat16 kernel, rounded to bfloat16 (out16) or to bfloat16 values
 * kept in float32 (!out16); by the kernel itself when k fits its slice, else by a cast. */
static tg_tensor *bf16_product_rounded(tg_gemm_bf16_args g, bool out16) {
    bool by_kernel = tg_gemm_bf16_rounds(g.k);
    tg_tensor *c = tg_empty(TG_SHAPE(g.m, g.n), (tg_opts){.dtype = out16 && by_kernel ? TG_BFLOAT16 : TG_FLOAT32});
    if (!c) return NULL;
    g.c = tg_elem_ptr(c);
    g.ldc = g.n;
    g.c_kind = !by_kernel ? TG_BF16_C_F32 : out16 ? TG_BF16_C_BF16 : TG_BF16_C_ROUNDED_F32;
    tg_gemm_bf16_general(g);
    if (by_kernel) return c;
    return out16 ? tg_cast(c, TG_BFLOAT16) : tg_cast(tg_cast(c, TG_BFLOAT16), TG_FLOAT32);
}

static void autocast_linear_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    tg_tensor *x = tg_ctx_saved(ctx, 0), *w = tg_ctx_saved(ctx, 1);
    if (!x || !w) return;
    bool bias = tg_ctx_function(ctx)->num_inputs == 3 && tg_ctx_needs_input_grad(ctx, 2);
    tg_shape xs = tg_ctx_input_shape(ctx, 0);
    int64_t rows = 1, in_features = tg_size(w, 1), out_features = tg_size(w, 0);
    for (int d = 0; d < xs.ndim - 1; d++) rows *= xs.dims[d];
    tg_tensor *g2 = tg_reshape(g, TG_SHAPE(rows, out_features)), *x2 = tg_reshape(x, TG_SHAPE(rows, in_features));
    if (!g2 || !x2) return;
    if (tg_is_grad_enabled()) { /* create_graph: the composition, itself differentiable */
        if (tg_ctx_needs_input_grad(ctx, 0)) grad_in[0] = tg_matmul(g, tg_cast(w, TG_BFLOAT16));
        if (tg_ctx_needs_input_grad(ctx, 1)) grad_in[1] = tg_cast(tg_matmul(tg_transpose(g2, 0, 1), x2), TG_FLOAT32);
        if (bias) grad_in[2] = tg_cast(tg_sum_to(g, tg_ctx_input_shape(ctx, 2)), TG_FLOAT32);
        return;
    }
    if (tg_ctx_needs_input_grad(ctx, 0)) /* dx [rows, in] = g [rows, out] w [out, in], w rounded while packed */
        grad_in[0] = tg_reshape(bf16_product_rounded((tg_gemm_bf16_args){.m = rows,
                                                                         .n = in_features,
                                                                         .k = out_features,
                                                                         .a = tg_elem_ptr(g2),
                                                                         .a_rs = g2->strides[0],
                                                                         .a_cs = g2->strides[1],
                                                                         .b32 = tg_elem_ptr(w),
                                                                         .b_rs = w->strides[0],
                                                                         .b_cs = w->strides[1]},
                                                     true),
                                xs);
    if (tg_ctx_needs_input_grad(ctx, 1)) /* dw [out, in] = g^T [out, rows] x [rows, in], rounded, float32 */
        grad_in[1] = bf16_product_rounded((tg_gemm_bf16_args){.m = out_features,
                                                              .n = in_features,
                                                              .k = rows,
                                                              .a = tg_elem_ptr(g2),
                                                              .a_rs = g2->strides[1],
                                                              .a_cs = g2->strides[0],
                                                              .b = tg_elem_ptr(x2),
                                                              .b_rs = x2->strides[0],
                                                              .b_cs = x2->strides[1]},
                                          false);
    if (bias) grad_in[2] = tg_cast(tg_sum_to(g, tg_ctx_input_shape(ctx, 2)), TG_FLOAT32);
}

static const tg_function autocast_linear_fn = {.name = "linear",
                                               .num_inputs = 3,
                                               .forward = autocast_linear_forward,
                                               .backward = autocast_linear_backward,
                                               .low_precision = TG_LOW_PRECISION_NATIVE,
                                               .autocast = TG_AUTOCAST_NONE};
static const tg_function autocast_linear_no_bias_fn = {.name = "linear",
                                                       .num_inputs = 2,
                                                       .forward = autocast_linear_forward,
                                                       .backward = autocast_linear_backward,
                                                       .low_precision = TG_LOW_PRECISION_NATIVE,
                                                       .autocast = TG_AUTOCAST_NONE};

/* Whether tg_linear under autocast takes the fused path: CPU bfloat16 autocast with the
 * bfloat16 kernel, a float32 2-D weight (and bias) that autocast would cast, an input that
 * is or becomes bfloat16, and no other reason to refuse (the checks then run unfused). */
static bool fused_autocast_linear(tg_tensor *x, tg_tensor *w, tg_tensor *b) {
    if (!x || !w || w->shape.ndim != 2 || x->shape.ndim == 0 || w->storage->device.kind != TG_DEVICE_CPU ||
        x->storage->device.kind != TG_DEVICE_CPU || !tg_gemm_bf16_supported() ||
        tg_autocast_target(TG_AUTOCAST_LOWER, w) != TG_BFLOAT16)
        return false;
    if (x->dtype != TG_BFLOAT16 && tg_autocast_target(TG_AUTOCAST_LOWER, x) != TG_BFLOAT16) return false;
    if (x->shape.dims[x->shape.ndim - 1] != w->shape.dims[1]) return false;
    if (b && (b->storage->device.kind != TG_DEVICE_CPU || tg_autocast_target(TG_AUTOCAST_LOWER, b) != TG_BFLOAT16 ||
              b->shape.ndim != 1 || b->shape.dims[0] != w->shape.dims[0]))
        return false;
    return true;
}

/* Autocast casts the inputs before the checks above, which require one dtype (the
 * functions' TG_AUTOCAST_LOWER covers calls that reach tg_apply directly). */
tg_tensor *tg_matmul(tg_tensor *a, tg_tensor *b) {
    if (!tg_autocast_active()) return matmul_checked(a, b);
    tg_tensor *out = NULL;
    TG_SCOPE {
        tg_tensor *t[] = {a, b};
        if (!tg_autocast_inputs(TG_AUTOCAST_LOWER, t, 2)) out = tg_scope_return(matmul_checked(t[0], t[1]));
    }
    return out;
}

tg_tensor *tg_linear(tg_tensor *x, tg_tensor *weight, tg_tensor *bias) {
    if (!tg_autocast_active()) return linear_checked(x, weight, bias);
    bool fused = fused_autocast_linear(x, weight, bias);
    tg_tensor *out = NULL;
    TG_SCOPE {
        if (fused) {
            tg_tensor *xc = x->dtype == TG_BFLOAT16 ? x : tg_autocast_cast(x, TG_BFLOAT16);
            if (xc)
                out = tg_scope_return(bias ? tg_apply(&autocast_linear_fn, (tg_tensor *[]){xc, weight, bias})
                                           : tg_apply(&autocast_linear_no_bias_fn, (tg_tensor *[]){xc, weight}));
        } else {
            tg_tensor *t[] = {x, weight, bias};
            if (!tg_autocast_inputs(TG_AUTOCAST_LOWER, t, 3)) out = tg_scope_return(linear_checked(t[0], t[1], t[2]));
        }
    }
    return out;
}
