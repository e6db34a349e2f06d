#include "agent/exporters/nfs_exporter.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "common/validate.h"

namespace pillar::agent {
namespace {

// A file's identity and version: device, inode, size, modification and
// change times; nullopt when it cannot be stat'ed.
std::optional<std::string> FileStamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
         std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ctim.tv_sec) + "." +
         std::to_string(st.st_ctim.tv_nsec);
}

constexpr const char* kFilePrefix = "pillar-";
constexpr const char* kFileSuffix = ".exports";
constexpr const char* kRecordTag = "# pillar ";

__extension__ typedef unsigned __int128 Uint128;

// Concatenates without temporaries; for the lines built in loops.
template <typename... Parts>
std::string Cat(const Parts&... parts) {
  std::string out;
  ((out += parts), ...);
  return out;
}

std::string LineError(size_t line, const std::string& what) {
  return "exportfs -v output line " + std::to_string(line) + ": " + what;
}

StatusOr<std::vector<std::string>> SplitOptions(const std::string& s, size_t line) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    std::string opt =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (opt.empty()) return Internal(LineError(line, "empty export option"));
    out.push_back(std::move(opt));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// "client(opt,opt)" after the path's separator.
StatusOr<ExportfsEntry> ParseClient(const std::string& path, std::string rest, size_t line) {
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\r')) rest.pop_back();
  ExportfsEntry entry{path, "", {}};
  size_t paren = rest.find('(');
  std::string opts;
  if (paren == std::string::npos) {
    entry.client = rest;  // an export with no option printed
  } else {
    if (rest.back() != ')') return Internal(LineError(line, "options of a client lack ')'"));
    entry.client = rest.substr(0, paren);
    opts = rest.substr(paren + 1, rest.size() - paren - 2);
  }
  if (entry.client.empty()) return Internal(LineError(line, "no client"));
  for (char c : entry.client) {
    if (c == ' ' || c == '\t' || c == '(' || c == ')') {
      return Internal(LineError(line, "malformed client \"" + entry.client + "\""));
    }
  }
  if (entry.client == "<world>") entry.client = "*";
  ASSIGN_OR_RETURN(entry.options, SplitOptions(opts, line));
  return entry;
}

bool IsPathChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '+' || c == '-';
}

// exportfs takes "client:path"; an IPv6 client must be bracketed there (and
// must not be in an exports file, where brackets are a wildcard class).
std::string ClientArg(const std::string& client, const std::string& path) {
  if (client.find(':') != std::string::npos) return "[" + client + "]:" + path;
  return client + ":" + path;
}

std::string Join(const std::vector<std::string>& parts, char sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

// Whether a live entry carries exactly pillar's options: each of ours is
// present and none of their opposites (nor another fsid) is.
// `root_squash` nullopt: either squash mode matches (all_squash never does).
// exportfs -v prints no_subtree_check when the check is off and nothing when
// it is on, so subtree checking is the absence of no_subtree_check.
bool OptionsMatch(const std::vector<std::string>& observed, const std::string& fsid_opt,
                  std::optional<bool> root_squash, bool subtree_check) {
  std::set<std::string> have(observed.begin(), observed.end());
  for (const char* want : {"rw", "sync"}) {
    if (!have.count(want)) return false;
  }
  for (const char* bad : {"ro", "async", "all_squash"}) {
    if (have.count(bad)) return false;
  }
  bool checks = !have.count("no_subtree_check");
  if (checks != subtree_check) return false;
  // exportfs -v prints root_squash or no_root_squash; root_squash is knfsd's default.
  bool squashes = !have.count("no_root_squash");
  if (root_squash && *root_squash != squashes) return false;
  bool fsid_seen = false;
  for (const auto& opt : observed) {
    if (opt.rfind("fsid=", 0) != 0) continue;
    if (opt != fsid_opt) return false;
    fsid_seen = true;
  }
  return fsid_seen;
}

std::vector<const ExportfsEntry*> EntriesOf(const ExportfsTable& live, const std::string& path) {
  std::vector<const ExportfsEntry*> out;
  auto it = live.by_path.find(path);
  if (it == live.by_path.end()) return out;
  for (size_t i : it->second) out.push_back(&live.entries[i]);
  return out;
}

std::string RenderFile(const std::string& agent_volume_id, const std::string& path,
                       const ExportParams& params, const std::set<std::string>& clients,
                       bool subtree_check) {
  std::string out = "# Managed by pillar-csi; exportfs -r restores this export. Do not edit.\n";
  out += std::string(kRecordTag) + "agent-volume-id=" + agent_volume_id + " path=" + path +
         " bind-address=" + params.bind_address + " port=" + std::to_string(params.port) + "\n";
  // No export line at all for an empty set: a path without clients in an
  // exports file means "everyone".
  if (clients.empty()) return out;
  std::string opts = NfsExportOptions(agent_volume_id, params.root_squash, subtree_check);
  out += path;
  for (const auto& c : clients) out += Cat(" ", c, "(", opts, ")");
  return out + "\n";
}

}  // namespace

