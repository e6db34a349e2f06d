#include "controller/fake_agent.h"

#include <algorithm>
#include <set>

#include "common/target_name.h"

namespace pillar::controller::testing {

namespace {

// The names the real agent gives its targets with its default prefixes.
std::string TargetId(const std::string& agent_volume_id, Protocol p) {
  switch (p) {
    case Protocol::kIscsi:
      return TargetName(kDefaultIqnPrefix, agent_volume_id);
    case Protocol::kNfs:
      return "/srv/pillar/" + agent_volume_id;
    case Protocol::kNvmeofTcp:
      break;
  }
  return TargetName(kDefaultNqnPrefix, agent_volume_id);
}

bool SameExport(const agent_api::Export& a, const agent_api::Export& b) {
  return a.spec == b.spec && a.allowed_hosts == b.allowed_hosts && a.enabled == b.enabled;
}

}  // namespace

std::string FakeAgent::Key(const std::string& agent_volume_id, Protocol p) {
  return agent_volume_id + "#" + std::to_string(static_cast<int>(p));
}

Status FakeAgent::Enter(AgentCall call) {
  std::function<void(AgentCall)> hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    calls_[call]++;
    hook = hook_;
  }
  if (hook) hook(call);
  std::unique_lock<std::mutex> lock(mu_);
  in_flight_++;
  max_in_flight_ = std::max(max_in_flight_, in_flight_);
  cv_.notify_all();
  cv_.wait(lock, [this] { return !held_; });
  in_flight_--;
  cv_.notify_all();
  auto it = failures_.find(call);
  return it == failures_.end() ? Status::Ok() : it->second;
}

Status FakeAgent::CheckFenceLocked(const std::string& agent_volume_id,
                                   const agent_api::Fence& fence) {
  auto it = marks_.find(agent_volume_id);
  if (it == marks_.end()) return Status::Ok();
  if (it->second.volume_uid != fence.volume_uid) {
    return Aborted("fenced: " + agent_volume_id + " belongs to lifecycle " + it->second.volume_uid +
                   ", not " + fence.volume_uid);
  }
  if (fence.publication_generation < it->second.publication_generation) {
    return Aborted("fenced: " + agent_volume_id + " holds generation " +
                   std::to_string(it->second.publication_generation) + ", offered " +
                   std::to_string(fence.publication_generation));
  }
  return Status::Ok();
}

StatusOr<agent_api::Info> FakeAgent::GetInfo() {
  Status s = Enter(AgentCall::kGetInfo);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  agent_api::Info info;
  info.node_name = "fake-storage-node";
  info.boot_epoch = boot_epoch_;
  info.pools = pools_;
  return info;
}

StatusOr<agent_api::Volume> FakeAgent::CreateVolume(const agent_api::CreateVolumeRequest& r) {
  Status s = Enter(AgentCall::kCreateVolume);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  creates_.push_back(r);
  std::string id = r.pool + "/" + r.name;
  auto mark = marks_.find(id);
  if (mark != marks_.end() && mark->second.volume_uid != r.volume_uid) {
    return AlreadyExists("volume " + id + " belongs to another lifecycle");
  }
  if (r.source && !volumes_.contains(id)) {
    // As the real agent: the source must exist in the pool, carry the
    // caller's uid, and fit in the new volume.
    int64_t source_size = 0;
    if (!r.source->agent_snapshot_id.empty()) {
      auto snap = snapshots_.find(r.source->agent_snapshot_id);
      if (snap == snapshots_.end()) {
        return NotFound("snapshot " + r.source->agent_snapshot_id + " not found");
      }
      if (snap->second.owner_uid != r.source->source_uid) {
        return FailedPrecondition("snapshot " + r.source->agent_snapshot_id +
                                  " belongs to another lifecycle");
      }
      source_size = snap->second.size_bytes;
    } else {
      auto src = volumes_.find(r.source->agent_volume_id);
      if (src == volumes_.end()) {
        return NotFound("volume " + r.source->agent_volume_id + " not found");
      }
      if (src->second.owner_uid != r.source->source_uid) {
        return FailedPrecondition("volume " + r.source->agent_volume_id +
                                  " belongs to another lifecycle");
      }
      source_size = src->second.size_bytes;
    }
    if (r.size_bytes < source_size) {
      return OutOfRange("size " + std::to_string(r.size_bytes) + " is below the source's " +
                        std::to_string(source_size));
    }
  }
  auto& v = volumes_[id];
  if (v.agent_volume_id.empty()) {
    if (r.source) {
      v.origin = r.source->agent_snapshot_id.empty() ? "volume " + r.source->agent_volume_id
                                                     : "snapshot " + r.source->agent_snapshot_id;
    }
    v.owner_uid = r.volume_uid;
    v.agent_volume_id = id;
    v.pool = r.pool;
    v.name = r.name;
    v.size_bytes = r.size_bytes;
    v.mode = r.mode;
    v.backend = "file";
    v.volume_uid = r.volume_uid;
  }
  if (mark == marks_.end()) marks_[id].volume_uid = r.volume_uid;
  return v;
}

