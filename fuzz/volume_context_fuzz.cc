// The volume context contract (common/volume_context.h): the node plugin
// parses whatever context the CO hands it. The input is read as "key=value"
// lines; any map gives an error or a context whose endpoint is whole and
// valid for its protocol, and which formats back to a map that parses to the
// same context (one format, one parse); never a crash.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/validate.h"
#include "common/volume_context.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  pillar::ContextMap map;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string line = text.substr(pos, eol - pos);
    size_t eq = line.find('=');
    if (eq != std::string::npos) map[line.substr(0, eq)] = line.substr(eq + 1);
    pos = eol + 1;
  }
  auto parsed = pillar::ParseVolumeContext(map);
  if (!parsed.ok()) return 0;
  if (parsed->target_id.empty() || !pillar::validate::IpAddress("a", parsed->address).ok() ||
      parsed->port < 0 || parsed->port > 65535 ||
      (parsed->port == 0 && parsed->protocol != pillar::Protocol::kNfs)) {
    std::abort();
  }
  auto again = pillar::ParseVolumeContext(pillar::FormatVolumeContext(*parsed));
  if (!again.ok() || !(*again == *parsed)) std::abort();
  return 0;
}
