#include "node/paths.h"

#include <string>

namespace pillar::node {

std::string ParentDir(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos || slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

}  // namespace pillar::node
