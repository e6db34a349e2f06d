// The in-band credentials (DH-HMAC-CHAP keys, CHAP passwords) of the volumes
// this agent exports with auth=chap, kept so that the agent can rebuild an
// export after a restart or a module reload without the controller, which
// records only a digest. One file per volume, 0600, written atomically.
#pragma once

#include <mutex>
#include <optional>
#include <string>

#include "common/credentials.h"
#include "common/fs.h"
#include "common/protocol.h"
#include "common/status.h"

namespace pillar::agent {

constexpr const char* kDefaultCredentialsRoot = "/var/lib/pillar-csi/agent/credentials";

class CredentialStore {
 public:
  CredentialStore(Fs& fs, std::string root = kDefaultCredentialsRoot);

  // Replaces the volume's credentials when they differ; returns whether it wrote.
  StatusOr<bool> Put(const std::string& agent_volume_id, Protocol protocol, const Credentials& c);
  // nullopt when none are kept; INTERNAL naming the file (never its content)
  // when the file cannot be read or parsed.
  StatusOr<std::optional<Credentials>> Get(const std::string& agent_volume_id, Protocol protocol);
  // Absent is success.
  Status Remove(const std::string& agent_volume_id);

  // "<root>/<escaped id>.json", escaped as in TargetName.
  std::string PathOf(const std::string& agent_volume_id) const;

 private:
  Fs& fs_;
  std::string root_;
  std::mutex mu_;
};

}  // namespace pillar::agent
