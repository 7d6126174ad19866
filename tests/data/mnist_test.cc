// IDX reading and MNIST loading: small files made here (plain and gzipped), every
// malformed case with its message, and the real Fashion-MNIST when installed.
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using Bytes = std::vector<uint8_t>;

void put_be32(Bytes &b, uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back((uint8_t)(v >> s));
}

// An IDX image: magic 00 00 <type> <ndim>, big-endian sizes, then `payload`.
Bytes idx_bytes(uint8_t type, std::vector<uint32_t> dims, const Bytes &payload) {
    Bytes b = {0, 0, type, (uint8_t)dims.size()};
    for (uint32_t d : dims) put_be32(b, d);
    b.insert(b.end(), payload.begin(), payload.end());
    return b;
}

Bytes iota_bytes(size_t n, int mult = 7) {
    Bytes b(n);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(i * mult);
    return b;
}

class MnistTest : public TgTempDirTest {
  protected:
    std::string path(const std::string &name) const { return dir_ + "/" + name; }
    void write_plain(const std::string &name, const Bytes &b) const {
        std::ofstream f(path(name), std::ios::binary);
        f.write((const char *)b.data(), (std::streamsize)b.size());
    }
    void write_gz(const std::string &name, const Bytes &b) const {
        gzFile f = gzopen(path(name).c_str(), "wb");
        ASSERT_NE(f, nullptr);
        if (!b.empty()) {
            ASSERT_EQ(gzwrite(f, b.data(), (unsigned)b.size()), (int)b.size());
        }
        gzclose(f);
    }
    Bytes read_file(const std::string &name) const {
        std::ifstream f(path(name), std::ios::binary);
        return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    }
    // A consistent small data set: n images of h x w and n labels.
    void write_set(const std::string &prefix, uint32_t n, uint32_t h, uint32_t w, bool gz) {
        Bytes images = idx_bytes(0x08, {n, h, w}, iota_bytes((size_t)n * h * w));
        Bytes labels = idx_bytes(0x08, {n}, iota_bytes(n, 3));
        std::string ext = gz ? ".gz" : "";
        if (gz) {
            write_gz(prefix + "-images-idx3-ubyte" + ext, images);
            write_gz(prefix + "-labels-idx1-ubyte" + ext, labels);
        } else {
            write_plain(prefix + "-images-idx3-ubyte", images);
            write_plain(prefix + "-labels-idx1-ubyte", labels);
        }
    }
};

void expect_small_set(tg_mnist m, uint32_t n, uint32_t h, uint32_t w) {
    ASSERT_NE(m.images, nullptr) << tg_last_error();
    ASSERT_NE(m.labels, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(m.images), TG_UINT8);
    EXPECT_EQ(tg_dtype_of(m.labels), TG_INT64);
    EXPECT_EQ(dims(m.images), (std::vector<int64_t>{n, h, w}));
    EXPECT_EQ(dims(m.labels), (std::vector<int64_t>{n}));
    std::vector<double> px = values(m.images), lb = values(m.labels);
    for (size_t i = 0; i < px.size(); i++) ASSERT_EQ(px[i], (double)(uint8_t)(i * 7)) << i;
    for (size_t i = 0; i < lb.size(); i++) ASSERT_EQ(lb[i], (double)(uint8_t)(i * 3)) << i;
}

TEST_F(MnistTest, LoadsPlainFiles) {
    write_set("train", 5, 4, 3, false);
    expect_small_set(tg_mnist_load(dir_.c_str(), TG_MNIST_TRAIN), 5, 4, 3);
}

TEST_F(MnistTest, LoadsGzippedFiles) {
    write_set("t10k", 7, 28, 28, true);
    expect_small_set(tg_mnist_load(dir_.c_str(), TG_MNIST_TEST), 7, 28, 28);
}

TEST_F(MnistTest, LoadsDottedSpelling) {
    write_plain("train-images.idx3-ubyte", idx_bytes(0x08, {2, 2, 2}, iota_bytes(8)));
    write_plain("train-labels.idx1-ubyte", idx_bytes(0x08, {2}, iota_bytes(2, 3)));
    expect_small_set(tg_mnist_load(dir_.c_str(), TG_MNIST_TRAIN), 2, 2, 2);
}

