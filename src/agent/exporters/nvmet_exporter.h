// Exports block volumes over NVMe/TCP through the kernel's nvmet configfs
// tree: one subsystem per volume (named TargetName(nqn_prefix, volume id))
// with namespace 1 on the backing device, linked to a TCP port, and an ACL of
// allowed_hosts links or attr_allow_any_host=1. With auth=chap every allowed
// host gets the volume's DH-HMAC-CHAP key (hosts/<nqn>/dhchap_key) before its link.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/exporters/configfs_util.h"
#include "agent/exporters/exporter.h"
#include "common/fs.h"

namespace pillar::agent {

class NvmetExporter : public Exporter {
 public:
  // Ports pillar creates take ids from this range. nvmet ports carry no tag
  // of their own, and nvmetcli and hand-written setups number theirs from 1,
  // so a disjoint range is how pillar knows which ports it may delete once
  // empty; a foreign port that matches an export's address is reused as is.
  static constexpr int kFirstPortId = 8000;
  static constexpr int kLastPortId = 8999;

  // `configfs_root` is where configfs is mounted ("/sys/kernel/config").
  NvmetExporter(Fs& fs, const std::string& configfs_root,
                std::string nqn_prefix = kDefaultNqnPrefix,
                configfs::DirIdentityFn dir_identity = configfs::StatDirIdentity);

  Protocol protocol() const override { return Protocol::kNvmeofTcp; }
  Status Apply(const KernelExport& want, std::vector<std::string>* changes) override;
  StatusOr<std::optional<ActualExport>> Get(const std::string& agent_volume_id) override;
  StatusOr<std::vector<ActualExport>> List() override;
  Status Remove(const std::string& agent_volume_id, std::vector<std::string>* changes) override;
  // The identity of <root>/nvmet, which a module reload recreates.
  std::string StateToken() override;

 private:
  struct Port {
    int id = 0;
    std::string trtype, adrfam, traddr, trsvcid;
    int inline_data_size = -1;
    std::map<std::string, std::string> links;  // subsystem NQN -> link name
    // False when `links` holds only the one subsystem ReadPorts was asked
    // about: the port may serve others (see OtherLinks).
    bool all_links = true;
  };

  // Every port with its address. Without `only`, every subsystem link is
  // read; with `only`, just the link named after that subsystem (pillar names
  // links so), which keeps one volume's apply or read-back from listing a
  // port shared by thousands: its cost does not grow with the exports.
  StatusOr<std::vector<Port>> ReadPorts(const std::string* only = nullptr);
  // Whether `port` serves a subsystem other than `nqn` (the first one found,
  // or empty); lists the port's links only when ReadPorts did not.
  StatusOr<std::string> OtherLink(const Port& port, const std::string& nqn);
  // The TCP port at the export's address (preferring one `nqn` is on), or null.
  static Port* FindPort(std::vector<Port>& ports, const std::string& nqn,
                        const ExportParams& params);
  Status CheckShared(const Port* match, const std::string& nqn, const ExportParams& params);
  StatusOr<std::optional<ActualExport>> Observe(const std::string& agent_volume_id,
                                                const std::vector<Port>& ports);
  Status ApplyAcl(const std::string& nqn, const KernelExport& want,
                  std::vector<std::string>* changes);
  // Writes `creds` as the host's DH-HMAC-CHAP keys; FAILED_PRECONDITION when
  // the kernel lacks nvmet auth or another subsystem relies on another key.
  // Removes hosts/<host> once no subsystem admits it any more (its keys go
  // with it): a host entry outlives neither its last export nor its last
  // admission, so identity churn leaves nothing behind.
  Status DropHostIfUnused(const std::string& host, std::vector<std::string>* changes);
  Status ApplyHostKeys(const std::string& nqn, const std::string& host, const Credentials& creds,
                       std::vector<std::string>* changes);
  Status ApplyNamespace(const std::string& nqn, const std::string& backing,
                        std::vector<std::string>* changes);
  // `ports` as ReadPorts(&nqn) gave them, before this apply touched them.
  Status ApplyPort(const std::string& nqn, const ExportParams& params, std::vector<Port> ports,
                   std::vector<std::string>* changes);
  // Unlinks `nqn` from `port` and deletes the port when it is pillar's and empty.
  Status UnlinkFromPort(Port& port, const std::string& nqn, const std::string& why,
                        std::vector<std::string>* changes);
  std::string PortDir(int id) const;
  // Whether some subsystem admits `host`: the subsystems seen admitting it
  // are asked first (one lookup each, stale ones forgotten), and only when
  // none does any more is every subsystem read, so moving a volume's ACL
  // costs the same beside 10 exports or 10,000.
  StatusOr<bool> HostAdmitted(const std::string& host);
  void NoteAdmitted(const std::string& host, const std::string& nqn);

  Fs& fs_;
  std::string nvmet_;
  std::string prefix_;
  configfs::DirIdentityFn dir_identity_;
  std::mutex admitted_mu_;  // guards admitted_
  // host NQN -> subsystems seen admitting it (a hint: checked before believed)
  std::map<std::string, std::set<std::string>> admitted_;
};

}  // namespace pillar::agent
