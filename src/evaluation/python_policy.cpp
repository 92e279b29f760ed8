#include "evaluation/python_policy.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <utility>

#include "common/error.h"
#include "evaluation/source_text.h"

namespace kforge::evaluation {
namespace {

using C = PolicyCategory;

// A Python source as the rules see it: comments removed, whitespace runs collapsed to one
// character ('\n' if the run held one), one origin offset per character. `text` keeps string
// literals; `code` has each literal, quotes included, replaced by '"' (not spaces: a blanked
// literal must not become a whitespace run that `\s*` after a keyword would consume, character
// by character, in libstdc++'s recursive matcher).
struct PythonText {
  std::string text;
  std::string code;
  std::vector<size_t> origin;
  struct Literal {
    size_t start = 0;  // offset of the first content character in the original source
    std::string content;
  };
  std::vector<Literal> multiline_literals;  // literals holding a newline (inline C++/CUDA)
};

class PythonLexer {
 public:
  explicit PythonLexer(std::string_view source) : source_(source) {}

  PythonText run() {
    size_t i = 0;
    while (i < source_.size()) {
      const char c = source_[i];
      if (c == '#') {
        while (i < source_.size() && source_[i] != '\n') ++i;
      } else if (size_t quote = literal_start(i); quote != std::string_view::npos) {
        i = literal(i, quote);
      } else {
        emit(c, c, i);
        ++i;
      }
    }
    return std::move(out_);
  }

 private:
  // The offset of the opening quote when a string literal (with an optional r/b/u/f prefix of up
  // to two letters, not the tail of a longer name) starts at `i`; npos otherwise.
  size_t literal_start(size_t i) const {
    if (i > 0 && is_identifier_char(source_[i - 1])) return std::string_view::npos;
    size_t j = i;
    while (j < source_.size() && j - i < 2 &&
           std::string_view("rRbBuUfF").find(source_[j]) != std::string_view::npos) {
      ++j;
    }
    if (j < source_.size() && (source_[j] == '\'' || source_[j] == '"')) return j;
    return std::string_view::npos;
  }

  // Consumes the literal whose prefix starts at `i` and whose quote is at `quote`; returns the
  // offset after it. An unterminated one-line literal ends at its line, a triple-quoted one at
  // the end of the source.
  size_t literal(size_t i, size_t quote) {
    for (; i < quote; ++i) emit(source_[i], source_[i], i);
    const char q = source_[quote];
    const bool triple = source_.compare(quote, 3, std::string(3, q)) == 0;
    const size_t open = triple ? 3 : 1;
    size_t j = quote + open;
    const size_t content_start = j;
    size_t content_end = source_.size();
    while (j < source_.size()) {
      if (source_[j] == '\\') {
        j += 2;
        continue;
      }
      if (!triple && source_[j] == '\n') {
        content_end = j;
        break;
      }
      if (source_[j] == q && (!triple || source_.compare(j, 3, std::string(3, q)) == 0)) {
        content_end = j;
        j += open;
        break;
      }
      ++j;
    }
    j = std::min(j, source_.size());
    content_end = std::min(content_end, source_.size());
    for (size_t k = quote; k < j; ++k) emit(source_[k], '"', k);
    const std::string_view content = source_.substr(content_start, content_end - content_start);
    if (content.find('\n') != std::string_view::npos) {
      out_.multiline_literals.push_back({content_start, std::string(content)});
    }
    return j;
  }

  void emit(char text_char, char code_char, size_t origin) {
    if (is_space(text_char) && !out_.text.empty() && is_space(out_.text.back())) {
      if (text_char == '\n') {
        out_.text.back() = '\n';
        if (is_space(out_.code.back())) out_.code.back() = '\n';
      }
      return;
    }
    out_.text.push_back(text_char);
    out_.code.push_back(code_char);
    out_.origin.push_back(origin);
  }

