#include "worker/provided_inputs.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "common/mapped_file.h"
#include "common/parallel_copy.h"

namespace kforge::worker {

std::string provided_input_file(const std::string& dir, const std::string& workload,
                                uint64_t seed, int tensor_index) {
  return (std::filesystem::path(dir) /
          (workload + "." + std::to_string(seed) + "." + std::to_string(tensor_index) + ".bin"))
      .string();
}

std::vector<int> provided_tensors(const Signature& signature) {
  std::vector<int> found;
  for (size_t i = 0; i < signature.tensors.size(); ++i) {
    if (signature.tensors[i].provided) found.push_back(static_cast<int>(i));
  }
  return found;
}

void read_provided_input(const std::string& dir, const std::string& workload, uint64_t seed,
                         int tensor_index, const std::string& tensor_name, std::byte* out,
                         int64_t bytes) {
  const std::string what = "input '" + tensor_name + "' (provided by the reference)";
  if (dir.empty()) {
    throw Error(what + ": the request names no provided_dir to read it from");
  }
  const std::string path = provided_input_file(dir, workload, seed, tensor_index);
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(what + ": cannot read " + path + ": " + ec.message());
  if (static_cast<int64_t>(size) != bytes) {
    throw Error(what + ": " + path + " has " + std::to_string(size) + " bytes, expected " +
                std::to_string(bytes) + " (the tensor's elements x dtype size at workload '" +
                workload + "')");
  }
  if (bytes == 0) return;
  const MappedFile file(path, MappedFile::Mode::read);
  parallel_copy(out, file.data(), bytes);
}

}  // namespace kforge::worker
