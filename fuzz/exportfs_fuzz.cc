// The exportfs -v parser takes whatever the tool prints: it must never crash,
// and every entry it returns must name an absolute path and a client.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/exporters/nfs_exporter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = pillar::agent::ParseExportfsVerbose(text);
  if (!parsed.ok()) return 0;
  for (const auto& e : *parsed) {
    if (e.path.empty() || e.path[0] != '/' || e.client.empty()) std::abort();
  }
  return 0;
}
