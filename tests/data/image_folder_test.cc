// PNG/JPEG decoding against PIL's convert("RGB") (fixtures from tests/data/gen_images.py),
// the image folder's class and file order (torchvision's ImageFolder), and errors that
// name the file.
#include <png.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

const char *kImages = "tests/data/fixtures/images/";
const char *kNames[] = {"bilevel.png", "gray.jpg", "gray.png",  "gray_alpha.png", "palette_trns.png",
                        "rgb.jpg",     "rgb.png",  "rgb16.png", "rgba.png"};

std::vector<uint8_t> read_bytes(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

class ImageFolderTest : public TgTempDirTest {
  protected:
    void SetUp() override {
        TgTempDirTest::SetUp();
        fx_ = load_fixtures("tests/data/fixtures/images.txt");
    }
    void mkdirs(const std::string &rel) {
        std::string path = dir_;
        size_t start = 0;
        while (start < rel.size()) {
            size_t slash = rel.find('/', start);
            if (slash == std::string::npos) slash = rel.size();
            path += "/" + rel.substr(start, slash - start);
            mkdir(path.c_str(), 0755);
            start = slash + 1;
        }
    }
    void put(const std::string &rel, const std::vector<uint8_t> &bytes) {
        FILE *f = fopen((dir_ + "/" + rel).c_str(), "wb");
        ASSERT_NE(f, nullptr) << rel;
        fwrite(bytes.data(), 1, bytes.size(), f);
        fclose(f);
    }
    std::map<std::string, FixtureTensor> fx_;
};

TEST_F(ImageFolderTest, DecodesEveryColorTypeAsPil) {
    for (const char *name : kNames) {
        tg_tensor *img = tg_image_load((std::string(kImages) + name).c_str());
        ASSERT_NE(img, nullptr) << name << ": " << tg_last_error();
        EXPECT_EQ(dims(img), (std::vector<int64_t>{3, 5, 7})) << name;
        EXPECT_EQ(tg_dtype_of(img), TG_UINT8);
        EXPECT_EQ(values(img), fixture_tensor(fx_, name).data) << name << " differs from PIL's convert(\"RGB\")";
    }
}

// An Adam7-interlaced RGB PNG written here with libpng decodes to the pixels written
// (PIL cannot write interlaced PNGs; PNG is lossless, so the values are known).
TEST_F(ImageFolderTest, InterlacedPngDecodesToItsPixels) {
    const int h = 9, w = 11;
    std::vector<uint8_t> hwc(h * w * 3);
    for (size_t i = 0; i < hwc.size(); i++) hwc[i] = (uint8_t)(i * 29 + 3);
    std::string path = dir_ + "/adam7.png";
    FILE *f = fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png_create_info_struct(png);
    png_init_io(png, f);
    png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_ADAM7, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    std::vector<png_bytep> rows(h);
    for (int y = 0; y < h; y++) rows[y] = hwc.data() + y * w * 3;
    png_set_rows(png, info, rows.data());
    png_write_png(png, info, PNG_TRANSFORM_IDENTITY, nullptr);
    png_destroy_write_struct(&png, &info);
    fclose(f);
    tg_tensor *img = tg_image_load(path.c_str());
    ASSERT_NE(img, nullptr) << tg_last_error();
    std::vector<double> chw = values(img), want;
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < h * w; i++) want.push_back(hwc[i * 3 + c]);
    EXPECT_EQ(chw, want);
}

TEST_F(ImageFolderTest, TruncatedAndCorruptFilesNameFileAndOffset) {
    std::vector<uint8_t> png = read_bytes(std::string(kImages) + "rgb.png");
    std::vector<uint8_t> cut(png.begin(), png.begin() + 60);
    EXPECT_EQ(tg_image_decode(cut.data(), cut.size(), "cut.png"), nullptr);
    EXPECT_ERROR_CONTAINS("cut.png: corrupt PNG at byte offset");
    EXPECT_ERROR_CONTAINS("truncated");
    std::vector<uint8_t> bad = png;
    bad[40] ^= 0xff; // inside the first IDAT chunk: its CRC no longer matches
    EXPECT_EQ(tg_image_decode(bad.data(), bad.size(), "crc.png"), nullptr);
    EXPECT_ERROR_CONTAINS("crc.png: corrupt PNG at byte offset");
    std::vector<uint8_t> jpg = read_bytes(std::string(kImages) + "rgb.jpg");
    std::vector<uint8_t> jcut(jpg.begin(), jpg.begin() + jpg.size() / 2);
    EXPECT_EQ(tg_image_decode(jcut.data(), jcut.size(), "cut.jpg"), nullptr);
    EXPECT_ERROR_CONTAINS("cut.jpg: corrupt JPEG at byte offset");
    EXPECT_ERROR_CONTAINS("Premature end of JPEG file");
    const char text[] = "hello";
    EXPECT_EQ(tg_image_decode(text, 5, "a.txt"), nullptr);
    EXPECT_ERROR_CONTAINS("a.txt: not a PNG or JPEG file (it starts with 68 65 6c 6c");
    EXPECT_EQ(tg_image_load((dir_ + "/none.png").c_str()), nullptr);
    EXPECT_ERROR_CONTAINS("cannot open " + dir_ + "/none.png");
}