StatusOr<std::vector<ExportfsEntry>> ParseExportfsVerbose(const std::string& text) {
  std::vector<ExportfsEntry> out;
  std::optional<std::string> pending;  // a long path waiting for its client line
  size_t start = 0;
  size_t line_no = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    std::string line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    start = nl == std::string::npos ? text.size() : nl + 1;
    ++line_no;
    if (line.empty()) {
      if (pending) return Internal(LineError(line_no, "path " + *pending + " has no client"));
      continue;
    }
    if (line[0] == '\t') {
      if (!pending) return Internal(LineError(line_no, "client line without a path"));
      size_t first = line.find_first_not_of('\t');
      ASSIGN_OR_RETURN(
          ExportfsEntry entry,
          ParseClient(*pending, first == std::string::npos ? "" : line.substr(first), line_no));
      out.push_back(std::move(entry));
      pending.reset();
      continue;
    }
    if (pending) return Internal(LineError(line_no, "path " + *pending + " has no client"));
    if (line[0] != '/') return Internal(LineError(line_no, "expected an absolute path"));
    size_t tab = line.find('\t');
    if (tab == std::string::npos) {
      pending = line;
      continue;
    }
    std::string path = line.substr(0, tab);
    while (path.size() > 1 && path.back() == ' ') path.pop_back();  // %-14s padding
    ASSIGN_OR_RETURN(ExportfsEntry entry, ParseClient(path, line.substr(tab + 1), line_no));
    out.push_back(std::move(entry));
  }
  if (pending) return Internal(LineError(line_no, "path " + *pending + " has no client"));
  return out;
}

std::string NfsFsid(const std::string& agent_volume_id) {
  // FNV-1a, 128-bit: offset basis and prime from the FNV specification.
  Uint128 hash = (Uint128{0x6c62272e07bb0142ULL} << 64) | 0x62b821756295c58dULL;
  const Uint128 prime = (Uint128{1} << 88) | 0x13bULL;
  for (unsigned char c : agent_volume_id) {
    hash ^= c;
    hash *= prime;
  }
  unsigned char b[16];
  for (int i = 15; i >= 0; --i) {
    b[i] = static_cast<unsigned char>(hash & 0xff);
    hash >>= 8;
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x80);  // version 8: custom
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string out;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    char hex[3];
    std::snprintf(hex, sizeof(hex), "%02x", b[i]);
    out += hex;
  }
  return out;
}

std::string NfsExportOptions(const std::string& agent_volume_id, bool root_squash,
                             bool subtree_check) {
  return std::string("rw,sync,") + (subtree_check ? "subtree_check," : "no_subtree_check,") +
         (root_squash ? "root_squash" : "no_root_squash") + ",fsid=" + NfsFsid(agent_volume_id);
}

