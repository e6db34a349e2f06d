// Paths that reach a syscall or a command line: absolute and clean.
#pragma once

#include <string_view>

#include "common/status.h"
#include "common/validate.h"

namespace pillar::node {

// Absolute, no "." or ".." component, no empty component ("//"), no trailing
// '/', no NUL or newline, at most 4095 bytes. INVALID_ARGUMENT names the field.
inline Status ValidateCleanPath(std::string_view field, std::string_view path) {
  return validate::CleanPath(field, path);
}

// "/a/b/c" -> "/a/b"; "/a" -> "/".
std::string ParentDir(std::string_view path);

}  // namespace pillar::node
