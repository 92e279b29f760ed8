// Reading kforge's HTML pages in tests: how often a text occurs, and one SVG chart by its id.
#pragma once

#include <string>

namespace kforge::testing {

/// How many times `what` occurs in `text` (overlapping occurrences counted).
inline size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// The chart `<svg id="ID" ...>` of `page` up to its closing tag; "" when the page has none.
inline std::string chart_of(const std::string& page, const std::string& id) {
  const size_t start = page.find("<svg id=\"" + id + "\"");
  if (start == std::string::npos) return "";
  return page.substr(start, page.find("</svg>", start) - start);
}

}  // namespace kforge::testing
