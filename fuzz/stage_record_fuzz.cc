// The node plugin's stage records are JSON files read back after a restart:
// any content gives an error or a record that survives a round trip.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "node/stage_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto record = pillar::node::StageRecordFromJson(text);
  if (!record.ok()) return 0;
  std::string again = pillar::node::StageRecordToJson(*record);
  auto reread = pillar::node::StageRecordFromJson(again);
  if (!reread.ok() || pillar::node::StageRecordToJson(*reread) != again) std::abort();
  return 0;
}
