// Small helpers shared by the sysfs readers of every protocol.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/fs.h"

namespace pillar::node {

// Whitespace trimmed from both ends (sysfs attributes end in '\n').
std::string TrimSpace(std::string_view s);

// A sysfs attribute, trimmed; nullopt when it cannot be read.
std::optional<std::string> ReadAttr(Fs& fs, const std::string& path);

// Size in bytes of block/<name> from its "size" attribute (512-byte sectors).
std::optional<int64_t> BlockDeviceSizeBytes(Fs& fs, const std::string& sysfs_root,
                                            const std::string& name);

// A numeric IPv4/IPv6 address in canonical text form (so "fd00:0::1" and
// "fd00::1" compare equal); the input unchanged when it is not an address.
std::string CanonicalIp(const std::string& ip);

bool AllDigits(std::string_view s);

}  // namespace pillar::node
