#include "node/paths.h"

#include <string>

namespace pillar::node {

Status ValidateCleanPath(std::string_view field, std::string_view path) {
  std::string f(field);
  if (path.empty()) return InvalidArgument(f + " is required");
  if (path.size() > 4095) return InvalidArgument(f + " is too long");
  if (path[0] != '/') return InvalidArgument(f + " \"" + std::string(path) + "\" must be absolute");
  if (path.size() > 1 && path.back() == '/') {
    return InvalidArgument(f + " \"" + std::string(path) + "\" must not end in '/'");
  }
  for (char c : path) {
    if (c == '\0' || c == '\n') return InvalidArgument(f + " contains a NUL or newline");
  }
  size_t pos = 1;
  while (pos <= path.size() && path.size() > 1) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    std::string_view comp = path.substr(pos, end - pos);
    if (comp.empty() || comp == "." || comp == "..") {
      return InvalidArgument(f + " \"" + std::string(path) +
                             "\" is not clean (no '.', '..', '//')");
    }
    pos = end + 1;
  }
  return Status::Ok();
}

std::string ParentDir(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos || slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

}  // namespace pillar::node
