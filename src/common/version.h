// pillar's version, as every binary prints it with --version. The values are
// generated at configure time (cmake/version.cmake, src/common/version.cc.in)
// into one small source file, so a new commit recompiles that file alone.
#pragma once

#include <string_view>

namespace pillar {

// The CSI driver name: the CSIDriver object, the StorageClasses' provisioner,
// the API group of pillar's kinds.
inline constexpr std::string_view kDriverName = "pillar-csi.bhyoo.com";

// "0.1.0", or "0.1.0+g36291f8" when git named the commit at configure time
// (".dirty" appended when tracked files differed from it).
std::string_view Version();
// CMake's project version alone ("0.1.0").
std::string_view ProjectVersion();
// The full commit id, or empty when git could not name it.
std::string_view GitCommit();

}  // namespace pillar