bool IsFilesystemRoot(const std::string& mountinfo, const std::string& path) {
  // Fields: id parent major:minor root mount-point options ... (proc(5)).
  // Our paths need no escaping, so an escaped mount point never equals one.
  std::optional<std::string> root;
  size_t start = 0;
  while (start < mountinfo.size()) {
    size_t nl = mountinfo.find('\n', start);
    std::string line =
        mountinfo.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    start = nl == std::string::npos ? mountinfo.size() : nl + 1;
    std::vector<std::string> fields;
    size_t pos = 0;
    while (fields.size() < 5 && pos < line.size()) {
      size_t sp = line.find(' ', pos);
      fields.push_back(line.substr(pos, sp == std::string::npos ? std::string::npos : sp - pos));
      pos = sp == std::string::npos ? line.size() : sp + 1;
    }
    if (fields.size() == 5 && fields[4] == path) root = fields[3];  // the last one is visible
  }
  return root && *root == "/";
}

Status ValidateExportPath(const std::string& field, const std::string& path) {
  auto bad = [&](const std::string& rule) {
    std::string shown = path.substr(0, 80);
    for (char& c : shown) {
      if (c < 0x20 || c == 0x7f) c = '?';
    }
    return InvalidArgument(field + " \"" + shown + (path.size() > 80 ? "...\"" : "\"") +
                           " is invalid: " + rule);
  };
  if (path.size() < 2 || path.size() > 4095 || path[0] != '/') {
    return bad("want an absolute directory path of at most 4095 bytes, not \"/\"");
  }
  size_t start = 1;
  while (true) {
    size_t slash = path.find('/', start);
    std::string part = path.substr(start, slash == std::string::npos ? slash : slash - start);
    if (part.empty() || part == "." || part == "..") {
      return bad("empty, \".\" and \"..\" components are not allowed");
    }
    for (char c : part) {
      if (!IsPathChar(c)) {
        return bad("want components of [A-Za-z0-9_.+-] only (no whitespace, quotes or escapes)");
      }
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return Status::Ok();
}

NfsExporter::NfsExporter(Exec& exec, Fs& fs, std::string exports_dir, std::string nfsd_proc,
                         std::string mountinfo, std::string etab)
    : exec_(exec),
      fs_(fs),
      exports_dir_(std::move(exports_dir)),
      nfsd_proc_(std::move(nfsd_proc)),
      mountinfo_(std::move(mountinfo)),
      etab_(std::move(etab)) {}

bool NfsExporter::NeedsSubtreeCheck(const std::string& path) const {
  auto table = fs_.ReadFile(mountinfo_);
  return !table.ok() || !IsFilesystemRoot(*table, path);
}

std::string NfsExporter::ExportsFile(const std::string& agent_volume_id) const {
  // TargetName("x", id) is "x:<escaped>"; the escaped part has no '/'.
  return JoinPath(exports_dir_,
                  kFilePrefix + TargetName("x", agent_volume_id).substr(2) + kFileSuffix);
}

StatusOr<std::optional<NfsExporter::Record>> NfsExporter::ReadRecord(
    const std::string& file, const std::string& expected_id) {
  return ParseRecord(file, fs_.ReadFile(file), expected_id);
}

StatusOr<std::optional<NfsExporter::Record>> NfsExporter::ParseRecord(
    const std::string& file, const StatusOr<std::string>& text, const std::string& expected_id) {
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) return std::optional<Record>();
    return Internal("nfs exports file " + file + " cannot be read: " + text.status().message());
  }
  auto corrupt = [&](const std::string& why) {
    return Internal("nfs exports file " + file + " is corrupt: " + why);
  };
  size_t tag = text->rfind(std::string("\n") + kRecordTag);
  if (text->rfind(kRecordTag, 0) == 0) {
    tag = 0;
  } else if (tag != std::string::npos) {
    ++tag;
  } else {
    return corrupt("no \"# pillar\" line");
  }
  size_t begin = tag + std::string(kRecordTag).size();
  size_t end = text->find('\n', begin);
  std::string line = text->substr(begin, end == std::string::npos ? end : end - begin);
  std::map<std::string, std::string> kv;
  size_t start = 0;
  while (start < line.size()) {
    size_t sp = line.find(' ', start);
    std::string tok = line.substr(start, sp == std::string::npos ? sp : sp - start);
    start = sp == std::string::npos ? line.size() : sp + 1;
    size_t eq = tok.find('=');
    if (eq == std::string::npos) return corrupt("token \"" + tok + "\" is not key=value");
    kv[tok.substr(0, eq)] = tok.substr(eq + 1);
  }
  Record r;
  r.agent_volume_id = kv["agent-volume-id"];
  r.path = kv["path"];
  r.bind_address = kv["bind-address"];
  const std::string& port = kv["port"];
  if (!validate::AgentVolumeId("agent-volume-id", r.agent_volume_id).ok()) {
    return corrupt("bad agent-volume-id \"" + r.agent_volume_id + "\"");
  }
  if (r.agent_volume_id != expected_id) {
    return corrupt("records volume " + r.agent_volume_id + ", its name says " + expected_id);
  }
  if (Status s = ValidateExportPath("path", r.path); !s.ok()) return corrupt(s.message());
  if (Status s = validate::IpAddress("bind-address", r.bind_address); !s.ok()) {
    return corrupt(s.message());
  }
  if (port != "0" && port != std::to_string(kNfsPort)) return corrupt("bad port \"" + port + "\"");
  r.port = port == "0" ? 0 : kNfsPort;
  return std::optional<Record>(std::move(r));
}

