#include "common/protocol.h"

namespace pillar {

const char* ProtocolName(Protocol p) {
  switch (p) {
    case Protocol::kNvmeofTcp:
      return "nvmeof-tcp";
    case Protocol::kIscsi:
      return "iscsi";
    case Protocol::kNfs:
      return "nfs";
  }
  return "unknown";
}

StatusOr<Protocol> ParseProtocol(std::string_view field, std::string_view name) {
  for (Protocol p : kAllProtocols) {
    if (name == ProtocolName(p)) return p;
  }
  return InvalidArgument(std::string(field) + " \"" + std::string(name) +
                         "\" must be nvmeof-tcp, iscsi or nfs");
}

int DefaultPort(Protocol p) {
  switch (p) {
    case Protocol::kNvmeofTcp:
      return 4420;
    case Protocol::kIscsi:
      return 3260;
    case Protocol::kNfs:
      return 2049;
  }
  return 0;
}

}  // namespace pillar
