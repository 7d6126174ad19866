// Transforms against torchvision's numbers from the same seed (fixtures from
// tests/data/gen_transforms.py, bit for bit), and their errors.
#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

class TransformsTest : public TgTest {
  protected:
    void SetUp() override {
        TgTest::SetUp();
        fx_ = load_fixtures("tests/data/fixtures/transforms.txt");
    }
    // Image k of the fixture's [6, 3, 8, 10] uint8 inputs (new reference in the scope).
    tg_tensor *image(int k) {
        const FixtureTensor &all = fixture_tensor(fx_, "images");
        std::vector<uint8_t> bytes;
        for (size_t i = (size_t)k * 240; i < (size_t)(k + 1) * 240; i++) bytes.push_back((uint8_t)all.data[i]);
        return tg_from_data(bytes.data(), TG_SHAPE(3, 8, 10), tg_opts{TG_UINT8, TG_CPU, false});
    }
    // The pipeline over the six images after tg_manual_seed(seed); compares every value
    // with the fixture exactly, and the generator's next number with torch's.
    void check(const std::string &name, uint64_t seed, const tg_compose &c) {
        const FixtureTensor &want = fixture_tensor(fx_, name);
        tg_manual_seed(seed);
        std::vector<double> got;
        for (int k = 0; k < 6; k++) {
            tg_tensor *out = tg_compose_apply(&c, image(k), nullptr);
            ASSERT_NE(out, nullptr) << tg_last_error();
            std::vector<int64_t> d = dims(out);
            EXPECT_EQ(d, std::vector<int64_t>(want.shape.begin() + 1, want.shape.end())) << name;
            std::vector<double> v = values(out);
            got.insert(got.end(), v.begin(), v.end());
        }
        ASSERT_EQ(got.size(), want.data.size()) << name;
        size_t differ = 0;
        for (size_t i = 0; i < got.size(); i++) differ += got[i] != want.data[i];
        EXPECT_EQ(differ, 0u) << name << ": values differ from torchvision's";
        // The next torch.randint(0, 2^31 - 1, (1,)) tells that as many numbers were drawn.
        tg_tensor *next = tg_randint(0, 2147483647, TG_SHAPE(1), tg_opts{TG_INT64, TG_CPU, false});
        EXPECT_EQ(values(next)[0], fixture_tensor(fx_, name + "_next_word").data[0]) << name;
    }
    static tg_compose compose(std::vector<tg_transform> steps) {
        return tg_compose_of((int)steps.size(), steps.data());
    }
    std::map<std::string, FixtureTensor> fx_;
};

const double kMean[3] = {0.4914, 0.4822, 0.4465};
const double kStd[3] = {0.2470, 0.2435, 0.2616};

tg_transform crop(int64_t h, int64_t w, std::vector<int64_t> pad, tg_crop_padding_mode mode) {
    tg_transform t = tg_transform_random_crop(h, 0, mode);
    t.size[1] = w;
    for (int i = 0; i < 4; i++) t.padding[i] = pad[i];
    return t;
}

TEST_F(TransformsTest, CifarAugmentationZeroPaddingMatchesTorchvision) {
    check("cifar_zero", 0,
          compose({crop(8, 10, {2, 2, 2, 2}, TG_CROP_PAD_CONSTANT), tg_transform_random_horizontal_flip(0.5),
                   tg_transform_to_tensor(), tg_transform_normalize(3, kMean, kStd)}));
}

TEST_F(TransformsTest, ReflectPaddingMatchesTorchvision) {
    check("cifar_reflect", 1,
          compose({crop(8, 10, {3, 3, 3, 3}, TG_CROP_PAD_REFLECT), tg_transform_random_horizontal_flip(0.5),
                   tg_transform_to_tensor(), tg_transform_normalize(3, kMean, kStd)}));
}

TEST_F(TransformsTest, EdgePaddingRectangularCropMatchesTorchvision) {
    check("edge_rect", 2,
          compose({crop(5, 7, {1, 2, 3, 4}, TG_CROP_PAD_EDGE), tg_transform_random_horizontal_flip(0.5)}));
}

