#include "cli/validators.h"

#include <exception>
#include <stdexcept>
#include <string>

namespace kforge::cli {

CLI::Validator positive_number(const std::string& hint) {
  return CLI::Validator(
      [hint](std::string& value) -> std::string {
        double number = 0.0;
        try {
          std::size_t used = 0;
          number = std::stod(value, &used);
          if (used != value.size()) throw std::invalid_argument(value);
        } catch (const std::exception&) {
          return "expected a positive number, got '" + value + "'";
        }
        if (!(number > 0.0)) {
          return "must be a positive number (got " + value + ")" + (hint.empty() ? "" : "; " + hint);
        }
        return "";
      },
      "POSITIVE");
}

}  // namespace kforge::cli
