// Random (version 4) UUIDs for lifecycle identities and boot epochs.
#pragma once

#include <string>

namespace pillar {

std::string NewUuid();

}  // namespace pillar
