// Every validator must terminate without crashing on any bytes, and whatever
// it accepts must be free of the characters that could escape a path or
// argv position.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/validate.h"

namespace {

void MustBeSafe(const std::string& v) {
  for (char c : v) {
    if (c == '\0' || c == '\n' || c == ' ' || c == '\t' || c == ';' || c == '$' || c == '`') {
      std::abort();
    }
  }
  if (v.empty() || v[0] == '-' || v.find("..") == 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string v(reinterpret_cast<const char*>(data), size);
  using namespace pillar::validate;
  if (Nqn("f", v).ok()) MustBeSafe(v);
  if (Iqn("f", v).ok()) MustBeSafe(v);
  if (VolumeName("f", v).ok()) {
    MustBeSafe(v);
    if (v.find('/') != std::string::npos || v == "." || v == "..") std::abort();
  }
  if (PoolName("f", v).ok()) {
    MustBeSafe(v);
    if (v.find("/.") != std::string::npos || v.front() == '/' || v.back() == '/') std::abort();
  }
  if (AgentVolumeId("f", v).ok()) MustBeSafe(v);
  if (IpOrCidr("f", v).ok()) MustBeSafe(v);
  if (Uuid("f", v).ok() && v.size() != 36) std::abort();
  if (ObjectName("f", v).ok()) MustBeSafe(v);
  return 0;
}
