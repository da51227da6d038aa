// Malformed safetensors files, one test per rule: each is assembled byte by byte and must fail in
// SafetensorsFile::open with the exact message (file path, tensor name, problem). Also the
// hostile-but-legal corners: leading whitespace, extra fields, misaligned data, odd names.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>

#include "fp8kit/safetensors.h"
#include "io/safetensors_header.h"
#include "io_test_util.h"

namespace fp8kit {
namespace {

using testing::error_message;
using testing::safetensors_bytes;

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, uint64_t begin,
                  uint64_t end) {
  return fmt::format(R"("{}":{{"dtype":"{}","shape":{},"data_offsets":[{},{}]}})", name, dtype, shape, begin, end);
}

// "{e0,e1,...}": a header made of tensor entries.
std::string header_of(const std::vector<std::string>& entries) {
  std::string out = "{";
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += ',';
    out += entries[i];
  }
  out += '}';
  return out;
}

class SafetensorsErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_dir(std::string("errors_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    path_ = dir_ + "/bad.safetensors";
  }

  // Writes `bytes` as a file and returns the message SafetensorsFile::open throws for it.
  std::string open_error(const std::string& bytes) {
    testing::write_bytes(path_, bytes);
    return error_message([&] { SafetensorsFile::open(path_); });
  }
  // The same for a file made of `header` and `data`, checked against "<path>: <expected>".
  void expect_error(const std::string& header, const std::string& data, const std::string& expected) {
    EXPECT_EQ(open_error(safetensors_bytes(header, data)), path_ + ": " + expected);
  }
  std::shared_ptr<const SafetensorsFile> open_ok(const std::string& header, const std::string& data) {
    testing::write_bytes(path_, safetensors_bytes(header, data));
    return SafetensorsFile::open(path_);
  }

  std::string dir_;
  std::string path_;
};

// ---- file and header length ----

TEST_F(SafetensorsErrors, MissingFile) {
  const std::string path = dir_ + "/nope.safetensors";
  EXPECT_EQ(error_message([&] { SafetensorsFile::open(path); }), path + ": cannot open: No such file or directory");
}

TEST_F(SafetensorsErrors, Directory) {
  EXPECT_EQ(error_message([&] { SafetensorsFile::open(dir_); }), dir_ + ": a directory, not a regular file");
}

TEST_F(SafetensorsErrors, EmptyFile) {
  EXPECT_EQ(open_error(""), path_ + ": empty file (0 bytes), not a safetensors file");
}

TEST_F(SafetensorsErrors, ShortFile) {
  EXPECT_EQ(open_error(std::string("\x02\0\0\0\0", 5)), path_ + ": file is 5 bytes, too short for the 8-byte header length");
}

TEST_F(SafetensorsErrors, HeaderLengthOverTheLimit) {
  EXPECT_EQ(open_error(testing::le64(100'000'001) + "{}"),
            path_ + ": header length 100000001 exceeds the limit of 100000000 bytes");
  EXPECT_EQ(open_error(testing::le64(~uint64_t{0}) + "{}"),
            path_ + ": header length 18446744073709551615 exceeds the limit of 100000000 bytes");
}

TEST_F(SafetensorsErrors, HeaderLengthBeyondTheFile) {
  EXPECT_EQ(open_error(testing::le64(100) + std::string(20, ' ')),
            path_ + ": header length 100 runs past the end of the file (28 bytes)");
}

// ---- JSON ----

TEST_F(SafetensorsErrors, NotJson) {
  expect_error("{nope}", "",
               "invalid JSON at byte 3: parse error at line 1, column 3: syntax error while parsing object key - "
               "invalid literal; last read: '{no'; expected string literal");
}

TEST_F(SafetensorsErrors, TruncatedJson) {
  expect_error(R"({"a":{"dtype":"F32")", "",
               "invalid JSON at byte 20: parse error at line 1, column 20: syntax error while parsing object - "
               "unexpected end of input; expected '}'");
}

