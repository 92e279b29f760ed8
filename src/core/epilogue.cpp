#include "core/epilogue.h"

#include <map>
#include <sstream>

#include "common/error.h"
#include "common/text.h"

namespace kforge {
namespace {

struct OpInfo {
  const char* cpp;  // the kf::ep type
  int scalars;      // how many scalar names follow the op's name
};

const std::map<std::string, OpInfo>& op_table() {
  static const std::map<std::string, OpInfo> table = {
      {"relu", {"Relu", 0}},           {"gelu", {"Gelu", 0}},
      {"gelu_tanh", {"GeluTanh", 0}},  {"sigmoid", {"Sigmoid", 0}},
      {"tanh", {"Tanh", 0}},           {"swish", {"Swish", 0}},
      {"mul", {"Mul", 1}},             {"div", {"Div", 1}},
      {"add", {"Add", 1}},             {"sub", {"Sub", 1}},
      {"leaky_relu", {"LeakyRelu", 1}}, {"scale_residual", {"ScaleResidual", 1}},
      {"clamp", {"", 2}},  // ClampMin{lo}|ClampMax{hi}
  };
  return table;
}

}  // namespace

std::vector<std::string> epilogue_op_patterns() {
  std::vector<std::string> patterns;
  for (const auto& [name, info] : op_table()) {
    std::string pattern = name;
    if (name == "clamp") {
      pattern += ":lo:hi";
    } else if (info.scalars == 1) {
      pattern += ":scalar";
    }
    patterns.push_back(pattern);
  }
  return patterns;
}

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
  std::vector<EpilogueOp> ops;
  for (size_t i = 0; i < chain.size(); ++i) {
    const std::string where = "epilogue[" + std::to_string(i) + "] '" + chain[i] + "'";
    const std::vector<std::string> parts = split(chain[i], ':');
    const auto found = parts.empty() ? op_table().end() : op_table().find(parts[0]);
    if (found == op_table().end()) {
      throw Error(where + ": unknown op (expected one of " + known + ")");
    }
    const int wanted = found->second.scalars;
    if (static_cast<int>(parts.size()) - 1 != wanted) {
      throw Error(where + ": '" + parts[0] + "' takes " + std::to_string(wanted) +
                  " scalar name" + (wanted == 1 ? "" : "s") + " after ':' (expected " +
                  (parts[0] == "clamp" ? "clamp:lo:hi" : wanted == 0 ? parts[0] : parts[0] + ":NAME") +
                  ")");
    }
    EpilogueOp op{parts[0], {}};
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
    define += std::string("kf::ep::") + info.cpp + "{" +
              (op.scalars.empty() ? "" : std::to_string(op.scalars.front())) + "}";
  }
  return define;
}

std::map<std::string, std::string> task_defines(const Task& task) {
  if (task.epilogue.empty()) return {};
  return {{"KF_EPILOGUE", epilogue_define(parse_epilogue(task.epilogue, task.signature))}};
}

}  // namespace kforge