ExportfsTable IndexExportfs(std::vector<ExportfsEntry> entries) {
  ExportfsTable t;
  t.entries = std::move(entries);
  for (size_t i = 0; i < t.entries.size(); ++i) {
    t.by_path[t.entries[i].path].push_back(i);
    for (const auto& opt : t.entries[i].options) {
      if (opt.rfind("fsid=", 0) == 0) t.by_fsid[opt].push_back(i);
    }
  }
  return t;
}

StatusOr<std::shared_ptr<const ExportfsTable>> NfsExporter::Observe() {
  // Stamped before it is read: a change made while exportfs runs leaves a
  // stamp that no longer matches, and the next read runs it again.
  std::optional<std::string> stamp = etab_.empty() ? std::nullopt : FileStamp(etab_);
  if (stamp) {
    std::lock_guard<std::mutex> lock(live_mu_);
    if (live_ && live_->stamp == *stamp) return live_->table;
  }
  ExecResult result;
  RETURN_IF_ERROR(exec_.RunOk({{"exportfs", "-v"}, "", std::chrono::seconds(30)}, &result));
  ASSIGN_OR_RETURN(auto entries, ParseExportfsVerbose(result.out));
  auto table = std::make_shared<const ExportfsTable>(IndexExportfs(std::move(entries)));
  if (stamp) {
    std::lock_guard<std::mutex> lock(live_mu_);
    live_ = Live{*stamp, table};
  }
  return table;
}

void NfsExporter::Forget() {
  std::lock_guard<std::mutex> lock(live_mu_);
  live_.reset();
}

StatusOr<std::optional<std::string>> NfsExporter::PathOf(const std::string& agent_volume_id,
                                                         const std::optional<Record>& record,
                                                         const ExportfsTable& live) {
  if (record) return std::optional<std::string>(record->path);
  std::optional<std::string> found;
  auto it = live.by_fsid.find("fsid=" + NfsFsid(agent_volume_id));
  if (it == live.by_fsid.end()) return found;
  for (size_t i : it->second) {
    const ExportfsEntry& e = live.entries[i];
    if (found && *found != e.path) {
      return Internal("nfs volume " + agent_volume_id + ": its fsid is exported at both " + *found +
                      " and " + e.path);
    }
    found = e.path;
  }
  return found;
}

