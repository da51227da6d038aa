// `fp8kit tokenize MODEL (--text FILE | --prompt TEXT | --decode IDS) [--json] [--batch]`: the
// token ids of a text with the model's tokenizer.json (the ids Hugging Face tokenizers gives), or
// the text of ids. Tested in tests/cpu/test_tokenizer_cli.cpp and tests/python/test_tokenizer_interop.py.
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/check.h"
#include "core/parallel.h"
#include "fp8kit/model/tokenizer.h"
#include "model/tokenizer/tokenizer_impl.h"
#include "model/tokenizer/utf8.h"
#include "run_options.h"

namespace fp8kit::cli {
namespace {

// Encoding holds the pre-tokenized words of a text at once (peak memory about 8x the text, measured
// on 10 MB): 64 MiB bounds that.
constexpr size_t kMaxTextFileBytes = 64u << 20;

void print(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"; }

std::string id_line(const std::vector<int32_t>& ids) {
  std::string line;
  line.reserve(ids.size() * 6 + 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(ids[i]);
  }
  return line + "\n";
}

// --batch: a JSON string per line of `path` (JSON escapes carry any text, newlines included).
int encode_batch(const Tokenizer& tokenizer, const std::string& path, bool add_special, bool json) {
  const std::string file = tok::read_regular_file(path, kMaxTextFileBytes);
  std::vector<std::string> texts;
  std::istringstream in(file);
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail(ErrorCode::kInvalidArgument, "{}:{}: not a JSON string: {}", path, number, e.what());
    }
    FP8KIT_CHECK_ARG(j.is_string(), "{}:{}: not a JSON string", path, number);
    texts.push_back(j.get<std::string>());
  }
  if (!json) {
    for (const auto& ids : tokenizer.encode_batch(texts, add_special)) print(id_line(ids));
    return 0;
  }
  std::vector<Tokenizer::Encoding> encodings(texts.size());
  parallel_for(static_cast<int64_t>(texts.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) encodings[i] = tokenizer.encode_with_tokens(texts[i], add_special);
  });
  for (const auto& e : encodings) print(dump({{"ids", e.ids}, {"tokens", e.tokens}}));
  return 0;
}

}  // namespace

void add_tokenize(CLI::App& app, std::function<int()>& run) {
  struct Args {
    std::string model;
    std::string text_file;
    std::string prompt;
    std::string decode;
    bool json = false;
    bool no_special = false;
    bool skip_special = false;
    bool stream = false;
    bool chat = false;
    bool batch = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Token ids of a text with a model's tokenizer.json, or the text of ids");
  cmd->add_option("MODEL", args->model, "checkpoint directory with tokenizer.json (and tokenizer_config.json)")->required();
  auto* text = cmd->add_option("--text", args->text_file, "UTF-8 file to encode");
  auto* prompt = cmd->add_option("--prompt", args->prompt, "text to encode");
  auto* decode = cmd->add_option("--decode", args->decode, "space-separated ids to decode");
  text->excludes(prompt)->excludes(decode);
  prompt->excludes(decode);
  cmd->add_flag("--json", args->json, "print {\"ids\", \"tokens\"} (or {\"text\"} with --decode) as JSON");
  cmd->add_flag("--no-special-tokens", args->no_special, "encode without the post-processor's BOS/EOS tokens");
  cmd->add_flag("--skip-special-tokens", args->skip_special, "--decode: leave special tokens out of the text");
  cmd->add_flag("--stream", args->stream, "--decode: decode id by id as generation does (with --json: the chunks)");
  cmd->add_flag("--batch", args->batch,
                "--text FILE holds one JSON string per line; each is encoded by itself (in parallel) and printed on a line");
  cmd->add_flag("--chat", args->chat, "format --prompt with the chat template (not available: see the README)");
  cmd->callback([args, cmd, &run] {
    run = [args, cmd] {
      FP8KIT_CHECK(!args->chat, ErrorCode::kUnsupported,
                   "--chat: chat templates are Jinja programs and fp8kit has no Jinja engine (no C++ Jinja library is "
                   "packaged in Debian or PyPI); pass the formatted text with --prompt");
      const bool has_text = cmd->count("--text") > 0, has_prompt = cmd->count("--prompt") > 0;
      const bool has_decode = cmd->count("--decode") > 0;
      FP8KIT_CHECK_ARG(has_text || has_prompt || has_decode, "tokenize: give --text FILE, --prompt TEXT or --decode IDS");
      const Tokenizer tokenizer = Tokenizer::from_directory(args->model);
      if (has_decode) {
        const std::vector<int32_t> ids = parse_token_ids(args->decode, "--decode");
        if (!args->stream) {
          const std::string s = tokenizer.decode(ids, args->skip_special);
          print(args->json ? dump({{"text", s}}) : s + "\n");
          return 0;
        }
        DecodeStream stream(tokenizer, args->skip_special);
        nlohmann::json chunks = nlohmann::json::array();
        for (const int32_t id : ids) {
          const std::string chunk = stream.step(id);
          if (args->json) {
            chunks.push_back(chunk);
          } else {
            print(chunk);
            std::fflush(stdout);
          }
        }
        const std::string rest = stream.flush();
        if (args->json) {
          print(dump({{"chunks", chunks}, {"rest", rest}}));
        } else {
          print(rest + "\n");
        }
        return 0;
      }
      if (args->batch) {
        FP8KIT_CHECK_ARG(has_text, "--batch needs --text FILE");
        return encode_batch(tokenizer, args->text_file, !args->no_special, args->json);
      }
      std::string input = has_prompt ? args->prompt : tok::read_regular_file(args->text_file, kMaxTextFileBytes);
      const size_t bad = tok::find_invalid_utf8(input);
      FP8KIT_CHECK_ARG(bad == std::string::npos, "{}: not valid UTF-8 (byte {} of {})",
                       has_prompt ? std::string("--prompt") : args->text_file, bad, input.size());
      if (args->json) {
        const Tokenizer::Encoding e = tokenizer.encode_with_tokens(input, !args->no_special);
        print(dump({{"ids", e.ids}, {"tokens", e.tokens}}));
        return 0;
      }
      print(id_line(tokenizer.encode(input, !args->no_special)));
      return 0;
    };
  });
}

}  // namespace fp8kit::cli