TEST_F(MnistTest, EmptySetIsValid) {
    write_set("train", 0, 28, 28, true);
    tg_mnist m = tg_mnist_load(dir_.c_str(), TG_MNIST_TRAIN);
    ASSERT_NE(m.images, nullptr) << tg_last_error();
    EXPECT_EQ(dims(m.images), (std::vector<int64_t>{0, 28, 28}));
    EXPECT_EQ(tg_numel(m.labels), 0);
}

TEST_F(MnistTest, MissingFileNamesPathAndDebianPackage) {
    tg_mnist m = tg_mnist_load(dir_.c_str(), TG_MNIST_TRAIN);
    EXPECT_EQ(m.images, nullptr);
    EXPECT_EQ(m.labels, nullptr);
    EXPECT_ERROR_CONTAINS(dir_ + "/train-images-idx3-ubyte");
    EXPECT_ERROR_CONTAINS("dataset-fashion-mnist");
    // Images present, labels missing: the labels path is named.
    write_set("t10k", 3, 2, 2, false);
    unlink(path("t10k-labels-idx1-ubyte").c_str());
    m = tg_mnist_load(dir_.c_str(), TG_MNIST_TEST);
    EXPECT_EQ(m.images, nullptr);
    EXPECT_ERROR_CONTAINS("t10k-labels-idx1-ubyte");
    // tg_idx_load on a missing path.
    EXPECT_EQ(tg_idx_load(path("nope").c_str(), 0), nullptr);
    EXPECT_ERROR_CONTAINS(path("nope"));
    EXPECT_ERROR_CONTAINS("No such file");
}

TEST_F(MnistTest, WrongMagic) {
    Bytes b = idx_bytes(0x08, {2, 2, 2}, iota_bytes(8));
    b[0] = 0x1f;
    write_plain("train-images-idx3-ubyte", b);
    write_plain("train-labels-idx1-ubyte", idx_bytes(0x08, {2}, iota_bytes(2)));
    tg_mnist m = tg_mnist_load(dir_.c_str(), TG_MNIST_TRAIN);
    EXPECT_EQ(m.images, nullptr);
    EXPECT_ERROR_CONTAINS("wrong magic 0x1f000803");
    EXPECT_ERROR_CONTAINS("train-images-idx3-ubyte");

    Bytes c = idx_bytes(0x42, {2}, iota_bytes(2));
    EXPECT_EQ(tg_idx_parse(c.data(), c.size(), 0, "x"), nullptr);
    EXPECT_ERROR_CONTAINS("unknown IDX type code 0x42");
    Bytes d = idx_bytes(0x09, {2}, iota_bytes(2));
    EXPECT_EQ(tg_idx_parse(d.data(), d.size(), 0, "x"), nullptr);
    EXPECT_ERROR_CONTAINS("sbyte (0x09) has no tapegrad dtype");
}

TEST_F(MnistTest, WrongDimensionCount) {
    write_plain("train-images-idx3-ubyte", idx_bytes(0x08, {2, 4}, iota_bytes(8)));
    write_plain("train-labels-idx1-ubyte", idx_bytes(0x08, {2}, iota_bytes(2)));
    EXPECT_EQ(tg_mnist_load(dir_.c_str(), TG_MNIST_TRAIN).images, nullptr);
    EXPECT_ERROR_CONTAINS("wrong dimension count 2, expected 3");

    write_plain("train-images-idx3-ubyte", idx_bytes(0x08, {2, 2, 2}, iota_bytes(8)));
    write_plain("train-labels-idx1-ubyte", idx_bytes(0x08, {2, 1}, iota_bytes(2)));
    EXPECT_EQ(tg_mnist_load(dir_.c_str(), TG_MNIST_TRAIN).labels, nullptr);
    EXPECT_ERROR_CONTAINS("train-labels-idx1-ubyte: wrong dimension count 2, expected 1");

    Bytes zero = {0, 0, 8, 0};
    EXPECT_EQ(tg_idx_parse(zero.data(), zero.size(), 0, "x"), nullptr);
    EXPECT_ERROR_CONTAINS("wrong dimension count 0");
    Bytes nine = idx_bytes(0x08, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {5});
    EXPECT_EQ(tg_idx_parse(nine.data(), nine.size(), 0, "x"), nullptr);
    EXPECT_ERROR_CONTAINS("wrong dimension count 9");
}