// Classes sorted by name, folders below a class walked in sorted path order, files
// sorted, extensions in any case, other files skipped.
TEST_F(ImageFolderTest, OrderIsImageFolders) {
    std::vector<uint8_t> png = read_bytes(std::string(kImages) + "rgb.png");
    std::vector<uint8_t> jpg = read_bytes(std::string(kImages) + "gray.jpg");
    mkdirs("zebra/sub");
    mkdirs("Apple");
    mkdirs("cat");
    put("zebra/b.png", png);
    put("zebra/a.JPEG", jpg);
    put("zebra/sub/0.png", png);
    put("zebra/notes.txt", {1, 2, 3});
    put("Apple/x.jpg", jpg);
    put("cat/2.png", png);
    put("cat/10.png", png);
    tg_image_folder *f = tg_image_folder_new(dir_.c_str());
    ASSERT_NE(f, nullptr) << tg_last_error();
    ASSERT_EQ(tg_image_folder_num_classes(f), 3);
    EXPECT_STREQ(tg_image_folder_class_name(f, 0), "Apple"); // uppercase sorts first, as Python's sorted
    EXPECT_STREQ(tg_image_folder_class_name(f, 1), "cat");
    EXPECT_STREQ(tg_image_folder_class_name(f, 2), "zebra");
    std::vector<std::string> want = {"Apple/x.jpg",  "cat/10.png",  "cat/2.png",
                                     "zebra/a.JPEG", "zebra/b.png", "zebra/sub/0.png"};
    std::vector<int64_t> labels = {0, 1, 1, 2, 2, 2};
    ASSERT_EQ(tg_image_folder_size(f), 6);
    for (int64_t i = 0; i < 6; i++) {
        EXPECT_EQ(std::string(tg_image_folder_path(f, i)), dir_ + "/" + want[i]);
        EXPECT_EQ(tg_image_folder_label(f, i), labels[i]);
    }
    tg_tensor *img, *label;
    ASSERT_EQ(tg_image_folder_get(f, 3, &img, &label), TG_OK) << tg_last_error();
    EXPECT_EQ(values(img), fixture_tensor(fx_, "gray.jpg").data);
    EXPECT_EQ(tg_ndim(label), 0);
    EXPECT_EQ(values(label)[0], 2);
    EXPECT_EQ(tg_image_folder_get(f, 6, &img, &label), TG_ERROR);
    EXPECT_ERROR_CONTAINS("index 6 is out of range for 6 samples");
    tg_image_folder_free(f);
}

TEST_F(ImageFolderTest, BadFolderAndBadFileErrors) {
    EXPECT_EQ(tg_image_folder_new(dir_.c_str()), nullptr);
    EXPECT_ERROR_CONTAINS("no class folder in " + dir_);
    mkdirs("empty");
    EXPECT_EQ(tg_image_folder_new(dir_.c_str()), nullptr);
    EXPECT_ERROR_CONTAINS("class folder " + dir_ + "/empty has no image file");
    put("empty/broken.png", {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0});
    tg_image_folder *f = tg_image_folder_new(dir_.c_str());
    ASSERT_NE(f, nullptr) << tg_last_error();
    tg_tensor *img, *label;
    EXPECT_EQ(tg_image_folder_get(f, 0, &img, &label), TG_ERROR);
    EXPECT_ERROR_CONTAINS(dir_ + "/empty/broken.png: corrupt PNG at byte offset 8");
    EXPECT_EQ(img, nullptr);
    tg_image_folder_free(f);
}

// The folder through the loader: uint8 images of different sizes become one float batch
// after a crop; labels stack to [B].
TEST_F(ImageFolderTest, LoaderWithTransformMakesFloatBatches) {
    mkdirs("a");
    mkdirs("b");
    put("a/1.png", read_bytes(std::string(kImages) + "rgb.png"));
    put("b/1.jpg", read_bytes(std::string(kImages) + "rgb.jpg"));
    put("b/2.png", read_bytes(std::string(kImages) + "gray.png"));
    tg_image_folder *f = tg_image_folder_new(dir_.c_str());
    ASSERT_NE(f, nullptr) << tg_last_error();
    tg_transform steps[] = {tg_transform_random_crop(4, 0, TG_CROP_PAD_CONSTANT), tg_transform_to_tensor()};
    tg_loader_opts opts = {};
    opts.batch_size = 3;
    opts.transform = tg_compose_of(2, steps);
    for (int workers : {0, 2}) {
        opts.num_workers = workers;
        tg_loader *ld = tg_loader_new_dataset(tg_image_folder_dataset(f), opts);
        ASSERT_NE(ld, nullptr) << tg_last_error();
        tg_tensor *bx, *by;
        ASSERT_TRUE(tg_loader_next(ld, &bx, &by)) << tg_last_error();
        EXPECT_EQ(dims(bx), (std::vector<int64_t>{3, 3, 4, 4}));
        EXPECT_EQ(tg_dtype_of(bx), TG_FLOAT32);
        EXPECT_EQ(values(by), (std::vector<double>{0, 1, 1}));
        for (double v : values(bx)) EXPECT_TRUE(v >= 0 && v <= 1);
        EXPECT_FALSE(tg_loader_next(ld, &bx, &by));
        tg_loader_free(ld);
    }
    tg_image_folder_free(f);
}

} // namespace
