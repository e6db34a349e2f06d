// knfsd exports through nfs-utils: one persisted file per volume in
// exports.d (so an nfs-server restart, which runs `exportfs -r`, restores it)
// plus the live table converged client by client with `exportfs -o` / `-u`.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agent/exporters/exporter.h"
#include "common/exec.h"
#include "common/fs.h"
#include "common/status.h"

namespace pillar::agent {

// The only port knfsd serves exports on; it is one server-wide setting
// (rpc.nfsd --port), not a property of an export.
constexpr int kNfsPort = 2049;

// One client line of `exportfs -v`.
struct ExportfsEntry {
  std::string path;
  std::string client;                // "*" for "<world>"
  std::vector<std::string> options;  // as printed, in order

  bool operator==(const ExportfsEntry&) const = default;
};

// The live table, indexed by path and by fsid option ("fsid=..."), so one
// volume's lookup does not grow with the exports beside it.
struct ExportfsTable {
  std::vector<ExportfsEntry> entries;
  std::unordered_map<std::string, std::vector<size_t>> by_path;
  std::unordered_map<std::string, std::vector<size_t>> by_fsid;
};
ExportfsTable IndexExportfs(std::vector<ExportfsEntry> entries);

// Parses `exportfs -v` (nfs-utils 2.x): a path, padded to 14 columns and
// followed by a tab and "client(opts)" on the same line; or, for a path longer
// than 14 characters, the path alone with "\t\tclient(opts)" on the next line.
// One line per client; one path's clients need not be adjacent. A line it
// cannot read is INTERNAL naming the line number, so a format change fails
// loudly instead of hiding exports.
StatusOr<std::vector<ExportfsEntry>> ParseExportfsVerbose(const std::string& text);

// The export options pillar sets, fsid included (see NfsFsid): root_squash
// unless the volume's intent opts out (nfsRootSquash: "false"), and
// subtree_check unless the directory is the root of its own file system
// (see IsFilesystemRoot).
//
// Why subtree_check: knfsd's file handle names the export (fsid) and an
// inode of its file system; with no_subtree_check it serves any inode of
// that file system a client names, so a client allowed on one directory can
// forge a handle (inode and generation of a file elsewhere) and read another
// volume of the same file system. With subtree_check knfsd accepts a handle
// only when the inode is reached from the export's root directory
// (nfsd_acceptable in fs/nfsd/nfsfh.c), so file-pool directories are safe.
// A file system exported at its root (a ZFS dataset) holds nothing outside
// the export, and no_subtree_check spares its clients the ESTALE the check
// gives a file renamed to another directory while it is open.
std::string NfsExportOptions(const std::string& agent_volume_id, bool root_squash = true,
                             bool subtree_check = true);

// Whether `path` is the root of a file system according to `mountinfo` (the
// text of /proc/self/mountinfo): the mount last made at exactly `path` mounts
// its file system's own root ("/"). A bind mount of a subdirectory, a
// directory inside a mount, or anything unreadable is not: only then may an
// export go without subtree checking.
bool IsFilesystemRoot(const std::string& mountinfo, const std::string& path);

// A stable fsid for the volume: a UUID from the 128-bit FNV-1a hash of the
// agent volume id. knfsd otherwise derives the fsid from the device number or
// the file system's own UUID: device numbers of LVM / loop devices change
// across reboots (clients then get ESTALE), and a directory that is not the
// root of its own file system (file-backend pools, tmpfs) may have none.
std::string NfsFsid(const std::string& agent_volume_id);

// Export directories pillar accepts: absolute, components of
// [A-Za-z0-9_.+-] other than "." and "..", no empty component, at most 4095
// bytes. Such a path is one token in an exports file and in exportfs argv,
// so no quoting or escaping is ever needed.
Status ValidateExportPath(const std::string& field, const std::string& path);

class NfsExporter : public Exporter {
 public:
  // `etab` is nfs-utils' export table (/var/lib/nfs/etab), which every
  // exportfs that changes the table rewrites (a new file renamed into place)
  // and `exportfs -v` prints: while it stays the same file, the table read
  // last is still the table, so a converged apply or a read-back starts no
  // process. Empty: `exportfs -v` on every read.
  NfsExporter(Exec& exec, Fs& fs, std::string exports_dir = "/etc/exports.d",
              std::string nfsd_proc = "/proc/fs/nfsd",
              std::string mountinfo = "/proc/self/mountinfo", std::string etab = "");

  Protocol protocol() const override { return Protocol::kNfs; }