ActualExport NfsExporter::Describe(const std::string& agent_volume_id, const std::string& path,
                                   const std::optional<Record>& record,
                                   const ExportfsTable& live) const {
  ActualExport a;
  a.agent_volume_id = agent_volume_id;
  a.target_id = path;
  a.backing = path;
  if (record) {
    a.params.bind_address = record->bind_address;
    a.params.port = record->port;
  }
  a.params.acl_enabled = true;
  a.enabled = true;  // the volume's directory is exported (perhaps to nobody)
  if (!record) {
    a.drift.push_back(Cat("exports file ", ExportsFile(agent_volume_id),
                          " is missing: an nfs-server restart would drop this export"));
  }
  std::string fsid_opt = "fsid=" + NfsFsid(agent_volume_id);
  bool subtree_check = NeedsSubtreeCheck(path);
  std::set<bool> squash_modes;
  for (const ExportfsEntry* e : EntriesOf(live, path)) {
    if (e->client == "*") {
      a.params.acl_enabled = false;
    } else {
      a.allowed_hosts.insert(e->client);
    }
    bool squashes =
        std::find(e->options.begin(), e->options.end(), "no_root_squash") == e->options.end();
    squash_modes.insert(squashes);
    if (!OptionsMatch(e->options, fsid_opt, std::nullopt, subtree_check)) {
      a.drift.push_back(Cat("client ", e->client, " has options ", Join(e->options, ','),
                            ", not pillar's ",
                            NfsExportOptions(agent_volume_id, squashes, subtree_check)));
    }
  }
  // Any client without squashing makes the export unsquashed: the weaker mode wins.
  a.params.root_squash = squash_modes.count(false) == 0;
  if (squash_modes.size() > 1) a.drift.push_back("clients differ in root squashing");
  if (!a.params.acl_enabled && !a.allowed_hosts.empty()) {
    a.drift.push_back("clients exported besides *: Apply keeps * alone");
  }
  return a;
}

Status NfsExporter::Unexport(const std::string& client, const std::string& path, bool absent_ok) {
  Command cmd{{"exportfs", "-u", ClientArg(client, path)}, "", std::chrono::seconds(30)};
  auto ran = exec_.Run(cmd);
  Forget();
  ASSIGN_OR_RETURN(ExecResult r, std::move(ran));
  if (r.exit_code == 0) return Status::Ok();
  if (absent_ok && r.err.find("Could not find") != std::string::npos) return Status::Ok();
  return Internal("command '" + cmd.ToString() + "' exited " + std::to_string(r.exit_code) + ": " +
                  r.err);
}

Status NfsExporter::Validate(const KernelExport& want) {
  const std::string& id = want.agent_volume_id;
  const std::string& path = want.backing;
  RETURN_IF_ERROR(validate::AgentVolumeId("agent volume id", id));
  RETURN_IF_ERROR(ValidateExportPath("nfs export directory", path));
  if (want.target_id != path) {
    return InvalidArgument("nfs export of " + id + ": target id \"" + want.target_id +
                           "\" must equal the exported directory \"" + path + "\"");
  }
  if (want.params.port != 0 && want.params.port != kNfsPort) {
    return InvalidArgument("nfs export of " + id + ": port " + std::to_string(want.params.port) +
                           " cannot be served; knfsd serves every export on its one port " +
                           std::to_string(kNfsPort) + " (use 0 or 2049)");
  }
  RETURN_IF_ERROR(validate::IpAddress("nfs bind address", want.params.bind_address));
  if (want.params.in_capsule_data_size != 0) {
    return InvalidArgument("nfs export of " + id +
                           ": in-capsule data size applies to NVMe-oF only");
  }
  for (const auto& host : want.allowed_hosts) {
    RETURN_IF_ERROR(validate::IpOrCidr("nfs client of " + id, host));
  }
  if (!fs_.IsDir(path)) {
    return FailedPrecondition("nfs export of " + id + ": directory " + path +
                              " does not exist; the backend volume must provide it");
  }
  return Status::Ok();
}

