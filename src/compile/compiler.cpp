#include "compile/compiler.h"

#include <cctype>

namespace kforge::compile {

std::string declared_cuda_arch(std::string_view source) {
  constexpr std::string_view kMarker = "// kforge: nvcc target ";
  size_t at = 0;
  while ((at = source.find(kMarker, at)) != std::string_view::npos) {
    const bool line_start = at == 0 || source[at - 1] == '\n';
    size_t end = at + kMarker.size();
    while (end < source.size() && (std::isalnum(static_cast<unsigned char>(source[end])) ||
                                   source[end] == '_')) {
      ++end;
    }
    const std::string_view target = source.substr(at + kMarker.size(), end - at - kMarker.size());
    if (line_start && target.size() > 4 && target.substr(0, 3) == "sm_" && target.back() == 'a') {
      return std::string(target);
    }
    at = end;
  }
  return "";
}

}  // namespace kforge::compile
