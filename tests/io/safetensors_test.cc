// safetensors: a file written by PyTorch (tests/fixtures/gen_safetensors.py) loads
// with identical values; tapegrad's output is byte-identical to a golden file that
// script verified; round trips; the tensor map API; every malformed-header case.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <cjson/cJSON.h>

#include "io/crc32c.h"
#include "test_util.h"

namespace {

using Bytes = std::vector<uint8_t>;

Bytes read_bytes(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A safetensors image from a header string and a data buffer.
Bytes st_bytes(const std::string &header, const Bytes &data = {}) {
    Bytes b(8);
    uint64_t n = header.size();
    for (int i = 0; i < 8; i++) b[(size_t)i] = (uint8_t)(n >> (8 * i));
    b.insert(b.end(), header.begin(), header.end());
    b.insert(b.end(), data.begin(), data.end());
    return b;
}

class SafetensorsTest : public TgTempDirTest {
  protected:
    // Parses bytes expecting failure with a message containing `part`.
    void expect_parse_error(const Bytes &b, const std::string &part) {
        tg_clear_error();
        tg_tensor_map *m = tg_safetensors_parse(b.data(), b.size(), "bad.st");
        EXPECT_EQ(m, nullptr);
        EXPECT_ERROR_CONTAINS(part);
        tg_tensor_map_free(m);
    }
};

const char *dtype_name_of(tg_tensor *t) { return tg_dtype_name(tg_dtype_of(t)); }

TEST_F(SafetensorsTest, LoadsFileWrittenByPyTorch) {
    auto expected = load_fixtures("tests/fixtures/from_torch.txt");
    ASSERT_EQ(expected.size(), 8u);
    tg_tensor_map *m = tg_safetensors_load("tests/fixtures/from_torch.safetensors");
    ASSERT_NE(m, nullptr) << tg_last_error();
    EXPECT_EQ(tg_tensor_map_size(m), 8);
    for (auto &[name, fx] : expected) {
        tg_tensor *t = tg_tensor_map_get(m, name.c_str());
        ASSERT_NE(t, nullptr) << name;
        EXPECT_STREQ(dtype_name_of(t), fx.dtype.c_str()) << name;
        EXPECT_EQ(dims(t), fx.shape) << name;
        EXPECT_TRUE(tensor_near(t, fx.data, 0)) << name; // bit-exact
        EXPECT_EQ(tg_device_of(t).kind, TG_DEVICE_CPU);
    }
    EXPECT_STREQ(tg_tensor_map_metadata(m, "source"), "gen_safetensors.py");
    EXPECT_STREQ(tg_tensor_map_metadata(m, "torch"), "1.13.0");
    EXPECT_EQ(tg_tensor_map_metadata(m, "missing"), nullptr);
    tg_tensor_map_free(m);
}

// The map tests/fixtures/gen_safetensors.py's golden() describes, in the same order.
tg_tensor_map *golden_map() {
    tg_tensor_map *m = tg_tensor_map_new();
    std::vector<float> w;
    for (int i = 0; i < 6; i++) w.push_back(i * 0.25f - 0.5f);
    tg_tensor_map_set(m, "weight", tensor_f32(w, TG_SHAPE(2, 3)));
    tg_tensor_map_set(m, "bias", tensor_f64({1.5, -2.0, 1e-300}, TG_SHAPE(3)));
    int64_t step = 12345678901234;
    tg_tensor_map_set(m, "step", tg_from_data(&step, TG_SCALAR_SHAPE, tg_opts{TG_INT64, TG_CPU, false}));
    bool mask[4] = {true, false, true, true};
    tg_tensor_map_set(m, "mask", tg_from_data(mask, TG_SHAPE(4), tg_opts{TG_BOOL, TG_CPU, false}));
    uint8_t px[4] = {0, 127, 128, 255};
    tg_tensor_map_set(m, "pixels", tg_from_data(px, TG_SHAPE(2, 2), tg_opts{TG_UINT8, TG_CPU, false}));
    int32_t idx[2] = {-7, 2147483647};
    tg_tensor_map_set(m, "idx", tg_from_data(idx, TG_SHAPE(2), tg_opts{TG_INT32, TG_CPU, false}));
    tg_tensor_map_set(m, "empty", tg_empty(TG_SHAPE(0, 2), tg_opts{}));
    tg_tensor_map_set_metadata(m, "format", "pt");
    tg_tensor_map_set_metadata(m, "epoch", "3");
    tg_tensor_map_set_metadata(m, "note", "quote \" backslash \\ tab \t \xc3\xa9");
    return m;
}

TEST_F(SafetensorsTest, GoldenBytes) {
    std::unique_ptr<tg_tensor_map, void (*)(tg_tensor_map *)> owner(golden_map(), tg_tensor_map_free);
    tg_tensor_map *m = owner.get();
    uint8_t *data = nullptr;
    size_t n = 0;
    ASSERT_EQ(tg_safetensors_serialize(m, &data, &n), TG_OK) << tg_last_error();
    Bytes mine(data, data + n);
    free(data);
    // Regenerate: TG_GOLDEN_OUT=tests/fixtures/tapegrad_golden.safetensors, then
    // /usr/bin/python3 tests/fixtures/gen_safetensors.py --verify <that file>.
    if (const char *out = getenv("TG_GOLDEN_OUT")) {
        EXPECT_EQ(tg_safetensors_save(m, out), TG_OK) << tg_last_error();
        EXPECT_EQ(read_bytes(out), mine);
    }
    Bytes golden = read_bytes("tests/fixtures/tapegrad_golden.safetensors");
    ASSERT_FALSE(golden.empty()) << "tests/fixtures/tapegrad_golden.safetensors is missing";
    EXPECT_EQ(mine, golden);
    EXPECT_EQ((8 + (size_t)mine[0]) % 8, 0u) << "header padded to 8 bytes";
    // And it reads back.
    tg_tensor_map *back = tg_safetensors_parse(golden.data(), golden.size(), "golden");
    ASSERT_NE(back, nullptr) << tg_last_error();
    for (int64_t i = 0; i < tg_tensor_map_size(m); i++) {
        EXPECT_STREQ(tg_tensor_map_name(back, i), tg_tensor_map_name(m, i));
        tg_tensor *a = tg_tensor_map_tensor(m, i), *b = tg_tensor_map_tensor(back, i);
        EXPECT_EQ(tg_dtype_of(a), tg_dtype_of(b));
        EXPECT_EQ(dims(a), dims(b));
        EXPECT_TRUE(tensor_near(b, values(a), 0));
    }
    EXPECT_STREQ(tg_tensor_map_metadata(back, "note"), "quote \" backslash \\ tab \t \xc3\xa9");
    int64_t step = 0;
    tg_copy_to_host(tg_tensor_map_get(back, "step"), &step, sizeof step);
    EXPECT_EQ(step, 12345678901234);
    tg_tensor_map_free(back);
}

TEST_F(SafetensorsTest, RoundTripAnyStridesAndLargeInt) {
    tg_tensor *base = tensor_f32({1, 2, 3, 4, 5, 6}, TG_SHAPE(2, 3));
    int64_t st[2] = {1, 3};
    tg_tensor *transposed = tg_as_strided(base, TG_SHAPE(3, 2), st, 0);
    int64_t big[2] = {INT64_MAX, INT64_MIN + 1};
    tg_tensor_map *m = tg_tensor_map_new();
    ASSERT_EQ(tg_tensor_map_set(m, "t", transposed), TG_OK);
    ASSERT_EQ(tg_tensor_map_set(m, "big", tg_from_data(big, TG_SHAPE(2), tg_opts{TG_INT64, TG_CPU, false})), TG_OK);
    std::string path = dir_ + "/rt.safetensors";
    ASSERT_EQ(tg_safetensors_save(m, path.c_str()), TG_OK) << tg_last_error();
    EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0) << "temporary file left behind";
    tg_tensor_map_free(m);

    tg_tensor_map *back = tg_safetensors_load(path.c_str());
    ASSERT_NE(back, nullptr) << tg_last_error();
    EXPECT_EQ(dims(tg_tensor_map_get(back, "t")), (std::vector<int64_t>{3, 2}));
    EXPECT_TRUE(tensor_near(tg_tensor_map_get(back, "t"), {1, 4, 2, 5, 3, 6}, 0));
    int64_t got[2];
    tg_copy_to_host(tg_tensor_map_get(back, "big"), got, sizeof got);
    EXPECT_EQ(got[0], INT64_MAX);
    EXPECT_EQ(got[1], INT64_MIN + 1);
    tg_tensor_map_free(back);
}

// A save killed before its rename leaves path.tmp behind (up to the whole checkpoint):
// the next save replaces it, renames it away and leaves none; a stale .tmp that is a
// symlink is unlinked, never written through; a folder in the .tmp's place is an error.
TEST_F(SafetensorsTest, StaleTempFileIsReplacedByTheNextSave) {
    std::string path = dir_ + "/ck.safetensors", tmp = path + ".tmp", victim = dir_ + "/victim";
    {
        std::ofstream stale(tmp, std::ios::binary);
        stale << std::string(1 << 20, 'x'); // larger than what the save writes
    }
    tg_tensor *t = tensor_f32({1, 2, 3}, TG_SHAPE(3));
    ASSERT_EQ(tg_safetensors_save_tensor(t, "w", path.c_str()), TG_OK) << tg_last_error();
    EXPECT_NE(access(tmp.c_str(), F_OK), 0) << "the stale temporary file is still there";
    EXPECT_TRUE(tensor_near(tg_safetensors_load_tensor(path.c_str(), "w"), {1, 2, 3}, 0));
    {
        std::ofstream v(victim);
        v << "keep me";
    }
    ASSERT_EQ(symlink(victim.c_str(), tmp.c_str()), 0);
    ASSERT_EQ(tg_safetensors_save_tensor(t, "w", path.c_str()), TG_OK) << tg_last_error();
    EXPECT_NE(access(tmp.c_str(), F_OK), 0);
    std::ifstream v(victim);
    std::string kept((std::istreambuf_iterator<char>(v)), std::istreambuf_iterator<char>());
    EXPECT_EQ(kept, "keep me");
    ASSERT_EQ(mkdir(tmp.c_str(), 0755), 0);
    tg_clear_error();
    EXPECT_NE(tg_safetensors_save_tensor(t, "w", path.c_str()), TG_OK);
    EXPECT_ERROR_CONTAINS("tg_safetensors_save: cannot remove the stale " + tmp);
    EXPECT_TRUE(tensor_near(tg_safetensors_load_tensor(path.c_str(), "w"), {1, 2, 3}, 0)); // old file intact
}

TEST_F(SafetensorsTest, SingleTensor) {
    std::string path = dir_ + "/one.safetensors";
    tg_tensor *t = tensor_f64({0.5, -1}, TG_SHAPE(1, 2));
    ASSERT_EQ(tg_safetensors_save_tensor(t, nullptr, path.c_str()), TG_OK);
    tg_tensor *a = tg_safetensors_load_tensor(path.c_str(), nullptr);
    ASSERT_NE(a, nullptr) << tg_last_error();
    EXPECT_EQ(tg_dtype_of(a), TG_FLOAT64);
    EXPECT_TRUE(tensor_near(a, {0.5, -1}, 0));
    tg_tensor *b = tg_safetensors_load_tensor(path.c_str(), "tensor");
    EXPECT_TRUE(tensor_near(b, {0.5, -1}, 0));
    EXPECT_EQ(tg_safetensors_load_tensor(path.c_str(), "weight"), nullptr);
    EXPECT_ERROR_CONTAINS("has no tensor \"weight\" (it has \"tensor\")");
    EXPECT_EQ(tg_safetensors_load_tensor("tests/fixtures/from_torch.safetensors", nullptr), nullptr);
    EXPECT_ERROR_CONTAINS("holds 8 tensors; pass the name");
    tg_tensor *lab = tg_safetensors_load_tensor("tests/fixtures/from_torch.safetensors", "labels");
    EXPECT_EQ(tg_dtype_of(lab), TG_INT64);
}

TEST_F(SafetensorsTest, MapApi) {
    long live = tg_live_tensors();
    tg_tensor_map *m = tg_tensor_map_new();
    tg_scope_begin();
    tg_tensor *a = tensor_f32({1}, TG_SHAPE(1)), *b = tensor_f32({2}, TG_SHAPE(1));
    EXPECT_EQ(tg_tensor_map_set(m, "a", a), TG_OK);
    EXPECT_EQ(tg_tensor_map_set(m, "b", b), TG_OK);
    EXPECT_EQ(tg_tensor_map_set(m, "a", b), TG_OK); // replace keeps the position
    EXPECT_EQ(tg_tensor_map_set(m, "a", b), TG_OK); // same tensor again: still alive
    tg_scope_end();
    EXPECT_EQ(tg_live_tensors(), live + 1); // only b, held by the map
    EXPECT_EQ(tg_tensor_map_size(m), 2);
    EXPECT_STREQ(tg_tensor_map_name(m, 0), "a");
    EXPECT_EQ(tg_tensor_map_tensor(m, 0), tg_tensor_map_get(m, "b"));
    EXPECT_EQ(tg_tensor_map_name(m, 2), nullptr);
    EXPECT_EQ(tg_tensor_map_get(m, "zzz"), nullptr);
    EXPECT_FALSE(tg_has_error());

    EXPECT_EQ(tg_tensor_map_set(m, "__metadata__", tg_tensor_map_get(m, "a")), TG_ERROR);
    EXPECT_ERROR_CONTAINS("reserved");
    EXPECT_EQ(tg_tensor_map_set(m, "", tg_tensor_map_get(m, "a")), TG_ERROR);
    EXPECT_ERROR_CONTAINS("empty tensor name");

    // Composition for checkpoints.
    tg_tensor_map *ck = tg_tensor_map_new();
    EXPECT_EQ(tg_tensor_map_merge(ck, m, "model."), TG_OK);
    EXPECT_EQ(tg_tensor_map_merge(ck, m, "optim."), TG_OK);
    EXPECT_EQ(tg_tensor_map_size(ck), 4);
    EXPECT_STREQ(tg_tensor_map_name(ck, 3), "optim.b");
    tg_tensor_map *model = tg_tensor_map_select(ck, "model.");
    EXPECT_EQ(tg_tensor_map_size(model), 2);
    EXPECT_STREQ(tg_tensor_map_name(model, 1), "b");
    EXPECT_EQ(tg_tensor_map_get(model, "b"), tg_tensor_map_get(m, "b")); // shared, not copied

    EXPECT_TRUE(tg_tensor_map_remove(m, "a"));
    EXPECT_FALSE(tg_tensor_map_remove(m, "a"));
    EXPECT_EQ(tg_tensor_map_size(m), 1);
    EXPECT_EQ(tg_tensor_map_set_metadata(m, "k", "v1"), TG_OK);
    EXPECT_EQ(tg_tensor_map_set_metadata(m, "k", "v2"), TG_OK);
    EXPECT_EQ(tg_tensor_map_metadata_size(m), 1);
    EXPECT_STREQ(tg_tensor_map_metadata_value(m, 0), "v2");
    tg_tensor_map_free(model);
    tg_tensor_map_free(ck);
    tg_tensor_map_free(m);
    EXPECT_EQ(tg_live_tensors(), live);
}

TEST_F(SafetensorsTest, EmptyMapAndMissingFile) {
    tg_tensor_map *m = tg_tensor_map_new();
    std::string path = dir_ + "/empty.safetensors";
    ASSERT_EQ(tg_safetensors_save(m, path.c_str()), TG_OK);
    tg_tensor_map_free(m);
    Bytes b = read_bytes(path);
    EXPECT_EQ(b.size(), 16u); // "{}" padded to 8
    m = tg_safetensors_load(path.c_str());
    ASSERT_NE(m, nullptr) << tg_last_error();
    EXPECT_EQ(tg_tensor_map_size(m), 0);
    tg_tensor_map_free(m);

    EXPECT_EQ(tg_safetensors_load((dir_ + "/nope.safetensors").c_str()), nullptr);
    EXPECT_ERROR_CONTAINS("cannot open " + dir_ + "/nope.safetensors: No such file");
    tg_tensor_map *one = tg_tensor_map_new();
    tg_tensor_map_set(one, "x", tensor_f32({1}, TG_SHAPE(1)));
    EXPECT_EQ(tg_safetensors_save(one, (dir_ + "/no/such/dir.st").c_str()), TG_ERROR);
    EXPECT_ERROR_CONTAINS("cannot create");
    tg_tensor_map_free(one);
}

TEST_F(SafetensorsTest, MalformedLengthAndJson) {
    expect_parse_error({1, 2, 3}, "bad.st: truncated: 3 bytes");
    Bytes b = st_bytes("{}");
    b[0] = 200;
    expect_parse_error(b, "header length 200 but only 2 bytes follow");
    expect_parse_error(st_bytes("[1, 2]"), "must be a JSON object starting with '{'");
    expect_parse_error(st_bytes("{\"a\": {\"dtype\": \"F32\""), "not a valid JSON object");
    expect_parse_error(st_bytes("{} x"), "unexpected bytes after the header's JSON object");
    expect_parse_error(st_bytes("{\"a\": 5}"), "tensor \"a\": entry is not a JSON object");
    expect_parse_error(st_bytes("{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}"),
                       "needs \"dtype\" (string), \"shape\" (array) and \"data_offsets\"");
    expect_parse_error(st_bytes("{\"__metadata__\": {\"k\": 1}}"), "metadata \"k\" is not a string");
    expect_parse_error(st_bytes("{\"__metadata__\": []}"), "\"__metadata__\" must appear once");
    // Padding spaces after the object are fine.
    Bytes ok = st_bytes("{}      ");
    tg_tensor_map *m = tg_safetensors_parse(ok.data(), ok.size(), nullptr);
    EXPECT_NE(m, nullptr) << tg_last_error();
    tg_tensor_map_free(m);
}

TEST_F(SafetensorsTest, MalformedEntries) {
    Bytes four(4, 0);
    expect_parse_error(st_bytes(R"({"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})", four),
                       "dtype I8 is not supported by tapegrad");
    expect_parse_error(st_bytes(R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,4]}})", four),
                       "unknown dtype \"Q4\"");
    expect_parse_error(st_bytes(R"({"a":{"dtype":"U8","shape":[-4],"data_offsets":[0,4]}})", four),
                       "shape entry 0 is not a non-negative integer");
    expect_parse_error(st_bytes(R"({"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,4]}})", four),
                       "shape entry 0 is not a non-negative integer");
    expect_parse_error(st_bytes(R"({"a":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,4],"data_offsets":[0,4]}})", four),
                       "9 dimensions, tapegrad supports at most 8");
    expect_parse_error(st_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,0]}})", four),
                       "data_offsets must be two integers [begin, end] with begin <= end");
    expect_parse_error(st_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0]}})", four),
                       "data_offsets must be two integers");
    expect_parse_error(st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", four),
                       "data_offsets [0, 4] hold 4 bytes but shape [2] of F32 needs 8");
    expect_parse_error(
        st_bytes(R"({"a":{"dtype":"U8","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}})", four),
        "sizes [4294967296, 4294967296, 4294967296] are too large for a tensor");
    // No elements, but sizes whose product overflows (found by fuzzing).
    expect_parse_error(st_bytes(R"({"a":{"dtype":"U8","shape":[0,1099511627776,1099511627776],"data_offsets":[0,0]}})"),
                       "are too large for a tensor");
    expect_parse_error(st_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                R"("a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                                four),
                       "tensor \"a\" appears twice");
}

