// read_json_file / write_json_file: whole JSON files read with errors that name the file and the
// byte of a syntax error, written atomically (temporary name + rename).
// Tested in tests/cpu/test_checkpoint.cpp.
#include "core/check.h"
#include "core/names.h"
#include "fp8kit/checkpoint.h"
#include "io/file_util.h"
#include "io/json_util.h"

namespace fp8kit {
namespace {

// Configuration files nest a few levels; the bound keeps hostile files from exhausting the stack
// of nlohmann's recursive copy and dump.
constexpr size_t kMaxJsonFileDepth = 128;

}  // namespace

nlohmann::ordered_json read_json_file(const std::string& path) {
  const std::string text = io::read_json_text(path);
  try {
    // Duplicate keys are tolerated (the last wins), as Python's json.load does for config files.
    return io::parse_json_strict<nlohmann::ordered_json>(text, kMaxJsonFileDepth, nullptr);
  } catch (const Error& e) {
    throw Error(e.code(), shown_path(path) + ": " + e.what());
  }
}

void write_json_file(const std::string& path, const nlohmann::ordered_json& value) {
  std::string text;
  try {
    text = value.dump(2);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kInvalidArgument, "{}: cannot serialize JSON: {}", shown_path(path), e.what());
  }
  text += '\n';
  io::write_file_atomic(path, text);
}

}  // namespace fp8kit
