#include "common/caps.h"

#include <string>
#include <utility>

namespace pillar::caps {
namespace {

// Generous for any real cluster, small enough to refuse garbage early.
constexpr std::pair<std::string_view, size_t> kMaxItems[] = {
    {"parameters", 64},           // storage class parameters, backend properties
    {"mutable_parameters", 64},   //
    {"secrets", 32},              //
    {"volume_context", 64},       //
    {"publish_context", 64},      //
    {"volume_capabilities", 16},  // one per access type and mode is plenty
    {"mount_flags", 32},          //
    {"requisite", 16},            // topology
    {"preferred", 16},            //
    {"segments", 16},             //
    {"accessible_topology", 16},  //
    {"allowed_hosts", 1024},      // the ACL of one export: every consumer node
};

}  // namespace

size_t MaxItems(std::string_view field) {
  for (const auto& [name, max] : kMaxItems) {
    if (name == field) return max;
  }
  return kDefaultMaxItems;
}

Status CheckCount(std::string_view path, std::string_view field, size_t count) {
  size_t max = MaxItems(field);
  if (count <= max) return Status::Ok();
  return InvalidArgument(std::string(path) + " has " + std::to_string(count) +
                         " entries; at most " + std::to_string(max) + " are accepted");
}

}  // namespace pillar::caps