TEST_F(TransformsTest, SymmetricPaddingAndFlipProbabilityMatchTorchvision) {
    check("symmetric", 3,
          compose({crop(9, 9, {2, 1, 0, 3}, TG_CROP_PAD_SYMMETRIC), tg_transform_random_horizontal_flip(0.3)}));
}

// A crop of the image's own size draws nothing (get_params returns early); the flips
// then take the first numbers.
TEST_F(TransformsTest, CropOfSameSizeDrawsNothing) {
    check("no_draw_crop", 4,
          compose({crop(8, 10, {0, 0, 0, 0}, TG_CROP_PAD_CONSTANT), tg_transform_random_horizontal_flip(0.5)}));
}

TEST_F(TransformsTest, ToTensorIsTorchDivisionForEveryByte) {
    std::vector<uint8_t> bytes(256);
    for (int i = 0; i < 256; i++) bytes[i] = (uint8_t)i;
    tg_tensor *img = tg_from_data(bytes.data(), TG_SHAPE(1, 16, 16), tg_opts{TG_UINT8, TG_CPU, false});
    tg_transform t = tg_transform_to_tensor();
    tg_tensor *out = tg_transform_apply(&t, img, nullptr);
    ASSERT_NE(out, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(out), TG_FLOAT32);
    EXPECT_EQ(values(out), fixture_tensor(fx_, "to_tensor_all_bytes").data);
}

// A private generator: the same numbers as the default one seeded alike, which stays untouched.
TEST_F(TransformsTest, OwnGeneratorGivesTheSameNumbers) {
    tg_compose c = compose({crop(8, 10, {2, 2, 2, 2}, TG_CROP_PAD_CONSTANT), tg_transform_random_horizontal_flip(0.5)});
    tg_mt19937 g;
    tg_mt19937_seed(&g, 9);
    tg_manual_seed(9);
    for (int k = 0; k < 6; k++) {
        std::vector<double> a = values(tg_compose_apply(&c, image(k), &g));
        std::vector<double> b = values(tg_compose_apply(&c, image(k), nullptr));
        EXPECT_EQ(a, b) << k;
    }
}

TEST_F(TransformsTest, ErrorsNameTheTransformAndShapes) {
    tg_transform big = tg_transform_random_crop(12, 1, TG_CROP_PAD_CONSTANT);
    EXPECT_EQ(tg_transform_apply(&big, image(0), nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("random crop): required crop size (12, 12) is larger than the input image size (10, 12)");
    tg_transform reflect = tg_transform_random_crop(8, 8, TG_CROP_PAD_REFLECT);
    EXPECT_EQ(tg_transform_apply(&reflect, image(0), nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("reflect padding (8, 8, 8, 8) is too wide for a 8 x 10 image");
    tg_transform norm = tg_transform_normalize(3, kMean, kStd);
    EXPECT_EQ(tg_transform_apply(&norm, image(0), nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("normalize): expected a float32 or float64 image, got uint8");
    tg_transform two = tg_transform_normalize(2, kMean, kStd), tt = tg_transform_to_tensor();
    EXPECT_EQ(tg_transform_apply(&two, tg_transform_apply(&tt, image(0), nullptr), nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("2 mean/std values for an image of 3 channels");
    tg_transform flip = tg_transform_random_horizontal_flip(1.5);
    EXPECT_EQ(tg_transform_apply(&flip, image(0), nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("p 1.5 is not a probability");
    std::vector<tg_transform> many(TG_COMPOSE_MAX + 1, tg_transform_to_tensor());
    tg_compose c = tg_compose_of((int)many.size(), many.data());
    EXPECT_EQ(tg_compose_apply(&c, image(0), nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("0 to 8 steps");
}

TEST_F(TransformsTest, EmptyCompositionReturnsTheImage) {
    tg_compose c = tg_compose_of(0, nullptr);
    tg_tensor *img = image(1);
    tg_tensor *out = tg_compose_apply(&c, img, nullptr);
    EXPECT_EQ(out, img);
}

} // namespace
