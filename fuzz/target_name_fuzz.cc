// TargetName is injective and AgentVolumeIdFromTarget is its exact inverse;
// decoding arbitrary names never crashes and never yields an unsafe id.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/target_name.h"
#include "common/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pillar;
  std::string v(reinterpret_cast<const char*>(data), size);
  if (pillar::validate::AgentVolumeId("f", v).ok()) {
    std::string name = TargetName(kDefaultNqnPrefix, v);
    if (AgentVolumeIdFromTarget(kDefaultNqnPrefix, name) != v) std::abort();
    if (name.size() <= 223 && !pillar::validate::Nqn("f", name).ok()) std::abort();
  }
  auto decoded = AgentVolumeIdFromTarget(kDefaultIqnPrefix, v);
  if (decoded && TargetName(kDefaultIqnPrefix, *decoded) != v) std::abort();
  return 0;
}