StatusOr<NfsExporter::Plan> NfsExporter::Prepare(const KernelExport& want,
                                                 const StatusOr<std::string>& mountinfo,
                                                 const ExportfsTable& live,
                                                 std::vector<std::string>* changes) {
  const std::string& id = want.agent_volume_id;
  Plan plan;
  plan.path = want.backing;
  const std::string& path = plan.path;
  plan.clients = want.params.acl_enabled ? want.allowed_hosts : std::set<std::string>{"*"};
  plan.subtree_check = !mountinfo.ok() || !IsFilesystemRoot(*mountinfo, path);
  plan.root_squash = want.params.root_squash;
  plan.opts = NfsExportOptions(id, want.params.root_squash, plan.subtree_check);
  plan.fsid_opt = "fsid=" + NfsFsid(id);
  std::string file = ExportsFile(id);
  std::string content = RenderFile(id, path, want.params, plan.clients, plan.subtree_check);
  auto existing = fs_.ReadFile(file);
  ASSIGN_OR_RETURN(auto record, ParseRecord(file, existing, id));
  // Persist first: the file is what survives an nfs-server restart, and a
  // narrowing is then durable before it is live.
  if (!existing.ok() || *existing != content) {
    RETURN_IF_ERROR(fs_.MakeDirs(exports_dir_));
    RETURN_IF_ERROR(fs_.WriteFileAtomic(file, content));
    changes->push_back(Cat("nfs ", path, ": wrote ", file));
  }
  // The volume moved to another directory: the old one is exported no more.
  if (record && record->path != path) {
    plan.old_path = record->path;
    for (const ExportfsEntry* e : EntriesOf(live, record->path)) {
      plan.removals.push_back({e->client, record->path});
    }
  }
  std::map<std::string, const ExportfsEntry*> have;
  for (const ExportfsEntry* e : EntriesOf(live, path)) {
    if (!plan.clients.count(e->client)) {
      plan.removals.push_back({e->client, path});
    } else {
      have[e->client] = e;
    }
  }
  for (const auto& client : plan.clients) {
    auto it = have.find(client);
    if (it == have.end()) {
      plan.additions.push_back({client, std::nullopt});
    } else if (!OptionsMatch(it->second->options, plan.fsid_opt, want.params.root_squash,
                             plan.subtree_check)) {
      plan.additions.push_back({client, Join(it->second->options, ',')});
    }
  }
  return plan;
}

// The lines a converged plan reports, in the order the changes were made.
void NfsExporter::Report(const Plan& plan, std::vector<std::string>* changes) {
  for (const auto& [client, path] : plan.removals) {
    changes->push_back(path == plan.path ? Cat("nfs ", path, ": unexported from ", client)
                                         : Cat("nfs ", path, ": unexported from ", client,
                                               " (volume moved to ", plan.path, ")"));
  }
  for (const auto& [client, was] : plan.additions) {
    changes->push_back(
        was ? Cat("nfs ", plan.path, ": re-exported to ", client, " (options were ", *was, ")")
            : Cat("nfs ", plan.path, ": exported to ", client));
  }
}

Status NfsExporter::Apply(const KernelExport& want, std::vector<std::string>* changes) {
  std::vector<std::string> local;
  if (changes == nullptr) changes = &local;
  // Everything is validated before anything is read or run.
  RETURN_IF_ERROR(Validate(want));
  auto mountinfo = fs_.ReadFile(mountinfo_);
  ASSIGN_OR_RETURN(auto live, Observe());
  ASSIGN_OR_RETURN(Plan plan, Prepare(want, mountinfo, *live, changes));
  // Removals before additions, so the live set is never wider than intended.
  for (const auto& [client, path] : plan.removals) {
    RETURN_IF_ERROR(Unexport(client, path, /*absent_ok=*/true));
  }
  for (const auto& [client, was] : plan.additions) {
    Status exported = exec_.RunOk({{"exportfs", "-o", plan.opts, ClientArg(client, plan.path)},
                                   "",
                                   std::chrono::seconds(30)});
    Forget();
    RETURN_IF_ERROR(exported);
  }
  Report(plan, changes);
  return Status::Ok();
}

