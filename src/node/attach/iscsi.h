// iSCSI through open-iscsi's iscsiadm by argv (CHAP settings written to its
// node database, never on an argv); sessions and LUN devices from
// sysfs:
//   class/iscsi_session/sessionN/{targetname, state, device -> .../hostH/sessionN}
//   .../hostH/sessionN/targetH:B:T/H:B:T:L/block/sdX
//   class/iscsi_connection/connectionN:0/{persistent_address, persistent_port}
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/exec.h"
#include "common/fs.h"
#include "node/attach/attacher.h"

namespace pillar::node {

struct IscsiSession {
  int sid = 0;          // N of sessionN
  std::string target;   // targetname
  std::string state;    // "LOGGED_IN", "FAILED", "FREE"
  std::string address;  // persistent_address (empty when unreadable)
  std::string port;     // persistent_port
};

// "InitiatorName=iqn...." from /etc/iscsi/initiatorname.iscsi; comments and
// blank lines skipped. Empty when there is none.
std::string ParseInitiatorName(std::string_view text);

class IscsiSysfs {
 public:
  IscsiSysfs(Fs& fs, std::string sysfs_root) : fs_(fs), root_(std::move(sysfs_root)) {}
  std::vector<IscsiSession> Sessions();
  // The sessions to `target` through portal address:port (an unreadable
  // portal matches, so a session is never missed for lack of attributes).
  std::vector<IscsiSession> SessionsTo(const std::string& target, const std::string& address,
                                       int port);
  // "sdb" for LUN `lun` of session `sid`.
  std::optional<std::string> FindLunDevice(int sid, int64_t lun);

 private:
  Fs& fs_;
  std::string root_;
};

class IscsiAttacher : public BlockAttacher {
 public:
  // node_db is open-iscsi's node database (/etc/iscsi/nodes), where CHAP
  // settings are written for iscsiadm to read at login: never on its argv.
  IscsiAttacher(Exec& exec, Fs& fs, Clock& clock, std::string sysfs_root, std::string node_db,
                AttachOptions options = {})
      : exec_(exec),
        fs_(fs),
        clock_(clock),
        sysfs_(fs, std::move(sysfs_root)),
        node_db_(std::move(node_db)),
        options_(options) {}

  StatusOr<std::string> Attach(const RemoteTarget& t) override;
  Status Detach(const RemoteTarget& t) override;
  DeviceHealth Check(const RemoteTarget& t) override;
  Status Heal(const RemoteTarget& t) override;
  Status Rescan(const RemoteTarget& t) override;

  // "10.0.0.1:3260" or "[fd00::1]:3260".
  static std::string Portal(const RemoteTarget& t);

  // A node record's text with `settings` in place of the lines of the same
  // keys, and of every CHAP line when `settings` starts with CHAP ones (every
  // other line kept as it was). Public for tests.
  static std::string WithSettings(std::string_view record,
                                  const std::vector<std::pair<std::string, std::string>>& settings);

 private:
  Status Login(const RemoteTarget& t);
  Status SetNodeRecord(const RemoteTarget& t, const std::string& portal);
  // The node record files of t's target at t's portal (any TPG, any iface).
  StatusOr<std::vector<std::string>> NodeRecords(const RemoteTarget& t);
  std::optional<std::string> FindDevice(const RemoteTarget& t);
  // Rescans every session to t; returns how many, or which of them failed
  // (each failure is logged too).
  StatusOr<int> RescanSessions(const RemoteTarget& t);

  Exec& exec_;
  Fs& fs_;
  Clock& clock_;
  IscsiSysfs sysfs_;
  std::string node_db_;
  AttachOptions options_;
};

}  // namespace pillar::node
