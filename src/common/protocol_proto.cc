#include "common/protocol_proto.h"

namespace pillar {

namespace av1 = pillar::agent::v1;

av1::Protocol ToProto(Protocol p) {
  switch (p) {
    case Protocol::kNvmeofTcp:
      return av1::PROTOCOL_NVMEOF_TCP;
    case Protocol::kIscsi:
      return av1::PROTOCOL_ISCSI;
    case Protocol::kNfs:
      return av1::PROTOCOL_NFS;
  }
  return av1::PROTOCOL_UNSPECIFIED;
}

StatusOr<Protocol> FromProto(std::string_view field, av1::Protocol p) {
  switch (p) {
    case av1::PROTOCOL_NVMEOF_TCP:
      return Protocol::kNvmeofTcp;
    case av1::PROTOCOL_ISCSI:
      return Protocol::kIscsi;
    case av1::PROTOCOL_NFS:
      return Protocol::kNfs;
    default:
      return InvalidArgument(std::string(field) + " must be nvmeof-tcp, iscsi or nfs");
  }
}

}  // namespace pillar