TEST_F(SafetensorsTest, MalformedLayout) {
    Bytes eight(8, 1);
    expect_parse_error(st_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", eight),
                       "tensor \"a\" starts at byte 4 of the data, expected 0 (a gap before it)");
    expect_parse_error(st_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                                eight),
                       "expected 4 (it overlaps another)");
    expect_parse_error(st_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", eight),
                       "4 trailing bytes after the tensor data");
    expect_parse_error(st_bytes(R"({"a":{"dtype":"U8","shape":[12],"data_offsets":[0,12]}})", eight),
                       "truncated data: the header needs 12 bytes of tensor data but the file has 8");
    // A real file cut short.
    Bytes real = read_bytes("tests/fixtures/from_torch.safetensors");
    ASSERT_GT(real.size(), 100u);
    real.resize(real.size() - 3);
    expect_parse_error(real, "truncated data");
    // BOOL bytes other than 0/1 read as true.
    Bytes flags = {0, 2, 1, 255};
    Bytes b = st_bytes(R"({"f":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]}})", flags);
    tg_tensor_map *m = tg_safetensors_parse(b.data(), b.size(), nullptr);
    ASSERT_NE(m, nullptr) << tg_last_error();
    EXPECT_TRUE(tensor_near(tg_tensor_map_get(m, "f"), {0, 1, 1, 1}, 0));
    tg_tensor_map_free(m);
}

