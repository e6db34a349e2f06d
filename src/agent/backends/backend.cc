#include "agent/backends/backend.h"

#include <cstdio>

namespace pillar::agent {

const char* VolumeModeName(VolumeMode mode) {
  switch (mode) {
    case VolumeMode::kBlock:
      return "block";
    case VolumeMode::kFilesystem:
      return "filesystem";
  }
  return "unknown";
}

std::string OctalMode(uint32_t mode) {
  char octal[16];
  std::snprintf(octal, sizeof(octal), "%04o", mode);
  return octal;
}

std::string DescribeVolumeRoot(const VolumeRoot& root) {
  return "mode " + OctalMode(root.mode) + ", owner " + std::to_string(root.uid) + ":" +
         std::to_string(root.gid);
}

std::string OriginOf(const std::string& pool, VolumeSource::Kind kind, const std::string& name) {
  return std::string(kind == VolumeSource::Kind::kSnapshot ? "snapshot " : "volume ") + pool + "/" +
         name;
}

}  // namespace pillar::agent