void NfsExporter::ApplyMany(std::vector<ApplyItem>& items) {
  // One volume: `exportfs -o` per client touches nothing but it.
  if (items.size() < 2) {
    Exporter::ApplyMany(items);
    return;
  }
  std::vector<std::string> local;
  std::vector<std::optional<Plan>> plans(items.size());
  for (auto& item : items) {
    if (item.changes == nullptr) item.changes = &local;
    item.status = Validate(*item.want);
  }
  auto mountinfo = fs_.ReadFile(mountinfo_);
  auto live = Observe();
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].status.ok()) continue;
    if (!live.ok()) {
      items[i].status = live.status();
      continue;
    }
    auto plan = Prepare(*items[i].want, mountinfo, **live, items[i].changes);
    if (!plan.ok()) {
      items[i].status = plan.status();
      continue;
    }
    plans[i] = std::move(*plan);
  }
  // Every removal in one `exportfs -u`, before anything is added: the live
  // set is never wider than intended. A client already gone is no error
  // (the tool says "Could not find" and goes on with the others); what
  // counts is the table afterwards.
  Command unexport{{"exportfs", "-u"}, "", std::chrono::seconds(120)};
  bool add = false;
  for (const auto& plan : plans) {
    if (!plan) continue;
    for (const auto& [client, path] : plan->removals) {
      unexport.argv.push_back(ClientArg(client, path));
    }
    add = add || !plan->additions.empty();
  }
  std::string said;  // what the tools said, for an item they failed
  auto run = [&](const Command& cmd) {
    auto ran = exec_.Run(cmd);
    Forget();
    if (!ran.ok()) {
      said += Cat("'", cmd.argv[0], " ", cmd.argv[1], "' did not run: ", ran.status().message());
    } else if (ran->exit_code != 0) {
      said += Cat("'", cmd.argv[0], " ", cmd.argv[1], "' exited ", std::to_string(ran->exit_code),
                  ": ", ran->err.substr(0, 2000));
    }
  };
  if (unexport.argv.size() > 2) run(unexport);
  // Every addition and option change from the files just written, in one
  // run: `exportfs -a` exports what exports.d and /etc/exports say and keeps
  // what the table has besides (exports made with -o, by pillar or by hand),
  // unlike `exportfs -r`, which would drop them.
  if (add) run({{"exportfs", "-a"}, "", std::chrono::seconds(120)});
  if (unexport.argv.size() == 2 && !add) {
    for (size_t i = 0; i < items.size(); ++i) {
      if (plans[i]) Report(*plans[i], items[i].changes);
    }
    return;
  }
  // Each volume answers from the table as it is now.
  auto after = Observe();
  for (size_t i = 0; i < items.size(); ++i) {
    if (!plans[i]) continue;
    if (!after.ok()) {
      items[i].status = after.status();
      continue;
    }
    const Plan& plan = *plans[i];
    std::string wrong;
    const std::vector<const ExportfsEntry*> now = EntriesOf(**after, plan.path);
    for (const ExportfsEntry* e : now) {
      if (!plan.clients.count(e->client)) wrong += Cat("; ", e->client, " is still exported");
    }
    if (plan.old_path) {
      for (const ExportfsEntry* e : EntriesOf(**after, *plan.old_path)) {
        wrong += Cat("; ", e->client, " is still exported ", *plan.old_path);
      }
    }
    for (const auto& client : plan.clients) {
      bool found = false;
      for (const ExportfsEntry* e : now) {
        if (e->client != client) continue;
        found = OptionsMatch(e->options, plan.fsid_opt, plan.root_squash, plan.subtree_check);
      }
      if (!found) wrong += Cat("; ", client, " is not exported with ", plan.opts);
    }
    if (!wrong.empty()) {
      items[i].status = Internal(Cat("nfs export of ", items[i].want->agent_volume_id, " at ",
                                     plan.path, ": after the batch's exportfs", wrong.substr(1),
                                     said.empty() ? "" : "; " + said));
      continue;
    }
    Report(plan, items[i].changes);
  }
}

