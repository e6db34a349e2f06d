#include "common/uuid.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <random>

namespace pillar {

std::string NewUuid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::array<uint8_t, 16> b{};
  for (size_t i = 0; i < b.size(); i += 8) {
    uint64_t v = rng();
    for (size_t j = 0; j < 8; ++j) b[i + j] = static_cast<uint8_t>(v >> (8 * j));
  }
  b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  char out[37];
  std::snprintf(out, sizeof(out),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

}  // namespace pillar
