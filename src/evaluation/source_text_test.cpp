#include "evaluation/source_text.h"

#include <gtest/gtest.h>

namespace kforge::evaluation {
namespace {

// The original text that prepared character `i` came from.
char origin_char(const std::string& source, const PreparedSource& prepared, size_t i) {
  return source[prepared.origin.at(i)];
}

TEST(SourceText, BlanksCommentsAndKeepsNewlines) {
  std::string source = "a // b\nc /* d\ne */ f\n";
  PreparedSource prepared = prepare_source(source);
  EXPECT_EQ(prepared.text, "a\nc\nf\n");
  EXPECT_EQ(prepared.code, prepared.text);
  ASSERT_EQ(prepared.origin.size(), prepared.text.size());
  for (size_t i = 0; i < prepared.text.size(); ++i) {
    if (!is_space(prepared.text[i])) {
      EXPECT_EQ(origin_char(source, prepared, i), prepared.text[i]);
    }
  }
  EXPECT_EQ(prepared.origin[4], source.find('f'));
}

TEST(SourceText, KeepsLiteralsInTextAndBlanksThemInCode) {
  std::string source = R"(s = "// x"; c = '"'; r = R"q(/* ")q"; n = 1'0;)";
  PreparedSource prepared = prepare_source(source);
  EXPECT_EQ(prepared.text, source);
  std::string code = "s = " + std::string(6, ' ') + "; c = " + std::string(3, ' ') + "; r = R" +
                     std::string(10, ' ') + "; n = 1'0;";
  EXPECT_EQ(prepared.code, code);
}

TEST(SourceText, EscapedQuotesAndUnterminatedConstructs) {
  EXPECT_EQ(prepare_source(R"(a = "x\" // y"; b)").text, R"(a = "x\" // y"; b)");
  EXPECT_EQ(prepare_source("a = 'x\nb /* c").text, "a = 'x\nb ");
}

TEST(SourceText, UndoesLineSplicesAndMapsBack) {
  std::string source = "ab\\\ncd \\  \r\nef";
  PreparedSource prepared = prepare_source(source);
  EXPECT_EQ(prepared.text, "abcd ef");
  EXPECT_EQ(prepared.origin[2], 4u);  // 'c' follows the splice
  EXPECT_EQ(origin_char(source, prepared, 5), 'e');
  // A // comment continued by a splice swallows the next line, as the compiler does.
  EXPECT_EQ(prepare_source("x // y \\\nz\nw").text, "x\nw");
}

TEST(SourceText, CollapsesWhitespaceRunsPreferringNewlines) {
  PreparedSource prepared = prepare_source("a  \t b \n\n  c");
  EXPECT_EQ(prepared.text, "a b\nc");
  EXPECT_EQ(prepared.origin[4], 11u);
}

TEST(SourceText, LocatesLinesColumnsAndExcerpts) {
  std::string source = "first\n\tsecond line  \n\nlast";
  SourceLocator locator(source);
  SourceLocation at = locator.locate(source.find("line"));
  EXPECT_EQ(at.line, 2);
  EXPECT_EQ(at.column, 9);
  EXPECT_EQ(locator.excerpt(source.find("line")), "second line");
  EXPECT_EQ(locator.locate(0).line, 1);
  EXPECT_EQ(locator.locate(source.find("last")).line, 4);
  EXPECT_EQ(locator.locate(source.size() + 10).column, 5);
  EXPECT_EQ(locator.excerpt(source.find("\n\n") + 1), "");
}

TEST(SourceText, ExcerptsOfLongLinesAreShortAndPrintable) {
  std::string source = std::string(300, 'x') + " = 1; fork(); \x1b[2J" + std::string(300, 'y');
  SourceLocator locator(source);
  EXPECT_EQ(locator.locate(source.find("fork")).column, 307);
  std::string excerpt = locator.excerpt(source.find("fork"));
  EXPECT_EQ(excerpt.substr(0, 3), "...");
  EXPECT_EQ(excerpt.substr(excerpt.size() - 3), "...");
  EXPECT_NE(excerpt.find("fork();"), std::string::npos);
  EXPECT_NE(excerpt.find("?[2J"), std::string::npos);
  EXPECT_EQ(excerpt.size(), 106u);
}

}  // namespace
}  // namespace kforge::evaluation