StatusOr<std::optional<ActualExport>> NfsExporter::Get(const std::string& agent_volume_id) {
  RETURN_IF_ERROR(validate::AgentVolumeId("agent volume id", agent_volume_id));
  ASSIGN_OR_RETURN(auto record, ReadRecord(ExportsFile(agent_volume_id), agent_volume_id));
  ASSIGN_OR_RETURN(auto live, Observe());
  ASSIGN_OR_RETURN(auto path, PathOf(agent_volume_id, record, *live));
  if (!path) return std::optional<ActualExport>();
  return std::optional<ActualExport>(Describe(agent_volume_id, *path, record, *live));
}

StatusOr<std::vector<ActualExport>> NfsExporter::List() {
  std::vector<ActualExport> out;
  auto entries = fs_.ListDir(exports_dir_);
  if (!entries.ok()) {
    if (entries.status().code() == Code::kNotFound) return out;
    return Internal("nfs exports directory " + exports_dir_ +
                    " cannot be listed: " + entries.status().message());
  }
  std::vector<Record> records;
  const std::string prefix = kFilePrefix;
  const std::string suffix = kFileSuffix;
  for (const auto& e : *entries) {
    const std::string& name = e.name;
    if (e.type != DirEntry::Type::kFile || name.size() <= prefix.size() + suffix.size() ||
        name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    std::string stem = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    auto id = AgentVolumeIdFromTarget("x", "x:" + stem);
    if (!id || !validate::AgentVolumeId("id", *id).ok()) continue;  // not a name pillar writes
    ASSIGN_OR_RETURN(auto record, ReadRecord(JoinPath(exports_dir_, name), *id));
    if (record) records.push_back(std::move(*record));
  }
  if (records.empty()) return out;
  ASSIGN_OR_RETURN(auto live, Observe());
  for (const auto& r : records) {
    out.push_back(Describe(r.agent_volume_id, r.path, r, *live));
  }
  return out;
}

Status NfsExporter::Remove(const std::string& agent_volume_id, std::vector<std::string>* changes) {
  std::vector<std::string> local;
  if (changes == nullptr) changes = &local;
  RETURN_IF_ERROR(validate::AgentVolumeId("agent volume id", agent_volume_id));
  std::string file = ExportsFile(agent_volume_id);
  ASSIGN_OR_RETURN(auto record, ReadRecord(file, agent_volume_id));
  ASSIGN_OR_RETURN(auto live, Observe());
  ASSIGN_OR_RETURN(auto path, PathOf(agent_volume_id, record, *live));
  // The file goes first: should an unexport fail, a restart cannot bring the
  // export back, and the retry still finds the live entries by their fsid.
  if (record) {
    RETURN_IF_ERROR(fs_.Unlink(file));
    changes->push_back(Cat("nfs ", *path, ": removed ", file));
  }
  if (!path) return Status::Ok();
  for (const ExportfsEntry* e : EntriesOf(*live, *path)) {
    RETURN_IF_ERROR(Unexport(e->client, *path, /*absent_ok=*/true));
    changes->push_back(Cat("nfs ", *path, ": unexported from ", e->client));
  }
  return Status::Ok();
}

std::string NfsExporter::StateToken() {
  // What a reset would lose is the live table (nfs-utils' etab), and the
  // persisted files already restore it at every nfs-server start; nfsd
  // itself exposes no restart counter. So the token only tells whether nfsd
  // runs; a table edited or flushed while it runs is repaired by the
  // controller's periodic resync.
  auto threads = fs_.ReadFile(JoinPath(nfsd_proc_, "threads"));
  if (!threads.ok()) return "";
  int64_t n = 0;
  bool digits = false;
  for (char c : *threads) {
    if (c >= '0' && c <= '9') {
      n = n * 10 + (c - '0');
      digits = true;
      if (n > 1'000'000) break;
    } else if (c != '\n' && c != ' ') {
      return "";
    }
  }
  return digits && n > 0 ? "nfsd" : "";
}

}  // namespace pillar::agent
