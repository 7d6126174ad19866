/* One line's stable sort order, the formula both devices run: the CPU loop in
 * ops/sort.c and the CUDA kernel in ops/cuda/sort.cu expand TG_SORT_LINE, so the CPU
 * tests check the order the GPU computes. PyTorch's order: NaN is larger than every
 * number (last ascending, first descending), and equal keys keep their index order
 * (stable, in both directions). */
#ifndef TG_OPS_SORT_LINE_H
#define TG_OPS_SORT_LINE_H

/* a strictly before b (a != a is NaN; false for integers). */
#define TG_SORT_LESS(a, b) ((a) < (b) || ((b) != (b) && (a) == (a)))
#define TG_SORT_BEFORE(a, b, descending) ((descending) ? TG_SORT_LESS(b, a) : TG_SORT_LESS(a, b))

/* order[0..len) = the positions of x's line (x[k * xs], element type T) in sort
 * order; tmp: scratch of len int64. A bottom-up merge sort: a run's element is taken
 * from the right only when strictly before, which keeps it stable. */
#define TG_SORT_LINE(T, x, xs, order, tmp, len, descending)                                      \
    do {                                                                                         \
        int64_t *src_ = (order), *dst_ = (tmp);                                                  \
        for (int64_t i_ = 0; i_ < (len); i_++) src_[i_] = i_;                                    \
        for (int64_t w_ = 1; w_ < (len); w_ *= 2) {                                              \
            for (int64_t lo_ = 0; lo_ < (len); lo_ += 2 * w_) {                                  \
                int64_t mid_ = lo_ + w_ < (len) ? lo_ + w_ : (len);                              \
                int64_t hi_ = lo_ + 2 * w_ < (len) ? lo_ + 2 * w_ : (len);                       \
                int64_t a_ = lo_, b_ = mid_, o_ = lo_;                                           \
                while (a_ < mid_ && b_ < hi_) {                                                  \
                    T va_ = (x)[src_[a_] * (xs)], vb_ = (x)[src_[b_] * (xs)];                    \
                    dst_[o_++] = TG_SORT_BEFORE(vb_, va_, descending) ? src_[b_++] : src_[a_++]; \
                }                                                                                \
                while (a_ < mid_) dst_[o_++] = src_[a_++];                                       \
                while (b_ < hi_) dst_[o_++] = src_[b_++];                                        \
            }                                                                                    \
            int64_t *swap_ = src_;                                                               \
            src_ = dst_;                                                                         \
            dst_ = swap_;                                                                        \
        }                                                                                        \
        if (src_ != (order))                                                                     \
            for (int64_t i_ = 0; i_ < (len); i_++) (order)[i_] = src_[i_];                       \
    } while (0)

#endif
