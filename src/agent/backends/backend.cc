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

std::string DescribeVolumeRoot(const VolumeRoot& root) {
  char mode[16];
  std::snprintf(mode, sizeof(mode), "%04o", root.mode);
  return std::string("mode ") + mode + ", owner " + std::to_string(root.uid) + ":" +
         std::to_string(root.gid);
}

}  // namespace pillar::agent