StatusOr<agent_api::Volume> FakeAgent::ExpandVolume(const agent_api::ExpandVolumeRequest& r) {
  Status s = Enter(AgentCall::kExpandVolume);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  auto it = volumes_.find(r.agent_volume_id);
  if (it == volumes_.end()) return NotFound("volume " + r.agent_volume_id + " does not exist");
  // As the real agent: only the volume's own lifecycle may grow it.
  auto mark = marks_.find(r.agent_volume_id);
  if (mark != marks_.end() && mark->second.volume_uid != r.volume_uid) {
    return FailedPrecondition("volume " + r.agent_volume_id + " is not lifecycle " + r.volume_uid +
                              "'s");
  }
  it->second.size_bytes = std::max(it->second.size_bytes, r.size_bytes);
  return it->second;
}

Status FakeAgent::DeleteVolume(const agent_api::DeleteVolumeRequest& r) {
  Status s = Enter(AgentCall::kDeleteVolume);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  auto mark = marks_.find(r.agent_volume_id);
  if (mark != marks_.end() && mark->second.volume_uid != r.volume_uid) {
    return Aborted("volume " + r.agent_volume_id + " belongs to another lifecycle");
  }
  if (volumes_.erase(r.agent_volume_id) == 0) {
    return NotFound("volume " + r.agent_volume_id + " does not exist");
  }
  marks_.erase(r.agent_volume_id);
  return Status::Ok();
}

StatusOr<std::vector<agent_api::Pool>> FakeAgent::GetCapacity(const std::string& pool) {
  Status s = Enter(AgentCall::kGetCapacity);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  std::vector<agent_api::Pool> out;
  for (const auto& p : pools_) {
    if (pool.empty() || p.name == pool) out.push_back(p);
  }
  if (!pool.empty() && out.empty()) return NotFound("pool " + pool);
  return out;
}

StatusOr<agent_api::ApplyExportResult> FakeAgent::ApplyExport(
    const agent_api::ApplyExportRequest& r) {
  Status s = Enter(AgentCall::kApplyExport);
  std::lock_guard<std::mutex> lock(mu_);
  applies_.push_back(r);
  if (!s.ok()) return s;
  return ApplyLocked(r);
}

StatusOr<std::vector<agent_api::ApplyExportItem>> FakeAgent::ApplyExports(
    const std::vector<agent_api::ApplyExportRequest>& rs) {
  Status s = Enter(AgentCall::kApplyExports);
  std::lock_guard<std::mutex> lock(mu_);
  batches_.push_back(rs.size());
  if (!s.ok()) return s;
  std::set<std::string> ids;
  for (const auto& r : rs) {
    if (!ids.insert(r.agent_volume_id).second) {
      return InvalidArgument("volumes[]: " + r.agent_volume_id + " is named twice");
    }
  }
  std::vector<agent_api::ApplyExportItem> out;
  for (const auto& r : rs) {
    applies_.push_back(r);
    auto one = ApplyLocked(r);
    out.push_back(one.ok() ? agent_api::ApplyExportItem{Status::Ok(), std::move(*one)}
                           : agent_api::ApplyExportItem{one.status(), {}});
  }
  return out;
}

StatusOr<agent_api::ApplyExportResult> FakeAgent::ApplyLocked(
    const agent_api::ApplyExportRequest& r) {
  RETURN_IF_ERROR(CheckFenceLocked(r.agent_volume_id, r.fence));
  agent_api::Export next;
  next.agent_volume_id = r.agent_volume_id;
  next.protocol = r.protocol;
  next.target_id = TargetId(r.agent_volume_id, r.protocol);
  next.spec = r.spec;
  std::set<std::string> hosts(r.allowed_hosts.begin(), r.allowed_hosts.end());
  next.allowed_hosts.assign(hosts.begin(), hosts.end());
  next.backing = "/dev/fake/" + r.agent_volume_id;
  next.enabled = true;
  marks_[r.agent_volume_id] = r.fence;
  next.fence = r.fence;
  if (rewrite_apply_) rewrite_apply_(next);

  agent_api::ApplyExportResult result;
  std::string key = Key(r.agent_volume_id, r.protocol);
  auto have = exports_.find(key);
  if (have == exports_.end()) {
    result.changes.push_back("created export " + next.target_id);
  } else if (!SameExport(have->second, next)) {
    result.changes.push_back("updated export " + next.target_id);
  }
  exports_[key] = next;
  result.actual = next;
  return result;
}

