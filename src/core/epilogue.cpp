#include "core/epilogue.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "common/error.h"
#include "common/text.h"

namespace kforge {
namespace {

struct OpInfo {
  const char* cpp;       // the kf::ep type
  int scalars;           // how many scalar names follow the op's name
  bool channel = false;  // reads one channel tensor (named after ':') instead of scalars
  bool branch = false;   // combines the value with a chain of it: "mul_branch(softplus,tanh)"
};

const std::map<std::string, OpInfo>& op_table() {
  static const std::map<std::string, OpInfo> table = {
      {"relu", {"Relu", 0}},           {"gelu", {"Gelu", 0}},
      {"gelu_tanh", {"GeluTanh", 0}},  {"sigmoid", {"Sigmoid", 0}},
      {"tanh", {"Tanh", 0}},           {"swish", {"Swish", 0}},
      {"mul", {"Mul", 1}},             {"div", {"Div", 1}},
      {"add", {"Add", 1}},             {"sub", {"Sub", 1}},
      {"leaky_relu", {"LeakyRelu", 1}}, {"scale_residual", {"ScaleResidual", 1}},
      {"hardswish", {"Hardswish", 0}}, {"hardsigmoid", {"Hardsigmoid", 0}},
      {"softplus", {"Softplus", 0}},   {"mish", {"Mish", 0}},
      {"elu", {"Elu", 1}},             {"selu", {"Selu", 0}},
      {"clamp", {"", 2}},  // ClampMin{lo}|ClampMax{hi}
      {"add_channel", {"AddChannel", 0, true}}, {"sub_channel", {"SubChannel", 0, true}},
      {"mul_channel", {"MulChannel", 0, true}}, {"div_channel", {"DivChannel", 0, true}},
      {"add_branch", {"AddBranch", 0, false, true}}, {"mul_branch", {"MulBranch", 0, false, true}},
      {"sub_branch", {"SubBranch", 0, false, true}}, {"rsub_branch", {"RsubBranch", 0, false, true}},
      {"div_branch", {"DivBranch", 0, false, true}}, {"rdiv_branch", {"RdivBranch", 0, false, true}},
  };
  return table;
}

std::vector<std::string> inputs_of(const Signature& signature) {
  std::vector<std::string> inputs;
  for (const TensorSpec& t : signature.tensors) {
    if (t.role == TensorRole::input) inputs.push_back(t.name);
  }
  return inputs;
}

// The index, among the chain's channel tensors (`tensors`, appended to on first use), of the
// input tensor a channel op names.
int channel_tensor(const std::string& where, const std::vector<std::string>& parts,
                   const Signature& signature, std::vector<std::string>& tensors) {
  if (parts.size() != 2) {
    throw Error(where + ": '" + parts[0] + "' takes 1 tensor name after ':' (expected " +
                parts[0] + ":TENSOR, an input with one value per output channel)");
  }
  const std::vector<std::string> inputs = inputs_of(signature);
  if (std::find(inputs.begin(), inputs.end(), parts[1]) == inputs.end()) {
    throw Error(where + ": no input tensor named '" + parts[1] + "'");
  }
  const auto known = std::find(tensors.begin(), tensors.end(), parts[1]);
  if (known != tensors.end()) return static_cast<int>(known - tensors.begin());
  if (tensors.size() >= kMaxChannelTensors) {
    throw Error(where + ": a chain reads at most " + std::to_string(kMaxChannelTensors) +
                " channel tensors");
  }
  tensors.push_back(parts[1]);
  return static_cast<int>(tensors.size()) - 1;
}

// A kernel finds the channel tensors as its last inputs (kernels/common/epilogue.h).
void check_channel_tensors_last(const std::vector<std::string>& tensors,
                                const Signature& signature) {
  if (tensors.empty()) return;
  const std::vector<std::string> inputs = inputs_of(signature);
  const std::vector<std::string> last(inputs.end() - static_cast<long>(tensors.size()),
                                      inputs.end());
  if (last != tensors) {
    std::string named;
    for (const std::string& t : tensors) named += (named.empty() ? "" : ", ") + t;
    throw Error("epilogue: the channel tensors (" + named +
                ") must be the signature's last inputs, in the order the chain first reads them");
  }
}

}  // namespace

std::vector<std::string> epilogue_op_patterns() {
  std::vector<std::string> patterns;
  for (const auto& [name, info] : op_table()) {
    std::string pattern = name;
    if (name == "clamp") {
      pattern += ":lo:hi";
    } else if (info.channel) {
      pattern += ":tensor";
    } else if (info.branch) {
      pattern += "(op,op,...)";
    } else if (info.scalars == 1) {
      pattern += ":scalar";
    }
    patterns.push_back(pattern);
  }
  return patterns;
}

namespace {

// The ops of a branch's chain, "softplus,tanh" in "mul_branch(softplus,tanh)": split at the
// commas outside parentheses.
std::vector<std::string> branch_chain(const std::string& inner) {
  std::vector<std::string> chain;
  int depth = 0;
  std::string current;
  for (char ch : inner) {
    if (ch == ',' && depth == 0) {
      chain.push_back(current);
      current.clear();
      continue;
    }
    depth += ch == '(' ? 1 : ch == ')' ? -1 : 0;
    current += ch;
  }
  chain.push_back(current);
  return chain;
}

// Parses `chain` (entries named `where_prefix`[i]), appending the channel tensors it reads to
// `tensors` in order of first use; a branch's chain is parsed in place, so its tensors count
// where the branch stands.
std::vector<EpilogueOp> parse_ops(const std::vector<std::string>& chain, const Signature& signature,
                                  const std::string& where_prefix, const std::string& known,
                                  std::vector<std::string>& tensors) {
  std::vector<EpilogueOp> ops;
  for (size_t i = 0; i < chain.size(); ++i) {
    const std::string where = where_prefix + "[" + std::to_string(i) + "] '" + chain[i] + "'";
    const size_t open = chain[i].find('(');
    if (open != std::string::npos) {
      const std::string name = chain[i].substr(0, open);
      const auto found = op_table().find(name);
      if (found == op_table().end() || !found->second.branch) {
        throw Error(where + ": only a branch op (add_branch, mul_branch, sub_branch, "
                            "rsub_branch, div_branch, rdiv_branch) takes a chain in parentheses");
      }
      if (chain[i].back() != ')' || open + 2 > chain[i].size() - 1) {
        throw Error(where + ": expected " + name + "(op,op,...) with a non-empty chain");
      }
      EpilogueOp op{name, {}, -1, {}};
      op.branch = parse_ops(branch_chain(chain[i].substr(open + 1, chain[i].size() - open - 2)),
                            signature, where + " branch", known, tensors);
      ops.push_back(std::move(op));
      continue;
    }
    const std::vector<std::string> parts = split(chain[i], ':');
    const auto found = parts.empty() ? op_table().end() : op_table().find(parts[0]);
    if (found == op_table().end()) {
      throw Error(where + ": unknown op (expected one of " + known + ")");
    }
    if (found->second.branch) {
      throw Error(where + ": '" + parts[0] + "' takes a chain in parentheses (expected " +
                  parts[0] + "(op,op,...))");
    }
    EpilogueOp op{parts[0], {}, -1, {}};
    if (found->second.channel) {
      op.tensor = channel_tensor(where, parts, signature, tensors);
      ops.push_back(std::move(op));
      continue;
    }
    const int wanted = found->second.scalars;
    if (static_cast<int>(parts.size()) - 1 != wanted) {
      throw Error(where + ": '" + parts[0] + "' takes " + std::to_string(wanted) +
                  " scalar name" + (wanted == 1 ? "" : "s") + " after ':' (expected " +
                  (parts[0] == "clamp" ? "clamp:lo:hi" : wanted == 0 ? parts[0] : parts[0] + ":NAME") +
                  ")");
    }
    for (size_t p = 1; p < parts.size(); ++p) {
      int index = -1;
      for (size_t s = 0; s < signature.scalars.size(); ++s) {
        if (signature.scalars[s].name == parts[p]) index = static_cast<int>(s);
      }
      if (index < 0) {
        throw Error(where + ": no scalar named '" + parts[p] + "' (add it under [[scalars]])");
      }
      op.scalars.push_back(index);
    }
    ops.push_back(std::move(op));
  }
  return ops;
}

}  // namespace

std::vector<EpilogueOp> parse_epilogue(const std::vector<std::string>& chain,
                                       const Signature& signature) {
  std::string known;
  for (const std::string& pattern : epilogue_op_patterns()) {
    known += (known.empty() ? "" : ", ") + pattern;
  }
  // kernels/common/epilogue.h hands a kernel at most kf::ep::kMaxScalars (24) scalars.
  constexpr size_t kMaxScalars = 24;
  if (!chain.empty() && signature.scalars.size() > kMaxScalars) {
    throw Error("epilogue: the task has " + std::to_string(signature.scalars.size()) +
                " scalars; a kernel with an epilogue takes at most " +
                std::to_string(kMaxScalars));
  }
  std::vector<std::string> tensors;  // channel tensors in order of first use
  std::vector<EpilogueOp> ops = parse_ops(chain, signature, "epilogue", known, tensors);
  check_channel_tensors_last(tensors, signature);
  return ops;
}

std::string epilogue_define(const std::vector<EpilogueOp>& ops) {
  if (ops.empty()) return "kf::ep::Identity{}";
  std::string define;
  for (const EpilogueOp& op : ops) {
    if (!define.empty()) define += "|";
    if (op.name == "clamp") {
      define += "kf::ep::ClampMin{" + std::to_string(op.scalars.at(0)) + "}|kf::ep::ClampMax{" +
                std::to_string(op.scalars.at(1)) + "}";
      continue;
    }
    const OpInfo& info = op_table().at(op.name);
    if (info.branch) {  // kf::ep::MulBranch{kf::ep::Softplus{}|kf::ep::Tanh{}}
      define += std::string("kf::ep::") + info.cpp + "{" + epilogue_define(op.branch) + "}";
      continue;
    }
    const int index = info.channel ? op.tensor : op.scalars.empty() ? -1 : op.scalars.front();
    define += std::string("kf::ep::") + info.cpp + "{" +
              (index < 0 ? "" : std::to_string(index)) + "}";
  }
  return define;
}

int channel_tensor_count(const std::vector<EpilogueOp>& ops) {
  int count = 0;
  for (const EpilogueOp& op : ops) {
    count = std::max({count, op.tensor + 1, channel_tensor_count(op.branch)});
  }
  return count;
}

std::map<std::string, std::string> task_defines(const Task& task) {
  if (task.epilogue.empty()) return {};
  const std::vector<EpilogueOp> ops = parse_epilogue(task.epilogue, task.signature);
  std::map<std::string, std::string> defines{{"KF_EPILOGUE", epilogue_define(ops)}};
  if (const int tensors = channel_tensor_count(ops); tensors > 0) {
    defines["KF_EPILOGUE_TENSORS"] = std::to_string(tensors);
  }
  return defines;
}

}  // namespace kforge
