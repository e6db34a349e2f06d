// A scratch directory for fuzz targets that read files: made once per
// process under /tmp, removed at exit.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace pillar::fuzz {

// `tag` names the target in the directory's name. The name is never
// destroyed, so the exit handler that removes the directory can still read it.
inline const std::string& TempDir(const char* tag) {
  static const std::string* const dir = [tag] {
    std::string tmpl = std::string("/tmp/pillar-fuzz-") + tag + "-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) std::abort();
    std::atexit([] { std::filesystem::remove_all(*dir); });
    return new std::string(tmpl);
  }();
  return *dir;
}

}  // namespace pillar::fuzz
