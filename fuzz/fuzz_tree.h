// Helpers for fuzz targets that lay their input out as a file tree (configfs
// shapes): the input's lines, and files and symlinks written over whatever a
// previous run left.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace pillar::fuzz {

// The input split at '\n', padded or cut to exactly `n` values.
inline std::vector<std::string> Lines(const uint8_t* data, size_t size, size_t n) {
  std::vector<std::string> v;
  std::string text(reinterpret_cast<const char*>(data), size);
  for (size_t pos = 0; pos <= text.size();) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    v.push_back(text.substr(pos, eol - pos));
    pos = eol + 1;
  }
  v.resize(n);
  return v;
}

inline void Write(const std::string& path, const std::string& value) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << value;
}

inline void Link(const std::string& target, const std::string& link) {
  unlink(link.c_str());
  (void)symlink(target.c_str(), link.c_str());  // a target with a NUL is cut there
}

}  // namespace pillar::fuzz
