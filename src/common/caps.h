// Caps on how many entries a repeated or map field of a request may carry,
// so no request can make a daemon allocate, log or loop without bound. One
// table, keyed by field name, for the agent API and CSI alike.
#pragma once

#include <cstddef>
#include <string_view>

#include "common/status.h"

namespace pillar::caps {

// Any repeated field the table does not name.
inline constexpr size_t kDefaultMaxItems = 64;

// The cap of a field, by its proto name ("parameters", "allowed_hosts").
size_t MaxItems(std::string_view field);

// INVALID_ARGUMENT naming `path` (e.g. "volume_capabilities[0].mount.mount_flags")
// when `count` exceeds the cap of `field`.
Status CheckCount(std::string_view path, std::string_view field, size_t count);

}  // namespace pillar::caps
