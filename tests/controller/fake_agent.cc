#include "controller/fake_agent.h"

#include <algorithm>
#include <set>

#include "common/protocol_proto.h"
#include "common/target_name.h"

namespace pillar::controller::testing {

namespace {

// The names the real agent gives its targets with its default prefixes.
std::string TargetId(const std::string& agent_volume_id, av1::Protocol p) {
  switch (p) {
    case av1::PROTOCOL_ISCSI:
      return TargetName(kDefaultIqnPrefix, agent_volume_id);
    case av1::PROTOCOL_NFS:
      return "/srv/pillar/" + agent_volume_id;
    default:
      return TargetName(kDefaultNqnPrefix, agent_volume_id);
  }
}

bool SameExport(const av1::Export& a, const av1::Export& b) {
  return a.spec().SerializeAsString() == b.spec().SerializeAsString() &&
         std::vector<std::string>(a.allowed_hosts().begin(), a.allowed_hosts().end()) ==
             std::vector<std::string>(b.allowed_hosts().begin(), b.allowed_hosts().end()) &&
         a.enabled() == b.enabled();
}

}  // namespace

std::string FakeAgent::Key(const std::string& agent_volume_id, av1::Protocol p) {
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

Status FakeAgent::CheckFenceLocked(const std::string& agent_volume_id, const av1::Fence& fence) {
  auto it = marks_.find(agent_volume_id);
  if (it == marks_.end()) return Status::Ok();
  if (it->second.volume_uid() != fence.volume_uid()) {
    return Aborted("fenced: " + agent_volume_id + " belongs to lifecycle " +
                   it->second.volume_uid() + ", not " + fence.volume_uid());
  }
  if (fence.publication_generation() < it->second.publication_generation()) {
    return Aborted("fenced: " + agent_volume_id + " holds generation " +
                   std::to_string(it->second.publication_generation()) + ", offered " +
                   std::to_string(fence.publication_generation()));
  }
  return Status::Ok();
}

StatusOr<av1::GetInfoResponse> FakeAgent::GetInfo() {
  Status s = Enter(AgentCall::kGetInfo);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  av1::GetInfoResponse resp;
  resp.set_node_name("fake-storage-node");
  resp.set_boot_epoch(boot_epoch_);
  for (const auto& p : pools_) *resp.add_pools() = p;
  return resp;
}

StatusOr<av1::CreateVolumeResponse> FakeAgent::CreateVolume(const av1::CreateVolumeRequest& r) {
  Status s = Enter(AgentCall::kCreateVolume);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  creates_.push_back(r);
  std::string id = r.pool() + "/" + r.name();
  auto mark = marks_.find(id);
  if (mark != marks_.end() && mark->second.volume_uid() != r.volume_uid()) {
    return AlreadyExists("volume " + id + " belongs to another lifecycle");
  }
  auto& v = volumes_[id];
  if (v.agent_volume_id().empty()) {
    v.set_agent_volume_id(id);
    v.set_pool(r.pool());
    v.set_name(r.name());
    v.set_size_bytes(r.size_bytes());
    v.set_mode(r.mode());
    v.set_backend("file");
    v.set_volume_uid(r.volume_uid());
  }
  if (mark == marks_.end()) marks_[id].set_volume_uid(r.volume_uid());
  av1::CreateVolumeResponse resp;
  *resp.mutable_volume() = v;
  return resp;
}

StatusOr<av1::ExpandVolumeResponse> FakeAgent::ExpandVolume(const av1::ExpandVolumeRequest& r) {
  Status s = Enter(AgentCall::kExpandVolume);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  auto it = volumes_.find(r.agent_volume_id());
  if (it == volumes_.end()) return NotFound("volume " + r.agent_volume_id() + " does not exist");
  // As the real agent: only the volume's own lifecycle may grow it.
  auto mark = marks_.find(r.agent_volume_id());
  if (mark != marks_.end() && mark->second.volume_uid() != r.volume_uid()) {
    return FailedPrecondition("volume " + r.agent_volume_id() + " is not lifecycle " +
                              r.volume_uid() + "'s");
  }
  it->second.set_size_bytes(std::max(it->second.size_bytes(), r.size_bytes()));
  av1::ExpandVolumeResponse resp;
  *resp.mutable_volume() = it->second;
  return resp;
}

Status FakeAgent::DeleteVolume(const av1::DeleteVolumeRequest& r) {
  Status s = Enter(AgentCall::kDeleteVolume);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  auto mark = marks_.find(r.agent_volume_id());
  if (mark != marks_.end() && mark->second.volume_uid() != r.volume_uid()) {
    return Aborted("volume " + r.agent_volume_id() + " belongs to another lifecycle");
  }
  if (volumes_.erase(r.agent_volume_id()) == 0) {
    return NotFound("volume " + r.agent_volume_id() + " does not exist");
  }
  marks_.erase(r.agent_volume_id());
  return Status::Ok();
}

StatusOr<av1::GetCapacityResponse> FakeAgent::GetCapacity(const av1::GetCapacityRequest& r) {
  Status s = Enter(AgentCall::kGetCapacity);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  av1::GetCapacityResponse resp;
  for (const auto& p : pools_) {
    if (r.pool().empty() || p.name() == r.pool()) *resp.add_pools() = p;
  }
  if (!r.pool().empty() && resp.pools().empty()) return NotFound("pool " + r.pool());
  return resp;
}

StatusOr<av1::ApplyExportResponse> FakeAgent::ApplyExport(const av1::ApplyExportRequest& r) {
  Status s = Enter(AgentCall::kApplyExport);
  std::lock_guard<std::mutex> lock(mu_);
  applies_.push_back(r);
  if (!s.ok()) return s;
  RETURN_IF_ERROR(CheckFenceLocked(r.agent_volume_id(), r.fence()));
  av1::Export next;
  next.set_agent_volume_id(r.agent_volume_id());
  next.set_protocol(r.protocol());
  next.set_target_id(TargetId(r.agent_volume_id(), r.protocol()));
  *next.mutable_spec() = r.spec();
  std::set<std::string> hosts(r.allowed_hosts().begin(), r.allowed_hosts().end());
  for (const auto& h : hosts) next.add_allowed_hosts(h);
  next.set_backing("/dev/fake/" + r.agent_volume_id());
  next.set_enabled(true);
  marks_[r.agent_volume_id()] = r.fence();
  *next.mutable_fence() = r.fence();
  if (rewrite_apply_) rewrite_apply_(next);

  av1::ApplyExportResponse resp;
  std::string key = Key(r.agent_volume_id(), r.protocol());
  auto have = exports_.find(key);
  if (have == exports_.end()) {
    resp.add_changes("created export " + next.target_id());
  } else if (!SameExport(have->second, next)) {
    resp.add_changes("updated export " + next.target_id());
  }
  exports_[key] = next;
  *resp.mutable_export_() = next;
  return resp;
}

StatusOr<av1::GetExportResponse> FakeAgent::GetExport(const av1::GetExportRequest& r) {
  Status s = Enter(AgentCall::kGetExport);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  auto it = exports_.find(Key(r.agent_volume_id(), r.protocol()));
  if (it == exports_.end()) return NotFound("no export of " + r.agent_volume_id());
  av1::GetExportResponse resp;
  *resp.mutable_export_() = it->second;
  return resp;
}

StatusOr<av1::ListExportsResponse> FakeAgent::ListExports() {
  Status s = Enter(AgentCall::kListExports);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  av1::ListExportsResponse resp;
  for (const auto& [key, e] : exports_) *resp.add_exports() = e;
  return resp;
}

StatusOr<av1::UnexportVolumeResponse> FakeAgent::UnexportVolume(
    const av1::UnexportVolumeRequest& r) {
  Status s = Enter(AgentCall::kUnexportVolume);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) return s;
  RETURN_IF_ERROR(CheckFenceLocked(r.agent_volume_id(), r.fence()));
  marks_[r.agent_volume_id()] = r.fence();
  av1::UnexportVolumeResponse resp;
  if (exports_.erase(Key(r.agent_volume_id(), r.protocol())) > 0) {
    resp.add_changes("removed export of " + r.agent_volume_id());
  }
  return resp;
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

void FakeAgent::RewriteApply(std::function<void(av1::Export&)> rewrite) {
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

void FakeAgent::SetExport(const av1::Export& e) {
  std::lock_guard<std::mutex> lock(mu_);
  exports_[Key(e.agent_volume_id(), e.protocol())] = e;
  if (e.fence().volume_uid().empty()) {
    marks_.erase(e.agent_volume_id());
  } else {
    marks_[e.agent_volume_id()] = e.fence();
  }
}

std::optional<av1::Export> FakeAgent::ExportOf(const std::string& agent_volume_id, Protocol p) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = exports_.find(Key(agent_volume_id, ToProto(p)));
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
  av1::Pool p;
  p.set_name(name);
  p.set_backend("file");
  p.set_total_bytes(total_bytes);
  p.set_available_bytes(available_bytes);
  pools_.push_back(p);
}

void FakeAgent::AddVolume(const std::string& agent_volume_id, int64_t size_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& v = volumes_[agent_volume_id];
  v.set_agent_volume_id(agent_volume_id);
  v.set_size_bytes(size_bytes);
}

std::optional<av1::Volume> FakeAgent::VolumeOf(const std::string& agent_volume_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = volumes_.find(agent_volume_id);
  if (it == volumes_.end()) return std::nullopt;
  return it->second;
}

std::optional<av1::Fence> FakeAgent::MarkOf(const std::string& agent_volume_id) {
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

std::vector<av1::ApplyExportRequest> FakeAgent::Applies() {
  std::lock_guard<std::mutex> lock(mu_);
  return applies_;
}

std::vector<av1::CreateVolumeRequest> FakeAgent::Creates() {
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