// Issue 35: the checksum of the file's tensors (io/crc32c.h), both implementations.
TEST(Crc32cTest, CheckValueAndBothImplementations) {
    EXPECT_EQ(tg_crc32c(0, "123456789", 9), 0xE3069283u);
    EXPECT_EQ(tg_crc32c_portable(0, "123456789", 9), 0xE3069283u);
    EXPECT_EQ(tg_crc32c(0, "", 0), 0u);
    std::vector<uint8_t> b(1000);
    for (size_t i = 0; i < b.size(); i++) b[i] = (uint8_t)(i * 131 + 7);
    for (size_t n : {1u, 7u, 8u, 9u, 63u, 64u, 999u, 1000u}) {
        uint32_t whole = tg_crc32c(0, b.data(), n);
        EXPECT_EQ(tg_crc32c_portable(0, b.data(), n), whole) << n;
        EXPECT_EQ(tg_crc32c(tg_crc32c(0, b.data(), n / 3), b.data() + n / 3, n - n / 3), whole) << n;
    }
}

// Issue 35: 64 of 71 float32 bit flips changed a model's output and loaded silently.
// The writer stores each tensor's CRC32C as a metadata string; a flipped bit in any
// tensor fails the load naming the file, the tensor and both sums; the header stays
// valid JSON with string metadata (for other readers); the keys stay out of the map.
TEST_F(SafetensorsTest, ChecksumsCatchAFlippedBit) {
    std::string path = dir_ + "/sums.safetensors";
    TG_SCOPE {
        tg_tensor_map *m = tg_tensor_map_new();
        std::vector<float> w(16);
        for (int i = 0; i < 16; i++) w[(size_t)i] = 0.25f * (float)i - 1.f;
        tg_tensor_map_set(m, "layer.weight", tensor_f32(w, TG_SHAPE(4, 4)));
        tg_tensor_map_set(m, "step", tensor_i64({7, 8, 9}, TG_SHAPE(3)));
        tg_tensor_map_set_metadata(m, "epoch", "3");
        ASSERT_EQ(tg_safetensors_save(m, path.c_str()), TG_OK) << tg_last_error();
        tg_tensor_map_free(m);
    }
    Bytes file = read_bytes(path);
    ASSERT_GT(file.size(), 8u);
    uint64_t hl = 0;
    for (int b = 0; b < 8; b++) hl |= (uint64_t)file[(size_t)b] << (8 * b);
    std::string header(file.begin() + 8, file.begin() + 8 + (long)hl);
    cJSON *root = cJSON_Parse(header.c_str());
    ASSERT_NE(root, nullptr) << header;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
    ASSERT_TRUE(cJSON_IsObject(meta)) << header;
    int strings = 0;
    for (const cJSON *kv = meta->child; kv; kv = kv->next) strings += cJSON_IsString(kv);
    EXPECT_EQ(strings, 3) << header; // epoch + one per tensor, all strings
    EXPECT_EQ(cJSON_GetArraySize(meta), 3);
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(meta, "tapegrad.crc32c.layer.weight");
    ASSERT_TRUE(cJSON_IsString(sum)) << header;
    const cJSON *offs =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "layer.weight"), "data_offsets");
    size_t begin = 8 + hl + (size_t)cJSON_GetArrayItem(offs, 0)->valuedouble;
    char expect[9];
    snprintf(expect, sizeof expect, "%08x", (unsigned)tg_crc32c(0, file.data() + begin, 64));
    EXPECT_STREQ(sum->valuestring, expect);
    std::string step_sum = cJSON_GetObjectItemCaseSensitive(meta, "tapegrad.crc32c.step")->valuestring;
    size_t step_begin =
        8 + hl +
        (size_t)cJSON_GetArrayItem(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "step"), "data_offsets"), 0)
            ->valuedouble;
    cJSON_Delete(root);

    // intact: loads, the checksum keys are not the map's metadata
    tg_tensor_map *back = tg_safetensors_load(path.c_str());
    ASSERT_NE(back, nullptr) << tg_last_error();
    EXPECT_EQ(tg_tensor_map_metadata_size(back), 1);
    EXPECT_STREQ(tg_tensor_map_metadata(back, "epoch"), "3");
    uint8_t *again = nullptr;
    size_t again_n = 0;
    ASSERT_EQ(tg_safetensors_serialize(back, &again, &again_n), TG_OK);
    EXPECT_EQ(Bytes(again, again + again_n), file); // resaving gives the same bytes
    free(again);
    tg_tensor_map_free(back);

    // one bit of the weight's 6th element, then one of step's
    struct Flip {
        size_t at, base, n;
        const char *name, *sum;
    };
    for (Flip f : {Flip{begin + 4 * 5 + 2, begin, 64, "layer.weight", expect},
                   Flip{step_begin + 9, step_begin, 24, "step", step_sum.c_str()}}) {
        Bytes bad = file;
        bad[f.at] ^= 0x10;
        std::ofstream(path, std::ios::binary | std::ios::trunc).write((const char *)bad.data(), (long)bad.size());
        tg_clear_error();
        EXPECT_EQ(tg_safetensors_load(path.c_str()), nullptr);
        char msg[512];
        snprintf(msg, sizeof msg,
                 "tg_safetensors_load: %s: tensor \"%s\" is corrupted: the CRC32C of its %zu bytes is "
                 "%08x, the file says %s",
                 path.c_str(), f.name, f.n, (unsigned)tg_crc32c(0, bad.data() + f.base, f.n), f.sum);
        EXPECT_ERROR_CONTAINS(msg);
    }
    // a malformed checksum is an error; a file without any (PyTorch's) loads
    std::string h =
        R"({"__metadata__":{"tapegrad.crc32c.x":"12zz"},"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
    expect_parse_error(st_bytes(h, {5}), "metadata \"tapegrad.crc32c.x\" must be 8 hex digits (a CRC32C)");
    h = R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
    tg_tensor_map *plain = tg_safetensors_parse(st_bytes(h, {5}).data(), 9 + h.size(), "plain");
    EXPECT_NE(plain, nullptr) << tg_last_error();
    tg_tensor_map_free(plain);
}

} // namespace