StatusOr<agent_api::Export> FakeAgent::GetExport(const std::string& agent_volume_id,
                                                 Protocol protocol) {
  Status s = Enter(AgentCall::kGetExport);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  auto it = exports_.find(Key(agent_volume_id, protocol));
  if (it == exports_.end()) return NotFound("no export of " + agent_volume_id);
  return it->second;
}

StatusOr<std::vector<agent_api::Export>> FakeAgent::ListExports() {
  Status s = Enter(AgentCall::kListExports);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  std::vector<agent_api::Export> out;
  for (const auto& [key, e] : exports_) out.push_back(e);
  return out;
}

StatusOr<std::vector<std::string>> FakeAgent::UnexportVolume(
    const agent_api::UnexportVolumeRequest& r) {
  Status s = Enter(AgentCall::kUnexportVolume);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  RETURN_IF_ERROR(CheckFenceLocked(r.agent_volume_id, r.fence));
  marks_[r.agent_volume_id] = r.fence;
  std::vector<std::string> changes;
  if (exports_.erase(Key(r.agent_volume_id, r.protocol)) > 0) {
    changes.push_back("removed export of " + r.agent_volume_id);
  }
  return changes;
}

void FakeAgent::FailWith(AgentCall call, Status s) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_[call] = std::move(s);
}

void FakeAgent::ClearFailure(AgentCall call) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.erase(call);
}

void FakeAgent::OnCall(std::function<void(AgentCall)> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  hook_ = std::move(hook);
}

void FakeAgent::RewriteApply(std::function<void(agent_api::Export&)> rewrite) {
  std::lock_guard<std::mutex> lock(mu_);
  rewrite_apply_ = std::move(rewrite);
}

void FakeAgent::Hold() {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = true;
}

void FakeAgent::Release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false;
  }
  cv_.notify_all();
}

void FakeAgent::SetExport(const agent_api::Export& e) {
  std::lock_guard<std::mutex> lock(mu_);
  // An export of no known protocol is kept where no lookup by protocol finds it.
  exports_[e.protocol ? Key(e.agent_volume_id, *e.protocol) : e.agent_volume_id + "#?"] = e;
  if (!e.fence || e.fence->volume_uid.empty()) {
    marks_.erase(e.agent_volume_id);
  } else {
    marks_[e.agent_volume_id] = *e.fence;
  }
}

std::optional<agent_api::Export> FakeAgent::ExportOf(const std::string& agent_volume_id,
                                                     Protocol p) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = exports_.find(Key(agent_volume_id, p));
  if (it == exports_.end()) return std::nullopt;
  return it->second;
}

void FakeAgent::WipeExports() {
  std::lock_guard<std::mutex> lock(mu_);
  exports_.clear();
}

void FakeAgent::SetBootEpoch(const std::string& epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  boot_epoch_ = epoch;
}

void FakeAgent::AddPool(const std::string& name, int64_t total_bytes, int64_t available_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  agent_api::Pool p;
  p.name = name;
  p.backend = "file";
  p.total_bytes = total_bytes;
  p.available_bytes = available_bytes;
  pools_.push_back(p);
}

void FakeAgent::AddVolume(const std::string& agent_volume_id, int64_t size_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& v = volumes_[agent_volume_id];
  v.agent_volume_id = agent_volume_id;
  v.size_bytes = size_bytes;
}

std::optional<agent_api::Volume> FakeAgent::VolumeOf(const std::string& agent_volume_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = volumes_.find(agent_volume_id);
  if (it == volumes_.end()) return std::nullopt;
  return it->second;
}

std::optional<agent_api::Fence> FakeAgent::MarkOf(const std::string& agent_volume_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = marks_.find(agent_volume_id);
  if (it == marks_.end()) return std::nullopt;
  return it->second;
}

int FakeAgent::Calls(AgentCall call) {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_[call];
}

int FakeAgent::TotalCalls() {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& [call, count] : calls_) n += count;
  return n;
}

