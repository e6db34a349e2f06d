// The node plugin's parsers of kernel and tool output must terminate
// without crashing on any bytes, and what they return must be consistent
// with their input.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "node/attach/iscsi.h"
#include "node/attach/nvme_sysfs.h"
#include "node/format.h"
#include "node/identity.h"
#include "node/mountinfo.h"
#include "node/paths.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string v(reinterpret_cast<const char*>(data), size);
  using namespace pillar::node;
  for (const auto& m : ParseMountInfo(v)) {
    // Unescaping only shrinks a field, and a parsed entry has a mount point
    // and a type.
    if (m.mount_point.size() > v.size() || m.source.size() > v.size()) std::abort();
    if (m.fs_type.empty() || m.mount_point.empty()) std::abort();
  }
  auto addr = ParseNvmeAddress(v);
  for (const auto& [k, val] : addr) {
    if (k.empty() || k.find(',') != std::string::npos || val.find(',') != std::string::npos) {
      std::abort();
    }
  }
  (void)IsNvmeNamespaceDevice(v);
  std::string iqn = ParseInitiatorName(v);
  if (iqn.find('\n') != std::string::npos || iqn.size() > v.size()) std::abort();
  for (const auto& [k, val] : ParseBlkidExport(v)) {
    if (k.empty() || k.find('\n') != std::string::npos) std::abort();
  }
  (void)ParseIpAddrJson(v);
  if (ValidateCleanPath("p", v).ok() && (v.find("/../") != std::string::npos || v[0] != '/')) {
    std::abort();
  }
  return 0;
}
