#include "core/task.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "common/error.h"
#include "core/expression.h"

namespace kforge {

DType parse_dtype(const std::string& name) {
  if (name == "f32") return DType::f32;
  if (name == "f64") return DType::f64;
  if (name == "f16") return DType::f16;
  if (name == "bf16") return DType::bf16;
  if (name == "i32") return DType::i32;
  if (name == "i64") return DType::i64;
  if (name == "bool") return DType::b8;
  throw Error("unknown dtype '" + name +
              "' (expected one of f32, f64, f16, bf16, i32, i64, bool)");
}

std::string to_string(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::b8: return "bool";
  }
  return "unknown";
}

int dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::b8: return 1;
  }
  return 0;
}

bool is_floating(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16;
}

std::vector<int64_t> bind_shape(const TensorSpec& spec, const Workload& workload) {
  std::vector<int64_t> shape;
  shape.reserve(spec.shape.size());
  for (const std::string& dim : spec.shape) {
    int64_t value = 0;
    const char* end = dim.data() + dim.size();
    auto [ptr, ec] = std::from_chars(dim.data(), end, value);
    if (ec != std::errc() || ptr != end) {
      auto found = workload.dims.find(dim);
      if (found == workload.dims.end()) {
        throw Error("tensor '" + spec.name + "': dimension '" + dim +
                    "' is not bound by workload '" + workload.name + "'");
      }
      value = found->second;
    }
    if (value <= 0) {
      throw Error("tensor '" + spec.name + "': dimension '" + dim + "' is " +
                  std::to_string(value) + " in workload '" + workload.name +
                  "' (expected a positive integer)");
    }
    shape.push_back(value);
  }
  return shape;
}

DType element_dtype(const Task& task) {
  for (const TensorSpec& tensor : task.signature.tensors) {
    if (tensor.role == TensorRole::input) return tensor.dtype;
  }
  return DType::f32;
}

int64_t min_bytes_moved(const Signature& signature, const Workload& workload) {
  int64_t bytes = 0;
  for (const TensorSpec& tensor : signature.tensors) {
    int64_t elements = 1;
    for (int64_t d : bind_shape(tensor, workload)) elements *= d;
    bytes += elements * dtype_size(tensor.dtype);
  }
  return bytes;
}

std::string format_index(int64_t flat, const std::vector<int64_t>& shape) {
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d <= 0; })) {
    return "[" + std::to_string(flat) + "]";
  }
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  std::string text = "[";
  for (size_t d = 0; d < index.size(); ++d) {
    if (d) text += ", ";
    text += std::to_string(index[d]);
  }
  return text + "]";
}

int64_t bytes_per_call(const Task& task, const Workload& workload) {
  if (task.bytes_formula.empty()) return min_bytes_moved(task.signature, workload);
  return static_cast<int64_t>(evaluate_expression(task.bytes_formula, workload.dims));
}

std::optional<double> flops_per_call(const Task& task, const Workload& workload) {
  if (task.flops_formula.empty()) return std::nullopt;
  return evaluate_expression(task.flops_formula, workload.dims);
}

void to_json(nlohmann::json& j, const TensorSpec& t) {
  j = {{"name", t.name},
       {"role", t.role == TensorRole::input ? "input" : "output"},
       {"dtype", to_string(t.dtype)},
       {"shape", t.shape},
       {"strided", t.strided}};
  if (t.provided) j["provided"] = true;
}

void from_json(const nlohmann::json& j, TensorSpec& t) {
  t.name = j.at("name").get<std::string>();
  const std::string role = j.at("role").get<std::string>();
  if (role != "input" && role != "output") throw Error("tensor role '" + role + "'");
  t.role = role == "input" ? TensorRole::input : TensorRole::output;
  t.dtype = parse_dtype(j.at("dtype").get<std::string>());
  t.shape = j.at("shape").get<std::vector<std::string>>();
  t.strided = j.value("strided", false);
  t.provided = j.value("provided", false);
}

void to_json(nlohmann::json& j, const ScalarSpec& s) {
  j = {{"name", s.name}, {"dtype", to_string(s.dtype)}, {"value", s.value}};
}

void from_json(const nlohmann::json& j, ScalarSpec& s) {
  s.name = j.at("name").get<std::string>();
  s.dtype = parse_dtype(j.at("dtype").get<std::string>());
  s.value = j.at("value").get<double>();
}

void to_json(nlohmann::json& j, const Signature& s) {
  j = {{"tensors", s.tensors}, {"scalars", s.scalars}};
}

void from_json(const nlohmann::json& j, Signature& s) {
  s.tensors = j.at("tensors").get<std::vector<TensorSpec>>();
  s.scalars = j.at("scalars").get<std::vector<ScalarSpec>>();
}

void to_json(nlohmann::json& j, const Workload& w) {
  j = {{"name", w.name}, {"dims", w.dims}, {"timed", w.timed}};
}

void from_json(const nlohmann::json& j, Workload& w) {
  w.name = j.at("name").get<std::string>();
  w.dims = j.at("dims").get<std::map<std::string, int64_t>>();
  w.timed = j.value("timed", false);
}

void to_json(nlohmann::json& j, const Tolerance& t) {
  j = {{"rtol", t.rtol}, {"atol", t.atol}};
  if (t.normalized) j["normalized"] = *t.normalized;
  if (!t.workload_atol.empty()) j["workload_atol"] = t.workload_atol;
}

void from_json(const nlohmann::json& j, Tolerance& t) {
  t.rtol = j.at("rtol").get<double>();
  t.atol = j.at("atol").get<double>();
  if (auto found = j.find("normalized"); found != j.end()) t.normalized = found->get<double>();
  t.workload_atol.clear();
  if (auto found = j.find("workload_atol"); found != j.end()) {
    t.workload_atol = found->get<std::map<std::string, double>>();
  }
}

void to_json(nlohmann::json& j, const Problem& p) {
  j = {{"signature", p.signature}, {"workload", p.workload}};
}

void from_json(const nlohmann::json& j, Problem& p) {
  p.signature = j.at("signature").get<Signature>();
  p.workload = j.at("workload").get<Workload>();
}

}  // namespace kforge