  // want.target_id and want.backing are both the exported directory, which
  // must exist. params.port must be 0 (the default) or 2049: knfsd cannot
  // serve one export on another port. params.bind_address is recorded and
  // reported as given but cannot be enforced: knfsd listens on every address.
  // acl_enabled=false exports to "*"; otherwise to exactly allowed_hosts
  // (IP addresses or CIDRs), and an empty set exports to nobody.
  Status Apply(const KernelExport& want, std::vector<std::string>* changes) override;
  // Many volumes with at most two processes: each file written, every
  // removal in one `exportfs -u`, then one `exportfs -a` for every addition
  // and option change (it exports what the files say and keeps every other
  // entry of the table; `exportfs -r` would drop exports made with -o, by
  // hand or by Apply). Each volume then answers from the table as it is: a
  // client missing, extra or with other options fails that volume alone,
  // naming what the tools said. One item runs Apply.
  void ApplyMany(std::vector<ApplyItem>& items) override;
  // The live clients of the volume's directory ("*" as acl_enabled=false),
  // bind address and port as recorded in its file. `drift` names a missing
  // file and clients whose options are not pillar's: Apply repairs both.
  // Found through the file, or through the volume's fsid when it was lost.
  StatusOr<std::optional<ActualExport>> Get(const std::string& agent_volume_id) override;
  StatusOr<std::vector<ActualExport>> List() override;
  Status Remove(const std::string& agent_volume_id, std::vector<std::string>* changes) override;
  // "" when nfsd runs no threads; "nfsd" otherwise (see the .cc for why no
  // restart counter is needed).
  std::string StateToken() override;

  // "<exports_dir>/pillar-<escaped id>.exports" (escaping as in TargetName).
  std::string ExportsFile(const std::string& agent_volume_id) const;

 private:
  // What pillar persisted for one volume (the file's "# pillar" line).
  struct Record {
    std::string agent_volume_id;
    std::string path;
    std::string bind_address;
    int port = 0;
  };

  // One volume's convergence, worked out from its file and the live table.
  struct Plan {
    std::string path;
    std::optional<std::string> old_path;  // the volume moved from here
    std::set<std::string> clients;        // what the table is to hold
    std::string opts;
    std::string fsid_opt;
    bool subtree_check = true;
    bool root_squash = true;
    std::vector<std::pair<std::string, std::string>> removals;  // client, path
    // Clients to export, with the options they had when re-exported.
    std::vector<std::pair<std::string, std::optional<std::string>>> additions;
  };
  // Apply's checks, before anything is read or run.
  Status Validate(const KernelExport& want);
  // Writes the volume's file when it differs (its change line appended) and
  // works out what the live table needs. `mountinfo` unreadable: checked.
  StatusOr<Plan> Prepare(const KernelExport& want, const StatusOr<std::string>& mountinfo,
                         const ExportfsTable& live, std::vector<std::string>* changes);
  // The change lines of a plan carried out.
  static void Report(const Plan& plan, std::vector<std::string>* changes);

  // nullopt when the file is absent; INTERNAL when it is unreadable, lacks
  // the "# pillar" line or records another volume than its name says.
  StatusOr<std::optional<Record>> ReadRecord(const std::string& file,
                                             const std::string& expected_id);
  // ReadRecord on `text`, the file's content as read (or why it was not).
  StatusOr<std::optional<Record>> ParseRecord(const std::string& file,
                                              const StatusOr<std::string>& text,
                                              const std::string& expected_id);
  // The live table: `exportfs -v`, or what it printed last while etab is
  // unchanged (see the constructor).
  // Shared, never copied: a table of 10,000 exports is read, not copied, per call.
  StatusOr<std::shared_ptr<const ExportfsTable>> Observe();
  // Forgets the table read last: called after every exportfs that changes it.
  void Forget();
  // The directory of a volume: from its file, else from a live entry that
  // carries the volume's fsid (the file was lost); nullopt when neither.
  StatusOr<std::optional<std::string>> PathOf(const std::string& agent_volume_id,
                                              const std::optional<Record>& record,
                                              const ExportfsTable& live);
  ActualExport Describe(const std::string& agent_volume_id, const std::string& path,
                        const std::optional<Record>& record, const ExportfsTable& live) const;
  Status Unexport(const std::string& client, const std::string& path, bool absent_ok);
  // Whether the export of `path` is to check subtrees: true unless the
  // mount table says `path` is a file system's root (also when it cannot be
  // read: the check is always safe, its absence is not).
  bool NeedsSubtreeCheck(const std::string& path) const;

  Exec& exec_;
  Fs& fs_;
  std::string exports_dir_;
  std::string nfsd_proc_;
  std::string mountinfo_;
  std::string etab_;
  std::mutex live_mu_;  // guards live_
  struct Live {
    std::string stamp;  // etab's device, inode, size and times when it was read
    std::shared_ptr<const ExportfsTable> table;
  };
  std::optional<Live> live_;
};

}  // namespace pillar::agent
