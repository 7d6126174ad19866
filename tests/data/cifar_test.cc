// CIFAR-10/100 binary readers on files generated here: values, labels, the train
// split's five files in order, errors naming the file and byte offset.
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

class CifarTest : public TgTempDirTest {
  protected:
    // `count` records; record i's pixel p is (seed + 7 i + p) mod 256, its label(s)
    // label_of(i) (CIFAR-100: coarse then fine).
    static std::vector<uint8_t> records(int count, int label_bytes, int seed) {
        std::vector<uint8_t> out;
        for (int i = 0; i < count; i++) {
            if (label_bytes == 2) out.push_back((uint8_t)(i % 20));
            out.push_back((uint8_t)(label_bytes == 2 ? (i * 3) % 100 : (i + seed) % 10));
            for (int p = 0; p < 3072; p++) out.push_back((uint8_t)(seed + 7 * i + p));
        }
        return out;
    }
    void write(const std::string &name, const std::vector<uint8_t> &bytes) {
        FILE *f = fopen((dir_ + "/" + name).c_str(), "wb");
        ASSERT_NE(f, nullptr);
        if (!bytes.empty()) {
            ASSERT_EQ(fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
        }
        fclose(f);
    }
};

TEST_F(CifarTest, Cifar10TrainIsFiveBatchesInOrder) {
    for (int b = 1; b <= 5; b++) write("data_batch_" + std::to_string(b) + ".bin", records(2 + b % 2, 1, 10 * b));
    tg_cifar c = tg_cifar_load(dir_.c_str(), TG_CIFAR10, TG_CIFAR_TRAIN);
    ASSERT_NE(c.images, nullptr) << tg_last_error();
    // batches of 3, 2, 3, 2, 3 records
    EXPECT_EQ(dims(c.images), (std::vector<int64_t>{13, 3, 32, 32}));
    EXPECT_EQ(tg_dtype_of(c.images), TG_UINT8);
    EXPECT_EQ(tg_dtype_of(c.labels), TG_INT64);
    std::vector<double> labels = values(c.labels);
    ASSERT_EQ(labels.size(), 13u);
    EXPECT_EQ(labels[0], 0); // batch 1 record 0: (0 + 10) % 10
    EXPECT_EQ(labels[1], 1);
    EXPECT_EQ(labels[3], 0);  // batch 2 record 0: (0 + 20) % 10
    EXPECT_EQ(labels[12], 2); // batch 5 record 2: (2 + 50) % 10
    const uint8_t *px = (const uint8_t *)tg_data_ptr(c.images);
    // image 4 is batch 2's record 1: pixel p = 20 + 7 + p; channel 1 (green) starts at 1024.
    EXPECT_EQ(px[4 * 3072 + 0], 27);
    EXPECT_EQ(px[4 * 3072 + 1024 + 5], (uint8_t)(27 + 1029));
    EXPECT_EQ(px[12 * 3072 + 3071], (uint8_t)(50 + 14 + 3071));
}

TEST_F(CifarTest, Cifar10TestSplitAndArchiveFolder) {
    ASSERT_EQ(mkdir((dir_ + "/cifar-10-batches-bin").c_str(), 0755), 0);
    write("cifar-10-batches-bin/test_batch.bin", records(4, 1, 3));
    tg_cifar c = tg_cifar_load(dir_.c_str(), TG_CIFAR10, TG_CIFAR_TEST);
    ASSERT_NE(c.images, nullptr) << tg_last_error();
    EXPECT_EQ(values(c.labels), (std::vector<double>{3, 4, 5, 6}));
    EXPECT_EQ(((const uint8_t *)tg_data_ptr(c.images))[3 * 3072 + 2048], (uint8_t)(3 + 21 + 2048));
}

TEST_F(CifarTest, Cifar100FineAndCoarse) {
    write("train.bin", records(25, 2, 1));
    tg_cifar fine = tg_cifar_load(dir_.c_str(), TG_CIFAR100, TG_CIFAR_TRAIN);
    ASSERT_NE(fine.images, nullptr) << tg_last_error();
    tg_cifar coarse = tg_cifar_load(dir_.c_str(), TG_CIFAR100_COARSE, TG_CIFAR_TRAIN);
    ASSERT_NE(coarse.images, nullptr) << tg_last_error();
    EXPECT_EQ(dims(fine.images), (std::vector<int64_t>{25, 3, 32, 32}));
    std::vector<double> f = values(fine.labels), c = values(coarse.labels);
    EXPECT_EQ(f[24], 72); // (24 * 3) % 100
    EXPECT_EQ(c[24], 4);  // 24 % 20
    EXPECT_EQ(f[7], 21);
    EXPECT_EQ(c[7], 7);
    EXPECT_EQ(((const uint8_t *)tg_data_ptr(fine.images))[24 * 3072], (uint8_t)(1 + 168));
    EXPECT_EQ(values(fine.images), values(coarse.images));
}

TEST_F(CifarTest, TruncatedFileNamesFileAndOffset) {
    std::vector<uint8_t> bytes = records(3, 1, 0);
    bytes.resize(bytes.size() - 100);
    write("test_batch.bin", bytes);
    tg_cifar c = tg_cifar_load(dir_.c_str(), TG_CIFAR10, TG_CIFAR_TEST);
    EXPECT_EQ(c.images, nullptr);
    EXPECT_EQ(c.labels, nullptr);
    EXPECT_ERROR_CONTAINS(dir_ + "/test_batch.bin");
    EXPECT_ERROR_CONTAINS("truncated record at byte offset 6146"); // 2 whole 3073-byte records
}

TEST_F(CifarTest, LabelOutOfRangeNamesOffset) {
    std::vector<uint8_t> bytes = records(3, 1, 0);
    bytes[2 * 3073] = 10;
    write("test_batch.bin", bytes);
    EXPECT_EQ(tg_cifar_load(dir_.c_str(), TG_CIFAR10, TG_CIFAR_TEST).images, nullptr);
    EXPECT_ERROR_CONTAINS("test_batch.bin: label 10 at byte offset 6146 (record 2) is out of range 0..9");
    bytes = records(2, 2, 0);
    bytes[3074 + 1] = 100; // record 1's fine label
    EXPECT_EQ(tg_cifar_parse(bytes.data(), bytes.size(), TG_CIFAR100, "x.bin").images, nullptr);
    EXPECT_ERROR_CONTAINS("x.bin: fine label 100 at byte offset 3075 (record 1)");
    // The coarse reader does not look at the fine label.
    tg_cifar c = tg_cifar_parse(bytes.data(), bytes.size(), TG_CIFAR100_COARSE, "x.bin");
    ASSERT_NE(c.labels, nullptr) << tg_last_error();
    EXPECT_EQ(values(c.labels), (std::vector<double>{0, 1}));
}

TEST_F(CifarTest, MissingAndEmptyFiles) {
    EXPECT_EQ(tg_cifar_load(dir_.c_str(), TG_CIFAR10, TG_CIFAR_TRAIN).images, nullptr);
    EXPECT_ERROR_CONTAINS("missing file " + dir_ + "/data_batch_1.bin");
    write("data_batch_1.bin", records(1, 1, 0));
    EXPECT_EQ(tg_cifar_load(dir_.c_str(), TG_CIFAR10, TG_CIFAR_TRAIN).images, nullptr);
    EXPECT_ERROR_CONTAINS("cannot open " + dir_ + "/data_batch_2.bin");
    write("test.bin", {});
    EXPECT_EQ(tg_cifar_load(dir_.c_str(), TG_CIFAR100, TG_CIFAR_TEST).images, nullptr);
    EXPECT_ERROR_CONTAINS("test.bin: the file is empty");
    EXPECT_EQ(tg_cifar_parse(nullptr, 0, (tg_cifar_kind)7, nullptr).images, nullptr);
    EXPECT_ERROR_CONTAINS("unknown kind 7");
}

// A CIFAR-100 file read as CIFAR-10 is caught by its length (3074 does not divide).
TEST_F(CifarTest, WrongKindIsAnError) {
    std::vector<uint8_t> bytes = records(2, 2, 0);
    EXPECT_EQ(tg_cifar_parse(bytes.data(), bytes.size(), TG_CIFAR10, "c100.bin").images, nullptr);
    EXPECT_ERROR_CONTAINS("c100.bin: truncated record at byte offset 6146");
}

} // namespace