  std::string_view source_;
  PythonText out_;
};

struct RuleSpec {
  PolicyCategory category;
  bool on_text;         // match the text with literals (else the code without them)
  std::string pattern;  // ECMAScript, every repetition bounded; group 1, if any, is reported
  std::string why;
};

std::vector<RuleSpec> rule_specs() {
  const std::string kThreads =
      "starts a thread or process; kforge waits only for the call itself: compute in forward";
  const std::string kStreams =
      "makes or switches CUDA streams, events or graphs; launch on the current stream so that "
      "kforge's timing events see the work";
  const std::string kTampers =
      "changes or inspects what kforge measures with (clocks, synchronize, torch, its own "
      "modules, frames); the timings would be the candidate's word";
  const std::string kReachesOut =
      "reaches outside the module (files, environment, dynamic imports, network); a ModelNew "
      "reads only its inputs and parameters";
  return {
      {C::thread_creation, false,
       R"re(\b(?:import|from)\s+(threading|_thread|multiprocessing|concurrent|subprocess|)re"
       R"re(asyncio)\b)re", kThreads},
      {C::thread_creation, false, R"re(\b(threading|_thread|multiprocessing|subprocess)\s*\.)re",
       kThreads},
      {C::thread_creation, false,
       R"re(\bos\s*\.\s*(fork|forkpty|spawn\w{0,4}|posix_spawn\w{0,2}|system|popen|exec\w{0,3})\b)re",
       kThreads},
      {C::stream_creation, false,
       R"re(\bcuda\s*\.\s*(Stream|ExternalStream|stream|set_stream|StreamContext|Event|)re"
       R"re(CUDAGraph|graph|graphs|make_graphed_callables)\b)re", kStreams},
      {C::stream_creation, false,
       R"re(\bfrom\s+torch\s*\.\s*cuda\s+import\b[^\n]{0,200}?\b(Stream|ExternalStream|stream|)re"
       R"re(set_stream|Event|CUDAGraph|graph)\b)re", kStreams},
      {C::harness_tampering, false,
       R"re(\b((?:time\s*\.\s*(?:perf_counter|perf_counter_ns|time|time_ns|monotonic|)re"
       R"re(monotonic_ns|process_time|sleep)|(?:torch\s*\.\s*)?cuda\s*\.\s*(?:synchronize|)re"
       R"re(Event|current_stream|default_stream|Stream)|Event\s*\.\s*\w{1,40}|)re"
       R"re(torch\s*\.\s*Tensor\s*\.\s*\w{1,40}|torch\s*\.\s*\w{1,40}))\s*=(?!=))re",
       kTampers},
      {C::harness_tampering, false,
       R"re(\b(?:setattr|delattr)\s*\(\s*(time|torch|sys|builtins|kforge_torch|threading)\b)re",
       kTampers},
      {C::harness_tampering, false,
       R"re(\b(?:import|from)\s+(kforge_torch|builtins|gc|inspect|sys\s*\.\s*monitoring)\b|)re"
       R"re(\b(__builtins__)\b|\bsys\s*\.\s*(_getframe|settrace|setprofile|modules|meta_path|)re"
       R"re(path_hooks|addaudithook|monitoring)\b|\b(gc)\s*\.)re", kTampers},
      {C::file_and_environment, false,
       R"re((?:^|[^\w.])(open|exec|eval|compile|__import__|breakpoint)\s*\(|\bos\s*\.\s*)re"
       R"re((environ|getenv|putenv|unsetenv|remove|unlink|rename|listdir|walk|scandir|open|)re"
       R"re(fdopen|dup2?|write|read|chdir)\b|\b(?:import|from)\s+(socket|urllib|http|requests|)re"
       R"re(shutil|pathlib|ctypes|cffi|importlib|runpy|pickle|tempfile|glob|io|mmap)\b)re",
       kReachesOut},
      {C::file_and_environment, true, R"re(/(?:proc|dev|sys)/)re", kReachesOut},
      {C::process_control, false,
       R"re(\b(sys\s*\.\s*exit|os\s*\.\s*(?:_exit|kill|killpg|abort)|signal\s*\.\s*\w{1,40}|)re"
       R"re(atexit|faulthandler)\b|(?:^|[^\w.])(exit|quit)\s*\()re",
       "ends or signals the process; raise an exception instead"},
      {C::library_compute, true,
       R"re(\b(cublas\w{0,40}|cudnn\w{0,40}|cufft\w{0,40}|cusparse\w{0,40}|cusolver\w{0,40}|)re"
       R"re(cutlass|thrust\s*::|cute\s*::))re",
       "calls a CUDA library (cuBLAS, cuDNN, CUTLASS, Thrust, ...); write the kernel itself"},
  };
}

// std::regex special characters escaped, for an op or module name taken from the task.
std::string escape(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (std::string_view(R"(\^$.|?*+()[]{})").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::vector<RuleSpec> task_rules(const PythonScreen& screen) {
  std::vector<RuleSpec> rules;
  for (const std::string& op : screen.forbidden_ops) {
    const std::string why = "calls torch's own '" + op + "', the operator this task asks for; "
                            "a ModelNew that hands the whole operator to PyTorch is not a kernel";
    if (op == "@") {
      rules.push_back({C::library_compute, false, R"re([\w)\]]\s*(@)\s*[\w(])re", why});
      continue;
    }
    rules.push_back({C::library_compute, false, R"re(\.\s*()re" + escape(op) + R"re()\s*\()re",
                     why});
    rules.push_back({C::library_compute, false,
                     R"re(\bimport\b[^\n]{0,200}?\b()re" + escape(op) + R"re()\b)re", why});
    rules.push_back({C::library_compute, true,
                     R"re(\bgetattr\s*\([^\n]{0,100}?['"]()re" + escape(op) + R"re()['"])re",
                     why});
  }
  if (!screen.problem_module.empty()) {
    rules.push_back({C::reference_call, false,
                     R"re(\b(?:import|from)\s+()re" + escape(screen.problem_module) + R"re()\b)re",
                     "imports the problem module, the task's reference"});
  }
  return rules;
}

struct Hit {
  PolicyCategory category;
  size_t position;  // in the prepared text, then in the original source
  std::string why;
};

void find_all(const std::regex& regex, const std::string& text, const RuleSpec& rule,
              std::vector<Hit>& hits) {
  for (auto it = std::sregex_iterator(text.begin(), text.end(), regex);
       it != std::sregex_iterator(); ++it) {
    const std::smatch& match = *it;
    size_t group = 0;
    for (size_t g = 1; g < match.size(); ++g) {
      if (match[g].matched) {
        group = g;
        break;
      }
    }
    hits.push_back({rule.category, static_cast<size_t>(match.position(group)), rule.why});
  }
}

// `Model(...)` anywhere but in `class Model(...)`: calling (or subclassing) the reference.
void find_reference_calls(const std::string& code, std::vector<Hit>& hits) {
  static const std::regex call(R"re((\bclass\s)?\bModel\s*\()re");
  for (auto it = std::sregex_iterator(code.begin(), code.end(), call);
       it != std::sregex_iterator(); ++it) {
    if ((*it)[1].matched) continue;
    const size_t at = static_cast<size_t>(it->position(0));
    const size_t name = code.find("Model", at);
    hits.push_back({C::reference_call, name,
                    "calls Model, the task's reference; ModelNew must compute the result "
                    "itself"});
  }
}

// The multi-line literals (inline C++/CUDA of load_inline) under the native rules, library
// compute aside; their hits are placed at the literal's lines in the original source.
void screen_literals(const SourcePolicy& policy, const PythonText& prepared,
                     std::string_view backend, std::string_view source,
                     std::vector<PolicyViolation>& violations) {
  SourcePolicy native = policy;
  native.enabled.erase(C::library_compute);
  native.extra_forbidden.clear();
  SourceLocator locator(source);
  for (const PythonText::Literal& literal : prepared.multiline_literals) {
    const SourceLocation base = locator.locate(literal.start);
    for (PolicyViolation v : check_source(native, literal.content, backend)) {
      if (v.category == C::source_size) continue;  // the whole file's size is checked once
      v.column = v.line == 1 ? v.column + base.column - 1 : v.column;
      v.line += base.line - 1;
      v.rule = "inline source: " + v.rule;
      violations.push_back(std::move(v));
    }
  }
}

}  // namespace

std::vector<std::string> forbidden_torch_ops(const std::string& family,
                                             std::string_view problem_source) {
  using Ops = std::vector<std::string>;
  static const Ops softmax = {"softmax", "Softmax", "softmin", "Softmin", "log_softmax",
                              "LogSoftmax", "_softmax", "_log_softmax"};
  static const Ops gemv = {"matmul", "mm", "mv", "bmm", "addmm", "addmv", "linear", "Linear",
                           "einsum", "tensordot", "inner", "@"};
  static const std::map<std::string, Ops> by_family = {
      {"softmax", softmax},
      {"log_softmax", softmax},
      {"rmsnorm", {"rms_norm", "RMSNorm"}},
      {"rmsnorm_channels", {"rms_norm", "RMSNorm"}},
      {"layernorm", {"layer_norm", "LayerNorm", "native_layer_norm"}},
      {"gelu", {"gelu", "GELU"}},
      {"relu", {"relu", "relu_", "ReLU"}},
      {"silu", {"silu", "SiLU"}},
      {"gemv", gemv},
      {"gemv_t", gemv},
      {"attention", {"scaled_dot_product_attention", "MultiheadAttention",
                     "multi_head_attention_forward"}},
  };
  // Whole operators: a problem that calls one of a group asks for that operator.
  static const std::vector<Ops> whole_operators = {
      softmax,
      {"layer_norm", "LayerNorm", "native_layer_norm"},
      {"rms_norm", "RMSNorm"},
      {"group_norm", "GroupNorm"},
      {"batch_norm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d"},
      {"instance_norm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"},
      {"scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward"},
  };
  const auto mentions = [&](const std::string& name) {
    for (size_t at = problem_source.find(name); at != std::string_view::npos;
         at = problem_source.find(name, at + 1)) {
      const size_t end = at + name.size();
      if ((at == 0 || !is_identifier_char(problem_source[at - 1])) &&
          (end == problem_source.size() || !is_identifier_char(problem_source[end]))) {
        return true;
      }
    }
    return false;
  };
  Ops ops;
  const auto add = [&ops](const Ops& more) {
    for (const std::string& op : more) {
      if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
    }
  };
  if (auto it = by_family.find(family); it != by_family.end()) add(it->second);
  for (const Ops& group : whole_operators) {
    if (std::any_of(group.begin(), group.end(), mentions)) add(group);
  }
  return ops;
}

std::vector<PolicyViolation> check_python_source(const SourcePolicy& policy,
                                                 std::string_view source,
                                                 const PythonScreen& screen,
                                                 std::string_view backend) {
  SourceLocator locator(source);
  if (static_cast<int64_t>(source.size()) > policy.max_source_bytes) {
    return {{C::source_size, 1, 1,
             "source is " + std::to_string(source.size()) + " bytes, over the " +
                 std::to_string(policy.max_source_bytes) + "-byte limit",
             locator.excerpt(0)}};
  }
  const PythonText prepared = PythonLexer(source).run();
  const auto applies = [&](PolicyCategory category) {
    return policy.enabled.count(category) > 0 ||
           std::find(switchable_policy_categories().begin(), switchable_policy_categories().end(),
                     category) == switchable_policy_categories().end();
  };
  std::vector<Hit> hits;
  std::vector<RuleSpec> rules = rule_specs();
  for (RuleSpec& rule : task_rules(screen)) rules.push_back(std::move(rule));
  for (const RuleSpec& rule : rules) {
    if (!applies(rule.category)) continue;
    std::regex regex;
    try {
      regex = std::regex(rule.pattern);
    } catch (const std::regex_error& e) {  // a built-in rule, or an op name from the task
      throw Error("python screen: rule '" + rule.pattern + "' does not compile: " + e.what());
    }
    find_all(regex, rule.on_text ? prepared.text : prepared.code, rule, hits);
  }
  find_reference_calls(prepared.code, hits);
  for (const std::string& pattern : policy.extra_forbidden) {
    const std::regex regex =
        with_context("policy.forbid", [&] { return compile_task_pattern(pattern); });
    find_all(regex, prepared.text,
             {C::task_pattern, true, pattern,
              "matches the task's forbidden pattern '" + pattern + "'"},
             hits);
  }
  for (Hit& hit : hits) hit.position = prepared.origin[hit.position];
  std::vector<PolicyViolation> violations;
  for (Hit& hit : hits) {
    const SourceLocation at = locator.locate(hit.position);
    violations.push_back(
        {hit.category, at.line, at.column, std::move(hit.why), locator.excerpt(hit.position)});
  }
  screen_literals(policy, prepared, backend, source, violations);
  std::stable_sort(violations.begin(), violations.end(),
                   [](const PolicyViolation& a, const PolicyViolation& b) {
                     return std::pair(a.line, a.column) < std::pair(b.line, b.column);
                   });
  std::vector<PolicyViolation> kept;
  std::set<std::pair<int, PolicyCategory>> seen;
  for (PolicyViolation& v : violations) {
    if (kept.size() == kMaxReportedViolations) break;
    if (seen.insert({v.line, v.category}).second) kept.push_back(std::move(v));
  }
  return kept;
}

}  // namespace kforge::evaluation
