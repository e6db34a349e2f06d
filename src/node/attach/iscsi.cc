#include "node/attach/iscsi.h"

#include <algorithm>
#include <charconv>

#include "common/log.h"
#include "common/validate.h"
#include "node/attach/sysfs_util.h"
#include "node/attach/wait_for_device.h"

namespace pillar::node {
namespace {

constexpr std::chrono::seconds kIscsiadmTimeout{60};
// iscsiadm exit codes (open-iscsi include/iscsi_err.h).
constexpr int kErrSessionExists = 15;
constexpr int kErrNoObjectsFound = 21;

Status ValidateTarget(const RemoteTarget& t) {
  RETURN_IF_ERROR(validate::Iqn("targetID", t.target_id));
  RETURN_IF_ERROR(validate::IpAddress("address", t.address));
  RETURN_IF_ERROR(validate::Port("port", t.port));
  if (t.lun < 0 || t.lun > 16383) return InvalidArgument("lun must be 0..16383");
  return Status::Ok();
}

std::optional<int> ParseIntSuffix(const std::string& s, const std::string& prefix) {
  if (s.rfind(prefix, 0) != 0) return std::nullopt;
  std::string rest = s.substr(prefix.size());
  if (!AllDigits(rest) || rest.size() > 9) return std::nullopt;
  int v = 0;
  std::from_chars(rest.data(), rest.data() + rest.size(), v);
  return v;
}

std::string ErrText(const StatusOr<ExecResult>& r) {
  if (!r.ok()) return r.status().message();
  return "exit " + std::to_string(r->exit_code) + ": " +
         TrimSpace(r->err.empty() ? r->out : r->err);
}

}  // namespace

std::string ParseInitiatorName(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string line = TrimSpace(text.substr(pos, end - pos));
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    constexpr std::string_view kKey = "InitiatorName";
    if (line.rfind(kKey, 0) != 0) continue;
    std::string rest = TrimSpace(std::string_view(line).substr(kKey.size()));
    if (rest.empty() || rest[0] != '=') continue;
    return TrimSpace(std::string_view(rest).substr(1));
  }
  return "";
}

std::vector<IscsiSession> IscsiSysfs::Sessions() {
  std::vector<IscsiSession> out;
  std::string cls = JoinPath(root_, "class/iscsi_session");
  auto entries = fs_.ListDir(cls);
  if (!entries.ok()) return out;
  for (const auto& e : *entries) {
    auto sid = ParseIntSuffix(e.name, "session");
    if (!sid) continue;
    std::string dir = JoinPath(cls, e.name);
    IscsiSession s;
    s.sid = *sid;
    s.target = ReadAttr(fs_, JoinPath(dir, "targetname")).value_or("");
    s.state = ReadAttr(fs_, JoinPath(dir, "state")).value_or("");
    std::string conn =
        JoinPath(root_, "class/iscsi_connection/connection" + std::to_string(*sid) + ":0");
    s.address = ReadAttr(fs_, JoinPath(conn, "persistent_address")).value_or("");
    s.port = ReadAttr(fs_, JoinPath(conn, "persistent_port")).value_or("");
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.sid < b.sid; });
  return out;
}