int FakeAgent::InFlight() {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

int FakeAgent::MaxInFlight() {
  std::lock_guard<std::mutex> lock(mu_);
  return max_in_flight_;
}

std::vector<agent_api::ApplyExportRequest> FakeAgent::Applies() {
  std::lock_guard<std::mutex> lock(mu_);
  return applies_;
}

std::vector<size_t> FakeAgent::Batches() {
  std::lock_guard<std::mutex> lock(mu_);
  return batches_;
}

StatusOr<agent_api::Snapshot> FakeAgent::CreateSnapshot(const agent_api::CreateSnapshotRequest& r) {
  Status s = Enter(AgentCall::kCreateSnapshot);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  auto src = volumes_.find(r.source_volume_id);
  if (src == volumes_.end()) return NotFound("volume " + r.source_volume_id + " not found");
  if (src->second.owner_uid != r.source_volume_uid) {
    return FailedPrecondition("volume " + r.source_volume_id + " belongs to another lifecycle");
  }
  std::string id = src->second.pool + "/" + r.name;
  auto it = snapshots_.find(id);
  if (it != snapshots_.end()) {
    if (it->second.owner_uid != r.snapshot_uid ||
        it->second.source_volume_id != r.source_volume_id) {
      return AlreadyExists("snapshot " + id + " exists with another source or lifecycle");
    }
    return it->second;
  }
  agent_api::Snapshot snap{.agent_snapshot_id = id,
                           .pool = src->second.pool,
                           .name = r.name,
                           .source_volume_id = r.source_volume_id,
                           .size_bytes = src->second.size_bytes,
                           .creation_time_unix_nanos = clock_nanos_ += 1'000'000'000,
                           .backend = src->second.backend,
                           .owner_uid = r.snapshot_uid,
                           .ready_to_use = true,
                           .used_bytes = 0,
                           .detached = r.detached};
  snapshots_[id] = snap;
  return snap;
}

Status FakeAgent::DeleteSnapshot(const agent_api::DeleteSnapshotRequest& r) {
  Status s = Enter(AgentCall::kDeleteSnapshot);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  auto it = snapshots_.find(r.agent_snapshot_id);
  if (it == snapshots_.end()) return Status::Ok();
  if (it->second.owner_uid != r.snapshot_uid) {
    return FailedPrecondition("snapshot " + r.agent_snapshot_id + " belongs to another lifecycle");
  }
  snapshots_.erase(it);
  return Status::Ok();
}

StatusOr<std::vector<agent_api::Snapshot>> FakeAgent::ListSnapshots(const std::string& pool) {
  Status s = Enter(AgentCall::kListSnapshots);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  std::vector<agent_api::Snapshot> out;
  for (const auto& [id, snap] : snapshots_) {
    if (pool.empty() || snap.pool == pool) out.push_back(snap);
  }
  return out;
}

std::optional<agent_api::Snapshot> FakeAgent::SnapshotOf(const std::string& agent_snapshot_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = snapshots_.find(agent_snapshot_id);
  if (it == snapshots_.end()) return std::nullopt;
  return it->second;
}

void FakeAgent::DropSnapshot(const std::string& agent_snapshot_id) {
  std::lock_guard<std::mutex> lock(mu_);
  snapshots_.erase(agent_snapshot_id);
}

std::vector<agent_api::CreateVolumeRequest> FakeAgent::Creates() {
  std::lock_guard<std::mutex> lock(mu_);
  return creates_;
}

std::shared_ptr<FakeAgent> FakeAgentDirectory::Add(const std::string& agent_ref) {
  std::lock_guard<std::mutex> lock(mu_);
  auto agent = std::make_shared<FakeAgent>();
  agents_[agent_ref] = agent;
  return agent;
}

StatusOr<std::shared_ptr<AgentClient>> FakeAgentDirectory::Client(const std::string& agent_ref,
                                                                  const AgentEndpoint& endpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  client_calls_++;
  endpoints_[agent_ref] = endpoint;
  auto it = agents_.find(agent_ref);
  if (it == agents_.end()) return Unavailable("agent " + agent_ref + ": nothing answers");
  return std::shared_ptr<AgentClient>(it->second);
}

int FakeAgentDirectory::ClientCalls() {
  std::lock_guard<std::mutex> lock(mu_);
  return client_calls_;
}

std::optional<AgentEndpoint> FakeAgentDirectory::LastEndpoint(const std::string& agent_ref) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = endpoints_.find(agent_ref);
  if (it == endpoints_.end()) return std::nullopt;
  return it->second;
}

}  // namespace pillar::controller::testing
