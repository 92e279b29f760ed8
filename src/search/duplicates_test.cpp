#include "search/duplicates.h"

#include <gtest/gtest.h>

namespace kforge::search {
namespace {

compile::CompileJob job(std::string source, std::string name = "kernel.cpp") {
  compile::CompileJob j;
  j.backend = "cpu";
  j.source = std::move(source);
  j.source_name = std::move(name);
  j.defines = {{"KF_VEC", "4"}};
  return j;
}

TEST(NormalizedSourceTest, CppCommentsAndWhitespaceRunsGo) {
  const std::string a = "int  f(int x) {\n  return x+1;  // add one\n}\n";
  const std::string b = "/* header */\nint f(int x)   {\n\n\treturn x+1; /* same */\n}";
  EXPECT_EQ(normalized_source(a, SourceLanguage::cpp), "int f(int x) { return x+1; }\n");
  EXPECT_EQ(normalized_source(a, SourceLanguage::cpp), normalized_source(b, SourceLanguage::cpp));
}

TEST(NormalizedSourceTest, CppLiteralsAndLineStructureAreKept) {
  // Spaces inside a string literal, a comment marker inside one, and a raw string are the
  // program's text; a preprocessor line still ends where it ended (other line breaks are
  // whitespace).
  EXPECT_EQ(normalized_source("s = \"a  b // c\";", SourceLanguage::cpp), "s = \"a  b // c\";\n");
  EXPECT_EQ(normalized_source("s = R\"x(a  /* b */ )\" c)x\";", SourceLanguage::cpp),
            "s = R\"x(a  /* b */ )\" c)x\";\n");
  EXPECT_EQ(normalized_source("c = ' ';  n = 1'000;", SourceLanguage::cpp),
            "c = ' '; n = 1'000;\n");
  EXPECT_NE(normalized_source("#define A 1\nint x;", SourceLanguage::cpp),
            normalized_source("#define A 1 int x;", SourceLanguage::cpp));
  EXPECT_EQ(normalized_source("int a;\n  #include <x.h>\nint b;\n", SourceLanguage::cpp),
            "int a;\n#include <x.h>\nint b;\n");
  // A backslash continues a directive on the next line.
  EXPECT_EQ(normalized_source("#define F(x) \\\n  (x)\nint b;", SourceLanguage::cpp),
            "#define F(x) \\\n(x)\nint b;\n");
  // a/**/b is two tokens, ab one.
  EXPECT_EQ(normalized_source("a/**/b", SourceLanguage::cpp), "a b\n");
}

TEST(NormalizedSourceTest, PythonKeepsIndentationAndStrings) {
  const std::string a = "class ModelNew:\n    def forward(self, x):  # run\n        return x  *  2\n";
  const std::string b = "# a comment\nclass ModelNew:\n\n    def forward(self, x):\n"
                        "        return x * 2   \n";
  EXPECT_EQ(normalized_source(a, SourceLanguage::python),
            "class ModelNew:\n    def forward(self, x):\n        return x * 2\n");
  EXPECT_EQ(normalized_source(a, SourceLanguage::python),
            normalized_source(b, SourceLanguage::python));
  // Indentation is Python's block structure: a different indentation is another program.
  EXPECT_NE(normalized_source("if a:\n    b()\n    c()\n", SourceLanguage::python),
            normalized_source("if a:\n    b()\nc()\n", SourceLanguage::python));
  EXPECT_EQ(normalized_source("s = '''a  # not\n  comment'''", SourceLanguage::python),
            "s = '''a  # not\n  comment'''\n");
}

TEST(DuplicateKeyTest, SameProgramSameKeyOtherwiseNot) {
  const compile::CompileJob base = job("int f() { return 1; }\n");
  EXPECT_EQ(duplicate_key(base), duplicate_key(job("// again\nint f()  {\n return 1;\n}\n")));
  compile::CompileJob other_defines = base;
  other_defines.defines["KF_VEC"] = "8";
  EXPECT_NE(duplicate_key(base), duplicate_key(other_defines));
  compile::CompileJob more_defines = base;
  more_defines.defines["KF_UNROLL"] = "2";
  EXPECT_NE(duplicate_key(base), duplicate_key(more_defines));
  compile::CompileJob cuda = base;
  cuda.backend = "cuda";
  EXPECT_NE(duplicate_key(base), duplicate_key(cuda));
  EXPECT_NE(duplicate_key(base), duplicate_key(job("int f() { return 2; }\n")));
}

TEST(DuplicateKeyTest, PythonCandidatesAreNormalizedAsPython) {
  EXPECT_EQ(language_of("model_new.py"), SourceLanguage::python);
  EXPECT_EQ(language_of("rows.cu"), SourceLanguage::cpp);
  EXPECT_EQ(duplicate_key(job("x = 1  # one\n", "c.py")), duplicate_key(job("x = 1\n", "c.py")));
  // '#' starts a preprocessor line in C++, a comment in Python: the same text keys differently.
  EXPECT_NE(duplicate_key(job("x = 1\n", "c.py")), duplicate_key(job("x = 1\n", "c.cpp")));
}

}  // namespace
}  // namespace kforge::search