TEST_F(MnistTest, TruncatedData) {
    Bytes b = idx_bytes(0x08, {3, 4, 4}, iota_bytes(48));
    b.resize(b.size() - 5);
    write_plain("train-images-idx3-ubyte", b);
    write_plain("train-labels-idx1-ubyte", idx_bytes(0x08, {3}, iota_bytes(3)));
    EXPECT_EQ(tg_mnist_load(dir_.c_str(), TG_MNIST_TRAIN).images, nullptr);
    EXPECT_ERROR_CONTAINS("truncated data: the header says [3, 4, 4] ubyte (48 bytes) but 43 bytes follow");

    // Truncated inside the header.
    Bytes h = idx_bytes(0x08, {3, 4, 4}, {});
    EXPECT_EQ(tg_idx_parse(h.data(), 9, 0, "x"), nullptr);
    EXPECT_ERROR_CONTAINS("truncated IDX header: 9 bytes, 3 dimensions need 16");
    EXPECT_EQ(tg_idx_parse(h.data(), 3, 0, "x"), nullptr);
    EXPECT_ERROR_CONTAINS("truncated IDX header");
    EXPECT_EQ(tg_idx_parse(nullptr, 0, 0, "empty"), nullptr);
    EXPECT_ERROR_CONTAINS("empty: truncated IDX header: 0 bytes");

    // Sizes whose product overflows are an error, not a huge allocation; with a zero
    // size too (no elements, but no tensor can have those sizes: found by fuzzing).
    Bytes huge = idx_bytes(0x0E, {0xffffffffu, 0xffffffffu, 0xffffffffu}, {1, 2, 3});
    EXPECT_EQ(tg_idx_parse(huge.data(), huge.size(), 0, "x"), nullptr);
    EXPECT_ERROR_CONTAINS("sizes [4294967295, 4294967295, 4294967295] are too large");
    Bytes zero_huge = idx_bytes(0x08, {0, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {});
    EXPECT_EQ(tg_idx_parse(zero_huge.data(), zero_huge.size(), 0, "x"), nullptr);
    EXPECT_ERROR_CONTAINS("are too large for a tensor");
    Bytes big = idx_bytes(0x08, {0x10000u, 0x10000u}, {1});
    EXPECT_EQ(tg_idx_parse(big.data(), big.size(), 0, "x"), nullptr);
    EXPECT_ERROR_CONTAINS("truncated data: the header says [65536, 65536] ubyte (4294967296 bytes) but 1 bytes follow");
}

TEST_F(MnistTest, TrailingBytes) {
    Bytes b = idx_bytes(0x08, {2}, iota_bytes(4));
    EXPECT_EQ(tg_idx_parse(b.data(), b.size(), 1, "lbl"), nullptr);
    EXPECT_ERROR_CONTAINS("lbl: 2 trailing bytes after the [2] ubyte data");
}

TEST_F(MnistTest, CountsDiffer) {
    write_plain("train-images-idx3-ubyte", idx_bytes(0x08, {4, 2, 2}, iota_bytes(16)));
    write_gz("train-labels-idx1-ubyte.gz", idx_bytes(0x08, {3}, iota_bytes(3)));
    tg_mnist m = tg_mnist_load(dir_.c_str(), TG_MNIST_TRAIN);
    EXPECT_EQ(m.images, nullptr);
    EXPECT_EQ(m.labels, nullptr);
    EXPECT_ERROR_CONTAINS("image and label counts differ: 4 images in");
    EXPECT_ERROR_CONTAINS("3 labels in " + dir_ + "/train-labels-idx1-ubyte.gz");
}

TEST_F(MnistTest, LabelsMustBeBytes) {
    write_plain("train-images-idx3-ubyte", idx_bytes(0x08, {2, 2, 2}, iota_bytes(8)));
    write_plain("train-labels-idx1-ubyte", idx_bytes(0x0C, {2}, Bytes(8, 0)));
    EXPECT_EQ(tg_mnist_load(dir_.c_str(), TG_MNIST_TRAIN).images, nullptr);
    EXPECT_ERROR_CONTAINS("labels are int32, expected ubyte");
}

TEST_F(MnistTest, GzipStreamEndsEarly) {
    Bytes images = idx_bytes(0x08, {20, 28, 28}, iota_bytes(20 * 28 * 28, 13));
    write_gz("full.gz", images);
    Bytes gz = read_file("full.gz");
    ASSERT_GT(gz.size(), 40u);
    for (size_t keep : {gz.size() / 2, gz.size() - 4}) { // mid-stream; inside the trailer
        Bytes cut(gz.begin(), gz.begin() + (long)keep);
        write_plain("train-images-idx3-ubyte.gz", cut);
        write_gz("train-labels-idx1-ubyte.gz", idx_bytes(0x08, {20}, iota_bytes(20)));
        EXPECT_EQ(tg_mnist_load(dir_.c_str(), TG_MNIST_TRAIN).images, nullptr) << keep;
        EXPECT_ERROR_CONTAINS("train-images-idx3-ubyte.gz: gzip stream ends early");
    }
    // A damaged byte in the middle: corrupt data, not a silently wrong array.
    Bytes bad = gz;
    bad[gz.size() / 2] ^= 0x55;
    bad[gz.size() / 2 + 1] ^= 0xAA;
    write_plain("bad.gz", bad);
    EXPECT_EQ(tg_idx_load(path("bad.gz").c_str(), 3), nullptr);
    EXPECT_ERROR_CONTAINS("bad.gz:");
}

TEST_F(MnistTest, ParsesWiderTypesBigEndian) {
    Bytes i32;
    for (uint32_t v : {1u, 0xfffffffeu, 0x01020304u}) put_be32(i32, v);
    Bytes b = idx_bytes(0x0C, {3}, i32);
    tg_tensor *t = tg_idx_parse(b.data(), b.size(), 1, nullptr);
    ASSERT_NE(t, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(t), TG_INT32);
    EXPECT_TRUE(tensor_near(t, {1, -2, 0x01020304}, 0));

    Bytes f32;
    for (float v : {1.5f, -2.25f}) {
        uint32_t u;
        memcpy(&u, &v, 4);
        put_be32(f32, u);
    }
    b = idx_bytes(0x0D, {1, 2}, f32);
    t = tg_idx_parse(b.data(), b.size(), 2, nullptr);
    ASSERT_NE(t, nullptr) << tg_last_error();
    EXPECT_EQ(dims(t), (std::vector<int64_t>{1, 2}));
    EXPECT_TRUE(tensor_near(t, {1.5, -2.25}, 0));

    Bytes f64;
    double d = 3.125;
    uint64_t u;
    memcpy(&u, &d, 8);
    put_be32(f64, (uint32_t)(u >> 32));
    put_be32(f64, (uint32_t)u);
    b = idx_bytes(0x0E, {1}, f64);
    t = tg_idx_parse(b.data(), b.size(), 0, nullptr);
    ASSERT_NE(t, nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(t, {3.125}, 0));
}

TEST_F(MnistTest, ToFloatNormalizeAndStats) {
    uint8_t px[4] = {0, 51, 255, 102};
    tg_tensor *img = tg_from_data(px, TG_SHAPE(1, 2, 2), tg_opts{TG_UINT8, TG_CPU, false});
    tg_tensor *x = tg_mnist_to_float(img);
    ASSERT_NE(x, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(x), TG_FLOAT32);
    EXPECT_EQ(dims(x), (std::vector<int64_t>{1, 2, 2}));
    EXPECT_TRUE(tensor_near(x, {0, 0.2, 1, 0.4}, 1e-7));

    double mean = 0, std = 0;
    ASSERT_EQ(tg_mnist_mean_std(x, &mean, &std), TG_OK);
    EXPECT_NEAR(mean, 0.4, 1e-7);
    EXPECT_NEAR(std, std::sqrt((0.16 + 0.04 + 0.36 + 0.0) / 4), 1e-7);

    tg_tensor *z = tg_mnist_normalize(x, mean, std);
    ASSERT_NE(z, nullptr) << tg_last_error();
    double zm = 1, zs = 0;
    ASSERT_EQ(tg_mnist_mean_std(z, &zm, &zs), TG_OK);
    EXPECT_NEAR(zm, 0, 1e-6);
    EXPECT_NEAR(zs, 1, 1e-6);
    EXPECT_TRUE(tensor_near(tg_mnist_normalize(img, 0.5 * 255, 255), {-0.5, -0.3, 0.5, -0.1}, 1e-6));

    // float64 stays float64; a strided view reads in logical order.
    tg_tensor *d = tensor_f64({1, 2, 3, 4}, TG_SHAPE(2, 2));
    int64_t st[2] = {1, 2};
    tg_tensor *dt = tg_as_strided(d, TG_SHAPE(2, 2), st, 0); // transpose
    tg_tensor *dn = tg_mnist_normalize(dt, 1, 2);
    EXPECT_EQ(tg_dtype_of(dn), TG_FLOAT64);
    EXPECT_TRUE(tensor_near(dn, {0, 1, 0.5, 1.5}, 0));

    EXPECT_EQ(tg_mnist_normalize(x, 0, 0), nullptr);
    EXPECT_ERROR_CONTAINS("positive std");
    EXPECT_EQ(tg_mnist_to_float(nullptr), nullptr);
    tg_tensor *empty = tg_empty(TG_SHAPE(0), tg_opts{});
    EXPECT_EQ(tg_mnist_mean_std(empty, &mean, &std), TG_ERROR);
    EXPECT_ERROR_CONTAINS("no elements");
}

// The real data set, as Debian's dataset-fashion-mnist installs it.
TEST_F(MnistTest, FashionMnistFromDebian) {
    if (access(TG_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0 &&
        access(TG_FASHION_MNIST_DIR "/train-images-idx3-ubyte", R_OK) != 0)
        GTEST_SKIP() << "Fashion-MNIST is not installed (apt install dataset-fashion-mnist)";
    struct {
        tg_mnist_split split;
        int64_t n;
    } cases[] = {{TG_MNIST_TRAIN, 60000}, {TG_MNIST_TEST, 10000}};
    for (auto c : cases) {
        tg_scope_begin();
        tg_mnist m = tg_mnist_load(TG_FASHION_MNIST_DIR, c.split);
        ASSERT_NE(m.images, nullptr) << tg_last_error();
        EXPECT_EQ(dims(m.images), (std::vector<int64_t>{c.n, 28, 28}));
        EXPECT_EQ(dims(m.labels), (std::vector<int64_t>{c.n}));
        const int64_t *lab = (const int64_t *)tg_data_ptr(m.labels);
        std::vector<int64_t> hist(10, 0);
        for (int64_t i = 0; i < c.n; i++) {
            ASSERT_GE(lab[i], 0);
            ASSERT_LT(lab[i], 10);
            hist[(size_t)lab[i]]++;
        }
        EXPECT_EQ(hist, std::vector<int64_t>(10, c.n / 10));
        if (c.split == TG_MNIST_TRAIN) {
            double mean = 0, std = 0;
            ASSERT_EQ(tg_mnist_mean_std(tg_mnist_to_float(m.images), &mean, &std), TG_OK);
            EXPECT_NEAR(mean, TG_FASHION_MNIST_MEAN, 5e-4);
            EXPECT_NEAR(std, TG_FASHION_MNIST_STD, 5e-4);
        }
        tg_scope_end();
    }
}

} // namespace
