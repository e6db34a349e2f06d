// Exports block volumes over iSCSI through LIO's configfs tree: an iblock
// backstore per volume, an iSCSI target named TargetName(iqn_prefix, volume
// id) with tpgt_1, LUN 0 on the backstore, one portal, and either node ACLs
// (one per initiator, each mapping LUN 0) or demo mode for "any initiator".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/exporters/configfs_util.h"
#include "agent/exporters/exporter.h"
#include "common/fs.h"

namespace pillar::agent {

class LioExporter : public Exporter {
 public:
  // Backstores are target/core/<kHba>/TargetName(kBackstorePrefix, volume
  // id): a valid directory name that maps back to the volume and cannot
  // collide with names other tools choose.
  static constexpr const char* kHba = "iblock_0";
  static constexpr const char* kBackstorePrefix = "pillar";

  // `configfs_root` is where configfs is mounted ("/sys/kernel/config").
  LioExporter(Fs& fs, const std::string& configfs_root, std::string iqn_prefix = kDefaultIqnPrefix,
              configfs::DirIdentityFn dir_identity = configfs::StatDirIdentity);

  Protocol protocol() const override { return Protocol::kIscsi; }
  Status Apply(const KernelExport& want, std::vector<std::string>* changes) override;
  StatusOr<std::optional<ActualExport>> Get(const std::string& agent_volume_id) override;
  StatusOr<std::vector<ActualExport>> List() override;
  Status Remove(const std::string& agent_volume_id, std::vector<std::string>* changes) override;
  // Identities of <root>/target and <root>/target/iscsi, which reloading
  // target_core_mod or iscsi_target_mod recreates.
  std::string StateToken() override;

 private:
  struct Names {
    std::string iqn;
    std::string backstore;  // absolute path of the backstore group
    std::string tpg;        // absolute path of tpgt_1
  };
  Names NamesFor(const std::string& agent_volume_id) const;

  Status ApplyBackstore(const Names& n, const std::string& backing,
                        std::vector<std::string>* changes);
  Status NarrowAcl(const Names& n, const KernelExport& want, std::vector<std::string>* changes);
  Status ApplyLun(const Names& n, std::vector<std::string>* changes);
  Status WidenAcl(const Names& n, const KernelExport& want, std::vector<std::string>* changes);
  // Writes the node ACL's CHAP user id and password (and the mutual pair,
  // "NULL" to clear it) where they differ.
  Status ApplyAclAuth(const std::string& acl_dir, const std::string& initiator,
                      const Credentials& creds, std::vector<std::string>* changes);
  Status ApplyPortal(const Names& n, const ExportParams& params, std::vector<std::string>* changes);
  Status SetAttr(const std::string& dir, const std::string& attr, const std::string& value,
                 const std::string& what, std::vector<std::string>* changes);
  // Removes every link in `dir` and then `dir` itself (a LUN or mapped LUN).
  Status RemoveLinkedGroup(const std::string& dir);
  Status RemoveNodeAcl(const std::string& acl_dir);
  // Absolute, normalised targets of the links in `dir`.
  StatusOr<std::vector<std::pair<std::string, std::string>>> Links(const std::string& dir);

  Fs& fs_;
  std::string target_;  // <root>/target
  std::string iscsi_;   // <root>/target/iscsi
  std::string prefix_;
  configfs::DirIdentityFn dir_identity_;
};

}  // namespace pillar::agent
