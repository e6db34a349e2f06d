// The CSI create-parameter parser takes a storage class's parameters as the
// CO passes them. The input is read as "key=value" lines; any map gives an
// error or parameters that name a valid agent and pool (and, for NFS, a
// root mode and owner chmod/chown can take), never a crash.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/validate.h"
#include "controller/csi_controller.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  google::protobuf::Map<std::string, std::string> params;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string line = text.substr(pos, eol - pos);
    size_t eq = line.find('=');
    if (eq != std::string::npos) params[line.substr(0, eq)] = line.substr(eq + 1);
    pos = eol + 1;
  }
  auto parsed = pillar::controller::ParseCreateParameters(params);
  if (!parsed.ok()) return 0;
  if (!pillar::validate::ObjectName("agent", parsed->agent_ref).ok() ||
      !pillar::validate::PoolName("pool", parsed->pool).ok() || parsed->port < 0 ||
      parsed->port > 65535) {
    std::abort();
  }
  // The NFS root goes to chmod/chown: a mode of at most 07777 and never the
  // id chown takes for "unchanged"; and only an NFS volume has one.
  if (parsed->nfs_root_mode > 07777 || parsed->nfs_root_uid == UINT32_MAX ||
      parsed->nfs_root_gid == UINT32_MAX) {
    std::abort();
  }
  if (parsed->protocol != pillar::Protocol::kNfs &&
      (params.count("nfsRootMode") != 0 || params.count("nfsRootOwner") != 0)) {
    std::abort();
  }
  return 0;
}