TEST_F(SafetensorsErrors, NotAnObject) {
  expect_error("[1, 2]", "", "header is not a JSON object: it starts with '[' instead of '{'");
  expect_error("\"text\"", "", "header is not a JSON object: it starts with '\"' instead of '{'");
  expect_error("    ", "", "header is empty (a JSON object was expected)");
  expect_error("", "", "header is empty (a JSON object was expected)");
}

TEST_F(SafetensorsErrors, LeadingGarbage) {
  expect_error("xx{}", "", "header is not a JSON object: it starts with 'x' instead of '{'");
  expect_error(std::string("\0{}", 3), "", "header is not a JSON object: it starts with 0x00 instead of '{'");
}

TEST_F(SafetensorsErrors, TrailingGarbageAfterTheObject) {
  expect_error("{} x", "",
               "invalid JSON at byte 4: parse error at line 1, column 4: syntax error while parsing value - invalid "
               "literal; last read: '{} x'; expected end of input");
}

TEST_F(SafetensorsErrors, DeepNesting) {
  const std::string deep = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":)" + std::string(20, '[') +
                           std::string(20, ']') + "}}";
  expect_error(deep, std::string(4, '\0'), "JSON nests deeper than 16 levels (at byte 71)");
  // Deep enough to overflow any recursive parser; rejected before parsing.
  expect_error(std::string(1'000'000, '{'), "", "JSON nests deeper than 16 levels (at byte 16)");
  // Brackets inside strings do not count.
  const auto file = open_ok(R"({"__metadata__":{"k":"[[[[[[[[[[[[[[[[[[[[{{{{{{{{{{{{{{{{{{{"}})", "");
  EXPECT_EQ(file->metadata().at("k").size(), 39u);
}

TEST_F(SafetensorsErrors, InvalidUtf8) {
  expect_error("{\"a\xff\":{}}", "",
               "invalid JSON at byte 4: parse error at line 1, column 4: syntax error while parsing object key - "
               "invalid string: ill-formed UTF-8 byte; last read: '\"a\xff'; expected string literal");
}

TEST_F(SafetensorsErrors, NumberOverflow) {
  expect_error(R"({"a":{"dtype":"F32","shape":[1e999],"data_offsets":[0,4]}})", std::string(4, '\0'),
               "invalid JSON at byte 34: number overflow parsing '1e999'");
}

TEST_F(SafetensorsErrors, DuplicateTensorNames) {
  expect_error(header_of({entry("model.x.weight", "F32", "[1]", 0, 4), entry("model.x.weight", "F32", "[1]", 4, 8)}),
               std::string(8, '\0'), "duplicate tensor name 'model.x.weight'");
}

TEST_F(SafetensorsErrors, DuplicateField) {
  expect_error(R"({"model.x.weight":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})",
               std::string(4, '\0'), "tensor 'model.x.weight': duplicate field 'dtype'");
  expect_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":{"k":1,"k":2}}})",
               std::string(4, '\0'), "tensor 'w': duplicate key 'k' inside field 'extra'");
}

// ---- tensor entries ----

TEST_F(SafetensorsErrors, EntryNotAnObject) {
  expect_error(R"({"w":[1,2]})", "",
               "tensor 'w': entry must be an object with \"dtype\", \"shape\" and \"data_offsets\", got [1,2]");
}

TEST_F(SafetensorsErrors, MissingField) {
  expect_error(R"({"w":{"dtype":"F32","shape":[1]}})", std::string(4, '\0'), "tensor 'w': missing \"data_offsets\"");
  expect_error(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'), "tensor 'w': missing \"dtype\"");
  expect_error(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", std::string(4, '\0'), "tensor 'w': missing \"shape\"");
}

TEST_F(SafetensorsErrors, BadDTypeString) {
  expect_error(R"({"w":{"dtype":5,"shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'),
               "tensor 'w': \"dtype\" must be a string, got 5");
  expect_error(header_of({entry("w", "float32", "[1]", 0, 4)}), std::string(4, '\0'),
               "tensor 'w': unsupported dtype 'float32'");
}

TEST_F(SafetensorsErrors, UnknownDType) {
  for (const char* dtype : {"F4", "F6_E2M3", "F6_E3M2", "C64"}) {
    expect_error(header_of({entry("model.x.weight", dtype, "[2]", 0, 1)}), std::string(1, '\0'),
                 fmt::format("tensor 'model.x.weight': unsupported dtype '{}'", dtype));
  }
}

TEST_F(SafetensorsErrors, NegativeShape) {
  expect_error(header_of({entry("w", "F32", "[2,-1]", 0, 0)}), "",
               "tensor 'w': \"shape\" must be an array of non-negative integers, got [2,-1]");
}

TEST_F(SafetensorsErrors, NonIntegerShape) {
  expect_error(header_of({entry("w", "F32", "[2.0]", 0, 8)}), std::string(8, '\0'),
               "tensor 'w': \"shape\" must be an array of non-negative integers, got [2.0]");
  expect_error(header_of({entry("w", "F32", "[\"2\"]", 0, 8)}), std::string(8, '\0'),
               "tensor 'w': \"shape\" must be an array of non-negative integers, got [\"2\"]");
  expect_error(header_of({entry("w", "F32", "2", 0, 8)}), std::string(8, '\0'),
               "tensor 'w': \"shape\" must be an array of non-negative integers, got 2");
  // Beyond u64: nlohmann reads it as a float.
  expect_error(header_of({entry("w", "F32", "[18446744073709551616]", 0, 8)}), std::string(8, '\0'),
               "tensor 'w': \"shape\" must be an array of non-negative integers, got [1.8446744073709552e+19]");
}

TEST_F(SafetensorsErrors, OverflowingShape) {
  expect_error(header_of({entry("w", "F32", "[4294967296,4294967296]", 0, 8)}), std::string(8, '\0'),
               "tensor 'w': shape [4294967296,4294967296] has too many elements");
  expect_error(header_of({entry("w", "U8", "[9223372036854775808]", 0, 8)}), std::string(8, '\0'),
               "tensor 'w': shape [9223372036854775808] has too many elements");
  // numel fits in int64 but numel * 8 bytes does not fit in u64.
  expect_error(header_of({entry("w", "F64", "[4611686018427387904]", 0, 8)}), std::string(8, '\0'),
               "tensor 'w': data_offsets [0, 8] hold 8 bytes but f64[4611686018427387904] needs more than 2^64");
  // A zero dimension does not excuse an overflowing product of the others.
  expect_error(header_of({entry("w", "U8", "[0,4294967296,4294967296]", 0, 0)}), "",
               "tensor 'w': shape [0,4294967296,4294967296] has too many elements");
}

TEST_F(SafetensorsErrors, BadDataOffsets) {
  expect_error(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", std::string(1, '\0'),
               "tensor 'w': \"data_offsets\" must be [begin, end] with non-negative integers, got [0]");
  expect_error(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", std::string(1, '\0'),
               "tensor 'w': \"data_offsets\" must be [begin, end] with non-negative integers, got [-1,0]");
  expect_error(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", std::string(1, '\0'),
               "tensor 'w': \"data_offsets\" must be [begin, end] with non-negative integers, got [0,1,2]");
}

TEST_F(SafetensorsErrors, OffsetsReversed) {
  expect_error(header_of({entry("model.x.weight", "U8", "[4]", 8, 4)}), std::string(8, '\0'),
               "tensor 'model.x.weight': data_offsets [8, 4] end before they begin");
}

TEST_F(SafetensorsErrors, OffsetsOutOfBounds) {
  expect_error(header_of({entry("model.x.weight", "U8", "[16]", 0, 16)}), std::string(8, '\0'),
               "tensor 'model.x.weight': data_offsets [0, 16] run past the end of the data section (8 bytes)");
  expect_error(header_of({entry("w", "U8", "[1]", 18446744073709551615ull, 18446744073709551615ull)}), "",
               "tensor 'w': data_offsets [18446744073709551615, 18446744073709551615] run past the end of the data "
               "section (0 bytes)");
}

TEST_F(SafetensorsErrors, SizeMismatch) {
  expect_error(header_of({entry("model.x.weight", "BF16", "[2,3]", 0, 10)}), std::string(10, '\0'),
               "tensor 'model.x.weight': data_offsets [0, 10] hold 10 bytes but bf16[2, 3] needs 12");
}

TEST_F(SafetensorsErrors, Overlap) {
  expect_error(header_of({entry("a", "U8", "[4]", 0, 4), entry("b", "U8", "[4]", 2, 6)}), std::string(6, '\0'),
               "tensor 'b': data_offsets [2, 6] overlap tensor 'a' at [0, 4]");
  // The same bytes claimed twice.
  expect_error(header_of({entry("a", "U8", "[4]", 0, 4), entry("b", "U8", "[4]", 0, 4)}), std::string(4, '\0'),
               "tensor 'b': data_offsets [0, 4] overlap tensor 'a' at [0, 4]");
  // An empty tensor placed inside another one.
  expect_error(header_of({entry("a", "U8", "[4]", 0, 4), entry("e", "U8", "[0]", 2, 2)}), std::string(4, '\0'),
               "tensor 'e': data_offsets [2, 2] overlap tensor 'a' at [0, 4]");
}

TEST_F(SafetensorsErrors, Hole) {
  expect_error(header_of({entry("a", "U8", "[4]", 0, 4), entry("b", "U8", "[4]", 6, 10)}),
               std::string(10, '\0'),
               "tensor 'b': data_offsets [6, 10] leave a hole: bytes [4, 6) after tensor 'a' belong to no tensor");
  expect_error(header_of({entry("a", "U8", "[4]", 2, 6)}), std::string(6, '\0'),
               "tensor 'a': data_offsets [2, 6] leave a hole: bytes [0, 2) belong to no tensor");
}

TEST_F(SafetensorsErrors, TrailingBytes) {
  expect_error(header_of({entry("model.x.weight", "U8", "[4]", 0, 4)}), std::string(7, '\0'),
               "the data section holds 7 bytes but its last tensor 'model.x.weight' ends at 4: 3 trailing bytes "
               "belong to no tensor");
  expect_error("{}", std::string(3, '\0'), "the data section holds 3 bytes but the header lists no tensors");
}

// ---- __metadata__ ----

TEST_F(SafetensorsErrors, BadMetadata) {
  expect_error(R"({"__metadata__":["pt"]})", "", "__metadata__ must be an object of string to string, got [\"pt\"]");
  expect_error(R"({"__metadata__":{"format":"pt","layers":32}})", "",
               "__metadata__: value of 'layers' must be a string, got 32");
  expect_error(R"({"__metadata__":{"k":{"nested":"x"}}})", "",
               "__metadata__: value of 'k' must be a string, got {\"nested\":\"x\"}");
  expect_error(R"({"__metadata__":{"format":"pt","format":"tf"}})", "", "__metadata__: duplicate key 'format'");
  expect_error(R"({"__metadata__":{},"__metadata__":{}})", "", "duplicate \"__metadata__\" entry");
  expect_error(R"({"__metadata__":"pt"})", "", "__metadata__ must be an object of string to string, got \"pt\"");
  // null stands for no metadata, as in the reference reader.
  EXPECT_TRUE(open_ok(R"({"__metadata__":null})", "")->metadata().empty());
}

// ---- legal corners ----

TEST_F(SafetensorsErrors, LegalCornersAreAccepted) {
  // Leading whitespace, trailing spaces, unknown extra fields, a zero-rank tensor, empty tensors
  // sharing an offset, names that need escaping, entries out of offset order.
  const std::string header =
      " \n\t" +
      header_of({entry("z", "F32", "[]", 0, 4), entry("e1", "F32", "[0,3]", 4, 4), entry("e0", "BF16", "[0]", 4, 4),
                 R"("b":{"data_offsets":[4,6],"shape":[2],"dtype":"U8","extra":{"x":[1,{"y":null}]}})",
                 entry("line\\nbreak", "I8", "[1]", 6, 7)}) +
      "    ";
  const auto file = open_ok(header, std::string("\0\0\x80\x3f\x05\x06\x07", 7));
  std::vector<std::string> order;
  for (const TensorInfo& t : file->tensors()) order.push_back(t.name);
  EXPECT_EQ(order, (std::vector<std::string>{"z", "e0", "e1", "b", "line\nbreak"}));
  EXPECT_TRUE(file->metadata().empty());
  EXPECT_EQ(file->tensor("z").shape(), Shape{});
  EXPECT_EQ(file->tensor("z").item_f32(), 1.0f);
  EXPECT_EQ(file->tensor("e1").shape(), (Shape{0, 3}));
  EXPECT_EQ(file->tensor("e1").numel(), 0);
  EXPECT_EQ(error_message([&] { file->tensor("missing"); }), path_ + ": no tensor named 'missing'");
}

TEST_F(SafetensorsErrors, HostileNamesAreQuotedInMessages) {
  expect_error(header_of({entry("evil\\n'name", "F4", "[2]", 0, 1)}), std::string(1, '\0'),
               "tensor 'evil\\x0a\\x27name': unsupported dtype 'F4'");
}

TEST_F(SafetensorsErrors, MisalignedDataIsReadable) {
  // A 9-byte header puts the data at file offset 17: an f32 there is misaligned. The view is
  // handed out as is; reading it through memcpy is well defined.
  const std::string header = header_of({entry("w", "F32", "[]", 0, 4)});
  const std::string padded = header + std::string((9 - header.size() % 8) % 8 + 8, ' ');
  ASSERT_EQ((8 + padded.size()) % 4, 1u);
  const auto file = open_ok(padded, std::string("\0\0\x80\x3f", 4));
  const Tensor t = file->tensor("w");
  EXPECT_NE(reinterpret_cast<uintptr_t>(t.data_ptr()) % 4, 0u);
  float v = 0.0f;
  std::memcpy(&v, t.data_ptr(), 4);
  EXPECT_EQ(v, 1.0f);
}

// The parser alone: it reads only [0, size), and its messages carry no file name.
TEST(SafetensorsHeader, ParserReadsOnlyTheGivenBytes) {
  const std::string header = header_of({entry("w", "U8", "[2]", 0, 2)});
  const std::string bytes = safetensors_bytes(header, "ab");
  const auto parsed = io::parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  EXPECT_EQ(parsed.data_start, 8 + header.size());
  EXPECT_EQ(parsed.data_size, 2u);
  ASSERT_EQ(parsed.tensors.size(), 1u);
  EXPECT_EQ(parsed.tensors[0].name, "w");
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  EXPECT_EQ(error_message([&] { io::parse_safetensors_header(p, bytes.size() - 1); }),
            "tensor 'w': data_offsets [0, 2] run past the end of the data section (1 bytes)");
  EXPECT_EQ(error_message([&] { io::parse_safetensors_header(p, 12); }),
            fmt::format("header length {} runs past the end of the file (12 bytes)", header.size()));
  EXPECT_EQ(error_message([&] { io::parse_safetensors_header(nullptr, 0); }),
            "file is 0 bytes, too short for the 8-byte header length");
}

}  // namespace
}  // namespace fp8kit
