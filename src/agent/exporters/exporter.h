// Writes one protocol's kernel target state directly (nvmet and LIO through
// configfs, knfsd through exportfs) and reports what the kernel actually has.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/credentials.h"
#include "common/protocol.h"
#include "common/status.h"
#include "common/target_name.h"

namespace pillar::agent {

struct ExportParams {
  std::string bind_address;
  int port = 0;
  bool acl_enabled = true;
  int in_capsule_data_size = 0;  // 0: leave the port's value alone
  // In-band authentication of the admitted hosts: kAuthNone or kAuthChap
  // (nvmet DH-HMAC-CHAP, LIO CHAP). Observed: kAuthChap when every admitted
  // host must authenticate, auth_digest the CredentialsDigest of what the
  // kernel holds when all admitted hosts share it (empty otherwise).
  std::string auth = kAuthNone;
  std::string auth_digest;
  // NFS only: map client root to the anonymous user (the default).
  bool root_squash = true;

  bool operator==(const ExportParams&) const = default;
};

// What one exporter must write into the kernel for one volume (the agent's
// side; the controller's DesiredExport is the intent it is derived from).
// `target_id` is derived from the agent volume id (see TargetName) so
// observation can map it back.
struct KernelExport {
  std::string agent_volume_id;  // "<pool>/<volume>"
  std::string target_id;        // NQN, IQN, or the exported directory for NFS
  std::string backing;          // block device (nvmet, LIO) or directory (NFS)
  ExportParams params;
  std::set<std::string> allowed_hosts;  // host NQNs, initiator IQNs, client IPs
  // With params.auth == kAuthChap: what every allowed host must prove. Secret.
  Credentials credentials;
};

// What the kernel has; fields that could not be read stay empty.
struct ActualExport {
  std::string agent_volume_id;
  std::string target_id;
  std::string backing;
  ExportParams params;
  std::set<std::string> allowed_hosts;
  bool enabled = false;
  // What the kernel has that no KernelExport can produce (linked to two
  // ports, a foreign LUN, an extra namespace...): non-empty means drift even
  // when the fields above match, and Apply removes it.
  std::vector<std::string> drift;
};

// One volume of a batch (Exporter::ApplyMany): what to converge, where its
// change lines go, and its own outcome.
struct ApplyItem {
  const KernelExport* want = nullptr;
  std::vector<std::string>* changes = nullptr;
  Status status;
};

class Exporter {
 public:
  virtual ~Exporter() = default;
  virtual Protocol protocol() const = 0;

  // Converges the kernel to exactly `want` for this volume only: creates what
  // is missing, fixes what differs, removes ACL entries not in the set.
  // Appends one human-readable line per kernel change to `changes`.
  virtual Status Apply(const KernelExport& want, std::vector<std::string>* changes) = 0;

  // Converges many volumes; each item's status is what Apply would have
  // answered for it, and one item's failure leaves the others alone. The
  // default applies them one after the other (configfs work is per volume
  // anyway); an exporter whose tool rewrites a whole table (exportfs)
  // overrides it to run that tool once per batch. No volume may appear twice.
  virtual void ApplyMany(std::vector<ApplyItem>& items) {
    for (auto& item : items) item.status = Apply(*item.want, item.changes);
  }

  // The export of one volume, or nullopt when the kernel has none.
  virtual StatusOr<std::optional<ActualExport>> Get(const std::string& agent_volume_id) = 0;

  // Every export of this protocol that pillar owns (matched by name prefix).
  virtual StatusOr<std::vector<ActualExport>> List() = 0;

  // Removes the volume's export entirely; absent is success.
  virtual Status Remove(const std::string& agent_volume_id, std::vector<std::string>* changes) = 0;

  // A token that changes when the kernel target state was reset under us
  // (module reload, nfsd restart), or empty when the target is not loaded.
  virtual std::string StateToken() = 0;
};

}  // namespace pillar::agent
