// The parser/repair step on a corpus of realistic replies (tests/llm_replies/manifest.toml):
// each reply's kernel is extracted and repaired as the generator does, then checked for what it
// must and must not contain, the repairs reported, and (cpu) that g++ accepts it.
#include "llm/reply_parser.h"

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <filesystem>
#include <fstream>

#include "common/paths.h"
#include "process/subprocess.h"
#include "support/backends.h"
#include "support/fake_openai_server.h"

namespace kforge::llm {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> strings(const toml::table& entry, const char* key) {
  std::vector<std::string> out;
  if (const toml::array* a = entry[key].as_array()) {
    for (const auto& v : *a) out.push_back(*v.value<std::string>());
  }
  return out;
}

// g++ -fsyntax-only on `source`; "" when it passes, else the compiler's output.
std::string syntax_errors(const std::string& source, const std::string& name) {
  fs::path file = fs::temp_directory_path() / ("kforge_parser_" + name + ".cpp");
  std::ofstream(file) << source;
  std::vector<std::string> argv = {"g++", "-std=c++20", "-fopenmp", "-fsyntax-only"};
  for (const std::string& dir : kernel_include_dirs()) argv.push_back("-I" + dir);
  argv.push_back(file.string());
  process::CommandResult result = process::run_command(argv, 120);
  fs::remove(file);
  return result.exit_code == 0 ? "" : result.output;
}

TEST(ReplyCorpusTest, EveryReplyParsesAndRepairsAsLabelled) {
  fs::path dir = fs::path(KFORGE_SOURCE_DIR) / "tests" / "llm_replies";
  toml::table manifest = toml::parse_file((dir / "manifest.toml").string());
  const toml::array* replies = manifest["replies"].as_array();
  ASSERT_NE(replies, nullptr);
  ASSERT_GE(replies->size(), 12u);
  for (const auto& node : *replies) {
    const toml::table& entry = *node.as_table();
    const std::string file = *entry["file"].value<std::string>();
    const std::string backend = *entry["backend"].value<std::string>();
    SCOPED_TRACE(file + " on " + backend);
    if (!::kforge::testing::has_backend(backend)) continue;  // a build without that backend
    std::optional<ExtractedCode> code = extract_kernel(testing::corpus_reply(file), backend);
    if (!entry["code"].value_or(true)) {
      EXPECT_FALSE(code) << code->source;
      continue;
    }
    ASSERT_TRUE(code);
    EXPECT_EQ(code->truncated, entry["truncated"].value_or(false));
    RepairResult repaired = repair_kernel(code->source, backend);
    for (const std::string& s : strings(entry, "contains")) {
      EXPECT_NE(repaired.source.find(s), std::string::npos) << "missing: " << s << "\n"
                                                            << repaired.source;
    }
    for (const std::string& s : strings(entry, "absent")) {
      EXPECT_EQ(repaired.source.find(s), std::string::npos) << "present: " << s << "\n"
                                                            << repaired.source;
    }
    std::vector<std::string> fixes = strings(entry, "fixes");
    EXPECT_EQ(repaired.fixes.size(), fixes.size()) << ::testing::PrintToString(repaired.fixes);
    for (const std::string& expected : fixes) {
      bool found = false;
      for (const std::string& fix : repaired.fixes)
        found = found || fix.find(expected) != std::string::npos;
      EXPECT_TRUE(found) << "no fix mentions: " << expected << " in "
                         << ::testing::PrintToString(repaired.fixes);
    }
    if (entry["compiles"].value_or(false)) {
      EXPECT_EQ(syntax_errors(repaired.source, fs::path(file).stem().string()), "")
          << repaired.source;
    }
  }
}

TEST(ReplyParserTest, RepairIsIdempotentOnAGoodKernel) {
  std::optional<ExtractedCode> code =
      extract_kernel(testing::corpus_reply("softmax_fast_cpu.md"), "cpu");
  ASSERT_TRUE(code);
  const std::string good = code->source;
  RepairResult once = repair_kernel(good, "cpu");
  EXPECT_TRUE(once.fixes.empty()) << ::testing::PrintToString(once.fixes);
  EXPECT_EQ(once.source, good);
}

TEST(ReplyParserTest, AmbiguousEntryPointsAreNotRenamed) {
  std::string two =
      "#include <kforge/kernel.h>\n"
      "extern \"C\" int run_a(const kforge_args* a) { return 0; }\n"
      "extern \"C\" int run_b(const kforge_args* a) { return 1; }\n";
  RepairResult repaired = repair_kernel(two, "cpu");
  EXPECT_EQ(repaired.source.find("kforge_run"), std::string::npos) << repaired.source;
  EXPECT_TRUE(repaired.fixes.empty());
}

TEST(ReplyParserTest, CallsOfTheEntryPointAreLeftAlone) {
  std::string source =
      "#include <kforge/kernel.h>\n"
      "KFORGE_API int kforge_run(const kforge_args* a) { return 0; }\n"
      "int again(const kforge_args* a) { return kforge_run(a); }\n";
  RepairResult repaired = repair_kernel(source, "cpu");
  EXPECT_EQ(repaired.source, source);
}

TEST(ReplyParserTest, MainInsideACommentIsKept) {
  std::string source =
      "#include <kforge/kernel.h>\n// int main() { return 0; }\n"
      "KFORGE_API int kforge_run(const kforge_args* a) { return 0; }\n";
  EXPECT_EQ(repair_kernel(source, "cpu").source, source);
}

TEST(ReplyParserTest, EmptyOrProseOnlyRepliesHaveNoCode) {
  EXPECT_FALSE(extract_kernel("", "cpu"));
  EXPECT_FALSE(extract_kernel("I cannot help with that.", "cpu"));
  EXPECT_FALSE(extract_kernel("```\n\n```\n", "cpu"));
}

}  // namespace
}  // namespace kforge::llm
