#include "agent/backends/backend.h"

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

}  // namespace pillar::agent
