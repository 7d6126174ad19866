// The index math that ops/conv_index.h and ops/pool_window.h give both devices: the
// CUDA kernels use tg_conv_tap_output (col2im reads each input's outputs) where the
// CPU loops use tg_conv_tap and tg_conv_valid_range, so these check, by brute force
// over small geometries, that the three describe the same taps, and that a max
// window's taps are the dilated kernel's positions inside the input.
#include "ops/conv_index.h"
#include "ops/pool_window.h"
#include "tests/test_util.h"

namespace {

TEST(SharedIndexTest, ConvTapOutputInvertsTap) {
    int checked = 0;
    for (int64_t in = 1; in <= 9; in++)
        for (int s = 1; s <= 3; s++)
            for (int p = 0; p <= 3; p++)
                for (int d = 1; d <= 3; d++)
                    for (int64_t k = 1; k <= 4; k++) {
                        int64_t out = tg_conv_out_size(in, k, s, p, d);
                        EXPECT_EQ(out, in + 2 * p - d * (k - 1) - 1 < 0 ? 0 : (in + 2 * p - d * (k - 1) - 1) / s + 1);
                        for (int64_t j = 0; j < k; j++) {
                            int64_t lo, hi;
                            tg_conv_valid_range(out, in, s, p, j * d, &lo, &hi);
                            for (int64_t o = 0; o < out; o++) {
                                int64_t i = tg_conv_tap(o, j * d, s, p);
                                EXPECT_EQ(i >= 0 && i < in, o >= lo && o < hi) << in << " " << s << " " << p;
                            }
                            for (int64_t i = 0; i < in; i++) {
                                int64_t want = -1; // the output whose tap j reads i, by search
                                for (int64_t o = 0; o < out; o++)
                                    if (tg_conv_tap(o, j * d, s, p) == i) want = o;
                                EXPECT_EQ(tg_conv_tap_output(i, j * d, s, p, out), want);
                                checked++;
                            }
                        }
                    }
    EXPECT_GT(checked, 10000);
}

TEST(SharedIndexTest, ConvColumnRowsAreChannelMajor) {
    int64_t r = 0;
    for (int64_t c = 0; c < 3; c++)
        for (int64_t i = 0; i < 2; i++)
            for (int64_t j = 0; j < 5; j++, r++) {
                int64_t cc, ki, kj;
                tg_conv_col_row(r, 2, 5, &cc, &ki, &kj);
                EXPECT_EQ(cc, c);
                EXPECT_EQ(ki, i);
                EXPECT_EQ(kj, j);
            }
}

TEST(SharedIndexTest, MaxPoolTapsAreTheDilatedKernelInsideTheInput) {
    for (int64_t in = 1; in <= 8; in++)
        for (int k = 1; k <= 4; k++)
            for (int s = 1; s <= 3; s++)
                for (int p = 0; p <= k / 2; p++)
                    for (int d = 1; d <= 3; d++)
                        for (int64_t o = 0; o < 6; o++) {
                            int64_t first, end;
                            tg_pool_max_taps(o, in, k, s, p, d, &first, &end);
                            std::vector<int64_t> want, got;
                            for (int j = 0; j < k; j++) {
                                int64_t i = o * s - p + (int64_t)j * d;
                                if (i >= 0 && i < in) want.push_back(i);
                            }
                            for (int64_t i = first; i < end; i += d) got.push_back(i);
                            EXPECT_EQ(got, want) << in << " " << k << " " << s << " " << p << " " << d << " " << o;
                        }
}

TEST(SharedIndexTest, AvgWindowsAsATen) {
    int64_t start, end, div;
    // kernel 3, stride 2, padding 1 over 5 inputs: output 0 covers [-1, 2), 2 of them inside
    tg_pool_avg_window(false, 3, 2, 1, true, 0, 5, 3, &start, &end, &div);
    EXPECT_EQ(start, 0);
    EXPECT_EQ(end, 2);
    EXPECT_EQ(div, 3);
    tg_pool_avg_window(false, 3, 2, 1, false, 0, 5, 3, &start, &end, &div);
    EXPECT_EQ(div, 2);
    // output 2 covers [3, 6): the padded end 6 counts, as ATen's min(hstart + k, in + pad)
    tg_pool_avg_window(false, 3, 2, 1, true, 2, 5, 3, &start, &end, &div);
    EXPECT_EQ(start, 3);
    EXPECT_EQ(end, 5);
    EXPECT_EQ(div, 3);
    // adaptive 5 -> 3: [0, 2), [1, 4), [3, 5)
    const int64_t want[3][2] = {{0, 2}, {1, 4}, {3, 5}};
    for (int o = 0; o < 3; o++) {
        tg_pool_avg_window(true, 0, 0, 0, true, o, 5, 3, &start, &end, &div);
        EXPECT_EQ(start, want[o][0]);
        EXPECT_EQ(end, want[o][1]);
        EXPECT_EQ(div, end - start);
    }
}

} // namespace