std::vector<IscsiSession> IscsiSysfs::SessionsTo(const std::string& target,
                                                 const std::string& address, int port) {
  std::vector<IscsiSession> out;
  for (auto& s : Sessions()) {
    if (s.target != target) continue;
    // The whole connection: a session whose portal cannot be read is not
    // known to be this one.
    if (s.address.empty() || CanonicalIp(s.address) != CanonicalIp(address)) continue;
    if (s.port != std::to_string(port)) continue;
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<std::string> IscsiSysfs::FindLunDevice(int sid, int64_t lun) {
  std::string dev =
      JoinPath(root_, "class/iscsi_session/session" + std::to_string(sid) + "/device");
  auto targets = fs_.ListDir(dev);
  if (!targets.ok()) return std::nullopt;
  for (const auto& t : *targets) {
    if (t.name.rfind("target", 0) != 0) continue;
    std::string tdir = JoinPath(dev, t.name);
    auto luns = fs_.ListDir(tdir);
    if (!luns.ok()) continue;
    for (const auto& l : *luns) {
      // H:B:T:L; the LUN is the last field.
      size_t colon = l.name.rfind(':');
      if (colon == std::string::npos || std::count(l.name.begin(), l.name.end(), ':') != 3) {
        continue;
      }
      if (l.name.substr(colon + 1) != std::to_string(lun)) continue;
      auto blocks = fs_.ListDir(JoinPath(tdir, l.name + "/block"));
      if (!blocks.ok() || blocks->empty()) continue;
      std::vector<std::string> names;
      for (const auto& b : *blocks) names.push_back(b.name);
      std::sort(names.begin(), names.end());
      return names.front();
    }
  }
  return std::nullopt;
}

std::string IscsiAttacher::Portal(const RemoteTarget& t) {
  bool v6 = t.address.find(':') != std::string::npos;
  return (v6 ? "[" + t.address + "]" : t.address) + ":" + std::to_string(t.port);
}

namespace {

// The CHAP keys pillar sets (all replaced together, so no stale mutual pair
// survives a change to one-way CHAP).
bool IsAuthKey(std::string_view key) {
  for (std::string_view k :
       {"node.session.auth.authmethod", "node.session.auth.username", "node.session.auth.password",
        "node.session.auth.username_in", "node.session.auth.password_in"}) {
    if (key == k) return true;
  }
  return false;
}

}  // namespace

std::string IscsiAttacher::WithSettings(
    std::string_view record, const std::vector<std::pair<std::string, std::string>>& settings) {
  std::string out;
  size_t pos = 0;
  while (pos < record.size()) {
    size_t end = record.find('\n', pos);
    if (end == std::string_view::npos) end = record.size();
    std::string_view line = record.substr(pos, end - pos);
    pos = end + 1;
    std::string key = TrimSpace(line.substr(0, line.find('=')));
    bool replaced = IsAuthKey(key) && !settings.empty() && IsAuthKey(settings.front().first);
    for (const auto& setting : settings) replaced = replaced || setting.first == key;
    if (line.find('=') != std::string_view::npos && replaced) continue;
    out.append(line);
    out += '\n';
  }
  for (const auto& [name, value] : settings) out += name + " = " + value + "\n";
  return out;
}

StatusOr<std::vector<std::string>> IscsiAttacher::NodeRecords(const RemoteTarget& t) {
  std::string dir = JoinPath(node_db_, t.target_id);
  auto entries = fs_.ListDir(dir);
  if (!entries.ok()) {
    return FailedPrecondition("no node record of " + t.target_id + " in " + node_db_ +
                              " after discovery (" + entries.status().message() +
                              "); is it the node database iscsiadm uses?");
  }
  std::vector<std::string> out;
  for (const auto& e : *entries) {
    // "<address>,<port>,<tpgt>"
    size_t tpg_comma = e.name.rfind(',');
    if (tpg_comma == std::string::npos || tpg_comma == 0) continue;
    size_t port_comma = e.name.rfind(',', tpg_comma - 1);
    if (port_comma == std::string::npos) continue;
    std::string address = e.name.substr(0, port_comma);
    std::string port = e.name.substr(port_comma + 1, tpg_comma - port_comma - 1);
    if (CanonicalIp(address) != CanonicalIp(t.address) || port != std::to_string(t.port)) continue;
    std::string path = JoinPath(dir, e.name);
    if (!fs_.IsDir(path)) {  // the older layout: the record itself
      out.push_back(path);
      continue;
    }
    auto ifaces = fs_.ListDir(path);
    if (!ifaces.ok()) return Unavailable("cannot list " + path + ": " + ifaces.status().message());
    for (const auto& i : *ifaces) {
      if (i.name.find(".tmp.") == std::string::npos) out.push_back(JoinPath(path, i.name));
    }
  }
  if (out.empty()) {
    return FailedPrecondition("discovery made no node record of " + t.target_id + " at " +
                              Portal(t) + " in " + node_db_);
  }
  return out;
}

// The node records discovery made get the session's CHAP settings and the
// volume's connection timing before login, written into open-iscsi's
// root-only node database directly (as `iscsiadm -o update` would, but with
// no secret on any argv). Without credentials (auth none, or a self-healing
// relogin, which has none) the CHAP lines are left as they are.
Status IscsiAttacher::SetNodeRecord(const RemoteTarget& t, const std::string& portal) {
  const Credentials& c = t.credentials;
  std::vector<std::pair<std::string, std::string>> settings;
  if (!c.secret.empty()) {
    settings = {{"node.session.auth.authmethod", "CHAP"},
                {"node.session.auth.username", c.username},
                {"node.session.auth.password", c.secret}};
    if (!c.mutual_secret.empty()) {
      settings.emplace_back("node.session.auth.username_in", c.mutual_username);
      settings.emplace_back("node.session.auth.password_in", c.mutual_secret);
    }
  }
  const ConnectionTiming& timing = t.timing;
  if (timing.iscsi_replacement_timeout) {
    settings.emplace_back("node.session.timeo.replacement_timeout",
                          std::to_string(*timing.iscsi_replacement_timeout));
  }
  if (timing.iscsi_noop_out_interval) {
    settings.emplace_back("node.conn[0].timeo.noop_out_interval",
                          std::to_string(*timing.iscsi_noop_out_interval));
  }
  if (timing.iscsi_noop_out_timeout) {
    settings.emplace_back("node.conn[0].timeo.noop_out_timeout",
                          std::to_string(*timing.iscsi_noop_out_timeout));
  }
  if (settings.empty()) return Status::Ok();
  for (const auto& [name, value] : settings) {
    for (char ch : value) {
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {
        return InvalidArgument(name + " holds a control character; a node record cannot carry it");
      }
    }
  }
  ASSIGN_OR_RETURN(std::vector<std::string> records, NodeRecords(t));
  for (const auto& path : records) {
    auto text = fs_.ReadFile(path);
    if (!text.ok()) {
      return Unavailable("cannot read node record " + path + " of " + portal + ": " +
                         text.status().message());
    }
    // WriteFileAtomic creates the file 0600, as iscsiadm does.
    Status w = fs_.WriteFileAtomic(path, WithSettings(*text, settings));
    if (!w.ok()) {
      return Unavailable("cannot write the settings of " + t.target_id + " at " + portal + " to " +
                         path + " (" + RedactSecrets(w.message(), c) + ")");
    }
  }
  return Status::Ok();
}

Status IscsiAttacher::Login(const RemoteTarget& t) {
  std::string portal = Portal(t);
  log::Info("iscsi login", {{"iqn", t.target_id}, {"portal", portal}});
  Command discover{
      {"iscsiadm", "-m", "discovery", "-t", "sendtargets", "-p", portal}, {}, kIscsiadmTimeout};
  auto d = exec_.Run(discover);
  if (!d.ok() || d->exit_code != 0) {
    return Unavailable("iscsiadm discovery at " + portal + " failed (" + ErrText(d) + ")");
  }
  RETURN_IF_ERROR(SetNodeRecord(t, portal));
  Command login{
      {"iscsiadm", "-m", "node", "-T", t.target_id, "-p", portal, "--login"}, {}, kIscsiadmTimeout};
  auto l = exec_.Run(login);
  if (l.ok() && (l->exit_code == 0 || l->exit_code == kErrSessionExists)) return Status::Ok();
  if (!sysfs_.SessionsTo(t.target_id, t.address, t.port).empty()) return Status::Ok();
  return Unavailable("iscsiadm login to " + t.target_id + " at " + portal + " failed (" +
                     RedactSecrets(ErrText(l), t.credentials) + ")");
}

std::optional<std::string> IscsiAttacher::FindDevice(const RemoteTarget& t) {
  for (const auto& s : sysfs_.SessionsTo(t.target_id, t.address, t.port)) {
    if (auto dev = sysfs_.FindLunDevice(s.sid, t.lun)) return dev;
  }
  return std::nullopt;
}

StatusOr<int> IscsiAttacher::RescanSessions(const RemoteTarget& t) {
  int n = 0;
  std::string failures;
  for (const auto& s : sysfs_.SessionsTo(t.target_id, t.address, t.port)) {
    Command cmd{{"iscsiadm", "-m", "session", "-r", std::to_string(s.sid), "--rescan"},
                {},
                kIscsiadmTimeout};
    auto r = exec_.Run(cmd);
    ++n;
    if (!r.ok() || r->exit_code != 0) {
      log::Warn("iscsi session rescan failed", {{"sid", s.sid}, {"error", ErrText(r)}});
      failures += (failures.empty() ? "session " : "; session ") + std::to_string(s.sid) + ": " +
                  ErrText(r);
    }
  }
  if (!failures.empty()) {
    return Internal("iscsiadm session rescan of " + t.target_id + " failed (" + failures + ")");
  }
  return n;
}

StatusOr<std::string> IscsiAttacher::Attach(const RemoteTarget& t) {
  RETURN_IF_ERROR(ValidateTarget(t));
  AttachSteps steps;
  steps.target = "LUN " + std::to_string(t.lun) + " of " + t.target_id + " at " + Portal(t);
  steps.rescan_name = "session rescan";
  steps.connected = [&] { return !sysfs_.SessionsTo(t.target_id, t.address, t.port).empty(); };
  steps.connect = [&] { return Login(t); };
  steps.find_device = [&]() -> std::optional<std::string> {
    if (auto dev = FindDevice(t)) return "/dev/" + *dev;
    return std::nullopt;
  };
  steps.rescan = [&] { return RescanSessions(t); };
  steps.describe_connection = [&] {
    return std::to_string(sysfs_.SessionsTo(t.target_id, t.address, t.port).size()) + " session(s)";
  };
  return ConnectAndWaitForDevice(clock_, options_, steps);
}

Status IscsiAttacher::Detach(const RemoteTarget& t) {
  RETURN_IF_ERROR(ValidateTarget(t));
  std::string portal = Portal(t);
  if (!sysfs_.SessionsTo(t.target_id, t.address, t.port).empty()) {
    log::Info("iscsi logout", {{"iqn", t.target_id}, {"portal", portal}});
    Command logout{{"iscsiadm", "-m", "node", "-T", t.target_id, "-p", portal, "--logout"},
                   {},
                   kIscsiadmTimeout};
    auto r = exec_.Run(logout);
    bool ok = r.ok() && (r->exit_code == 0 || r->exit_code == kErrNoObjectsFound);
    if (!ok && !sysfs_.SessionsTo(t.target_id, t.address, t.port).empty()) {
      return Internal("iscsiadm logout from " + t.target_id + " at " + portal + " failed (" +
                      ErrText(r) + ")");
    }
  }
  // Forget the node record so the initiator does not log in again at boot.
  Command forget{{"iscsiadm", "-m", "node", "-T", t.target_id, "-p", portal, "-o", "delete"},
                 {},
                 kIscsiadmTimeout};
  auto f = exec_.Run(forget);
  if (!f.ok() || (f->exit_code != 0 && f->exit_code != kErrNoObjectsFound)) {
    log::Warn("iscsiadm node delete failed", {{"iqn", t.target_id}, {"error", ErrText(f)}});
  }
  return Status::Ok();
}

DeviceHealth IscsiAttacher::Check(const RemoteTarget& t) {
  DeviceHealth h;
  auto sessions = sysfs_.SessionsTo(t.target_id, t.address, t.port);
  for (const auto& s : sessions) h.connected |= s.state.empty() || s.state == "LOGGED_IN";
  if (auto dev = FindDevice(t)) h.device = "/dev/" + *dev;
  if (sessions.empty()) {
    h.problem = "no iSCSI session to " + t.target_id + " at " + Portal(t);
  } else if (!h.connected) {
    h.problem = "iSCSI session to " + t.target_id + " is " + sessions.front().state;
  } else if (h.device.empty()) {
    h.problem = "no block device for LUN " + std::to_string(t.lun) + " of " + t.target_id;
  }
  return h;
}

Status IscsiAttacher::Heal(const RemoteTarget& t) {
  RETURN_IF_ERROR(ValidateTarget(t));
  if (sysfs_.SessionsTo(t.target_id, t.address, t.port).empty()) return Login(t);
  // Best effort (failures are logged), as NVMe's heal.
  if (!FindDevice(t)) (void)RescanSessions(t);
  return Status::Ok();
}

Status IscsiAttacher::Rescan(const RemoteTarget& t) {
  RETURN_IF_ERROR(ValidateTarget(t));
  // A failed rescan still found sessions: that is not "no session".
  if (auto ran = RescanSessions(t); ran.ok() && *ran == 0) {
    return FailedPrecondition("no iSCSI session to " + t.target_id + " at " + Portal(t));
  }
  return Status::Ok();
}

}  // namespace pillar::node
