#include "controller/reconciler.h"

#include <atomic>
#include <random>

#include "common/log.h"
#include "controller/controller_metrics.h"
#include "store/retry.h"

namespace pillar::controller {

namespace {

constexpr const char* kVolPrefix = "v/";
constexpr const char* kNodePrefix = "n/";
constexpr const char* kAgentPrefix = "a/";

std::string Join(const std::vector<std::string>& parts, size_t limit = 5) {
  std::string out;
  for (size_t i = 0; i < parts.size() && i < limit; ++i) {
    if (!out.empty()) out += "; ";
    out += parts[i];
  }
  if (parts.size() > limit) out += "; and " + std::to_string(parts.size() - limit) + " more";
  return out;
}

api::Condition MakeCondition(bool ok, const char* reason, std::string message, int64_t generation) {
  return {api::kCondExportReconciled,
          ok ? "True" : "False",
          reason,
          std::move(message),
          "",
          generation};
}

std::string ExportKey(const std::string& id, Protocol p) { return id + "#" + ProtocolName(p); }

// The agent a volume record names ("" when the record does not load: the
// volume's own pass reports it malformed).
std::string AgentRefOf(const store::Object& obj) {
  auto v = api::LoadVolume(obj);
  return v.ok() ? v->spec.agent_ref : "";
}

// A record with Provisioned=False whose creationTimestamp is older than `ttl`
// (a record that is being deleted is DeleteVolume's).
bool AbandonedCreate(const store::Object& obj, std::chrono::system_clock::time_point now,
                     std::chrono::milliseconds ttl) {
  auto v = api::LoadVolume(obj);
  if (!v.ok() || api::IsProvisioned(v->status) || v->status.deleting ||
      v->meta.deletion_timestamp) {
    return false;
  }
  auto created = ParseRfc3339(obj.creation_timestamp);
  return created && now - *created > ttl;
}

}  // namespace

ExportReconciler::ExportReconciler(store::Store& store, AgentDirectory& agents, Clock& clock,
                                   ReconcilerOptions options)
    : store_(store), agents_(agents), clock_(clock), options_(options) {}

ExportReconciler::~ExportReconciler() { Stop(); }

Status ExportReconciler::Start() {
  cache_ = std::make_unique<store::StoreCache>(
      store_, std::vector<std::string>{api::kKindVolume, api::kKindNode, api::kKindAgent,
                                       api::kKindSnapshot});
  auto own = [this](const std::string& key, const store::Object& o) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = own_writes_.find(key);
    if (it != own_writes_.end() && it->second == o.resource_version) {
      own_writes_.erase(it);
      return true;
    }
    return false;
  };
  cache_->OnChange(api::kKindVolume, [this, own](const store::Event& e) {
    std::string key = kVolPrefix + e.object.name;
    if (e.type != store::EventType::kDeleted && own(key, e.object)) return;
    if (e.type == store::EventType::kDeleted) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        agent_of_.erase(key);
        applied_in_epoch_.erase(e.object.name);
      }
      {
        std::lock_guard<std::mutex> lock(verified_mu_);
        verified_.erase(e.object.name);
        last_verified_.erase(e.object.name);
      }
      NoteRecorded(e.object.name, nullptr);
    }
    EnqueueKey(key, {}, e.type == store::EventType::kDeleted ? "" : AgentRefOf(e.object));
  });
  cache_->OnChange(api::kKindNode, [this](const store::Event& e) {
    records_epoch_++;
    EnqueueKey(kNodePrefix + e.object.name);
  });
  cache_->OnChange(api::kKindAgent, [this, own](const store::Event& e) {
    std::string key = kAgentPrefix + e.object.name;
    if (own(key, e.object)) return;
    records_epoch_++;
    EnqueueKey(key);
  });
  RETURN_IF_ERROR(cache_->Start());
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    threads_.emplace_back([this] { WorkerLoop(); });
  }
  threads_.emplace_back([this] { ResyncLoop(); });
  threads_.emplace_back([this] { EpochLoop(); });
  return Status::Ok();
}

void ExportReconciler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  inflight_cv_.notify_all();
  if (cache_) cache_->Stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

StatusOr<store::Object> ExportReconciler::Read(const std::string& kind,
                                               const std::string& name) const {
  return cache_ ? cache_->Get(kind, name) : store_.Get(kind, name);
}

StatusOr<std::vector<store::Object>> ExportReconciler::ReadAll(const std::string& kind) const {
  if (cache_) return cache_->List(kind);
  ASSIGN_OR_RETURN(store::ListResult list, store_.List(kind));
  return std::move(list.items);
}

StatusOr<std::vector<store::StoreCache::Shared>> ExportReconciler::ReadAllShared(
    const std::string& kind) const {
  if (cache_) return cache_->ListShared(kind);
  ASSIGN_OR_RETURN(store::ListResult list, store_.List(kind));
  std::vector<store::StoreCache::Shared> out;
  out.reserve(list.items.size());
  for (auto& o : list.items) out.push_back(std::make_shared<const store::Object>(std::move(o)));
  return out;
}

void ExportReconciler::EnqueueVolume(const std::string& volume) { EnqueueKey(kVolPrefix + volume); }

void ExportReconciler::EnqueueKey(const std::string& key, std::chrono::milliseconds delay,
                                  const std::string& agent) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    if (!agent.empty()) agent_of_[key] = agent;
    if (delay.count() > 0) {
      auto at = clock_.SteadyNow() + delay;
      auto& nb = not_before_[key];
      if (nb < at) nb = at;
    }
    if (queued_.insert(key).second) queue_.push_back(key);
  }
  // All: the resync and epoch loops wait on cv_ too, and a notify_one they
  // took would leave the key unseen while every idle worker sleeps.
  cv_.notify_all();
}

std::string ExportReconciler::AgentOfKeyLocked(const std::string& key) const {
  if (key.rfind(kAgentPrefix, 0) == 0) return key.substr(2);
  auto it = agent_of_.find(key);
  return it == agent_of_.end() ? "" : it->second;
}

int ExportReconciler::WorkerCapPerAgent() const {
  const int workers = std::max(1, options_.workers);
  if (options_.max_workers_per_agent > 0) {
    return std::min(options_.max_workers_per_agent, std::max(1, workers - 1));
  }
  return std::max(1, workers / 2);
}

void ExportReconciler::WorkerLoop() {
  while (true) {
    std::string key;
    std::string agent;  // whose busy count this worker holds, if any
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (true) {
        if (stopping_) return;
        auto now = clock_.SteadyNow();
        auto next = std::chrono::steady_clock::time_point::max();
        for (auto it = queue_.begin(); it != queue_.end(); ++it) {
          auto nb = not_before_.find(*it);
          if (nb != not_before_.end() && nb->second > now) {
            next = std::min(next, nb->second);
            continue;
          }
          // A key of an agent whose share of the workers is busy waits
          // (a finishing worker wakes us): the others' keys go first.
          std::string a = AgentOfKeyLocked(*it);
          if (!a.empty() && busy_workers_[a] >= WorkerCapPerAgent()) continue;
          key = *it;
          agent = a;
          queue_.erase(it);
          queued_.erase(key);
          if (nb != not_before_.end()) not_before_.erase(nb);
          if (!agent.empty()) busy_workers_[agent]++;
          break;
        }
        if (!key.empty()) break;
        if (next == std::chrono::steady_clock::time_point::max()) {
          cv_.wait(lock);
        } else {
          cv_.wait_until(lock, next);
        }
      }
    }
    if (agent.empty() && key.rfind(kVolPrefix, 0) == 0) {
      // Not known yet (queued by name): learn it, and count against it or
      // put the key back behind that agent's other keys.
      auto obj = Read(api::kKindVolume, key.substr(2));
      std::string a = obj.ok() ? AgentRefOf(*obj) : "";
      if (!a.empty()) {
        std::lock_guard<std::mutex> lock(mu_);
        agent_of_[key] = a;
        if (busy_workers_[a] >= WorkerCapPerAgent()) {
          if (queued_.insert(key).second) queue_.push_back(key);
          continue;
        }
        busy_workers_[a]++;
        agent = a;
      }
    }
    // However this key's work ends, its agent's share is given back.
    struct Busy {
      ExportReconciler& r;
      const std::string& agent;
      ~Busy() {
        if (agent.empty()) return;
        {
          std::lock_guard<std::mutex> lock(r.mu_);
          if (--r.busy_workers_[agent] <= 0) r.busy_workers_.erase(agent);
        }
        r.cv_.notify_all();
      }
    } busy{*this, agent};
    if (key.rfind(kVolPrefix, 0) == 0) {
      std::string name = key.substr(2);
      auto r = Reconcile(name, std::nullopt, false);
      if (!r.ok() && r.status().code() == Code::kNotFound &&
          store_.Get(api::kKindVolume, name).status().code() == Code::kNotFound) {
        // Deleted while queued (DeleteVolume, or a retry of an earlier
        // failure): nothing left to reconcile, so no retry either.
        RecordFailure(name, false);
      } else if (!r.ok()) {
        log::Warn("reconcile failed", {{"volume", name}, {"error", r.status().ToString()}});
        RecordFailure(name, true);
      } else {
        RecordFailure(name, r->condition.status != "True" &&
                                r->condition.reason != std::string(api::kReasonExportSpecMissing));
      }
    } else if (key.rfind(kNodePrefix, 0) == 0) {
      ExpandNode(key.substr(2));
    } else if (key.rfind(kAgentPrefix, 0) == 0) {
      ResyncAgentNow(key.substr(2));
    }
  }
}

void ExportReconciler::RecordFailure(const std::string& volume, bool failed) {
  std::chrono::milliseconds delay{0};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed) {
      failures_.erase(volume);
      return;
    }
    int n = ++failures_[volume];
    auto d = options_.backoff_base * (1LL << std::min(n - 1, 16));
    delay = std::min<std::chrono::milliseconds>(d, options_.backoff_max);
  }
  EnqueueKey(kVolPrefix + volume, delay);
}

void ExportReconciler::ExpandNode(const std::string& node_id) {
  // A node's identity changed: every volume published to it is recomputed.
  auto list = ReadAllShared(api::kKindVolume);
  if (!list.ok()) return;
  for (const auto& obj : *list) {
    auto v = api::LoadVolume(*obj);
    if (!v.ok()) continue;
    for (const auto& n : v->status.published_nodes) {
      if (n.node_id == node_id) {
        EnqueueKey(kVolPrefix + obj->name, {}, v->spec.agent_ref);
        break;
      }
    }
  }
}

ResyncStats ExportReconciler::ResyncAgentNow(const std::string& agent_ref) {
  ResyncStats stats;
  auto list = ReadAllShared(api::kKindVolume);
  if (!list.ok()) return stats;
  std::vector<const store::Object*> mine;
  for (const auto& obj : *list) {
    if (AgentRefFor(*obj) == agent_ref) mine.push_back(obj.get());
  }
  ResyncAgent(agent_ref, mine, stats);
  return stats;
}

void ExportReconciler::ResyncLoop() {
  std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> jitter(1.0 - options_.resync_jitter,
                                                1.0 + options_.resync_jitter);
  while (true) {
    auto period = std::chrono::milliseconds(
        static_cast<int64_t>(static_cast<double>(options_.resync_interval.count()) * jitter(rng)));
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, period, [this] { return stopping_; });
      if (stopping_) return;
    }
    ResyncStats stats = ResyncAll();
    SnapshotResyncStats snaps = ResyncSnapshots();
    log::Debug("resync done", {{"agents", stats.agents},
                               {"volumes", stats.volumes},
                               {"drifted", stats.drifted},
                               {"statusWrites", stats.status_writes},
                               {"snapshots", snaps.snapshots},
                               {"snapshotWrites", snaps.status_writes}});
  }
}

std::chrono::milliseconds ExportReconciler::NextEpochPoll(bool some_unreachable) const {
  return some_unreachable
             ? std::min(options_.epoch_poll_interval, options_.unreachable_poll_interval)
             : options_.epoch_poll_interval;
}

void ExportReconciler::EpochLoop() {
  bool some_unreachable = false;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, NextEpochPoll(some_unreachable), [this] { return stopping_; });
      if (stopping_) return;
    }
    some_unreachable = PollEpochs();
  }
}

StatusOr<ExportReconciler::AgentView> ExportReconciler::Agent(const std::string& agent_ref) {
  auto obj = Read(api::kKindAgent, agent_ref);
  if (!obj.ok()) {
    if (obj.status().code() == Code::kNotFound) {
      return FailedPrecondition("PillarAgent " + agent_ref + " is not registered");
    }
    return obj.status();
  }
  ASSIGN_OR_RETURN(api::AgentRecord rec, api::LoadAgent(*obj));
  ASSIGN_OR_RETURN(auto client,
                   agents_.Client(agent_ref, {rec.address, rec.port, rec.tls_server_name}));
  return AgentView{std::move(rec), std::move(client)};
}

StatusOr<bool> ExportReconciler::WriteOutcome(const store::Object& obj, const api::Condition& cond,
                                              const std::optional<api::ExportInfo>& info,
                                              std::string* version) {
  // Only the condition and exportInfo are touched; every other status field
  // stays byte-for-byte what the operator or the CSI path wrote.
  std::vector<api::Condition> conds = api::StoredConditions(obj.status);
  const api::Condition* before = api::FindCondition(conds, cond.type);
  const bool transition =
      before == nullptr || before->status != cond.status || before->reason != cond.reason;
  bool changed = api::SetCondition(conds, cond, FormatRfc3339(clock_.Now()));
  store::Object next = obj;
  if (info && api::SetStoredExportInfo(next.status, *info)) changed = true;
  if (!changed) return false;
  api::SetStoredConditions(next.status, conds);
  // `obj` is what this pass read (the cache's copy, or the store's after a
  // lost CAS): the write is made from it, with no read of its own.
  ASSIGN_OR_RETURN(store::Object written, store_.UpdateStatusFrom(obj, next));
  if (transition && options_.events != nullptr) {
    options_.events->Record({std::string(api::kGroup) + "/" + api::kVersion, api::kKindVolume,
                             written.name, written.uid, written.resource_version},
                            cond.status != "True", cond.reason, cond.message);
  }
  if (version != nullptr) *version = written.resource_version;
  std::lock_guard<std::mutex> lock(mu_);
  own_writes_[kVolPrefix + obj.name] = written.resource_version;
  return true;
}

void ExportReconciler::OfferCredentials(const std::string& volume, Credentials credentials) {
  std::lock_guard<std::mutex> lock(credentials_mu_);
  credentials_[volume] = std::move(credentials);
}

StatusOr<ReconcileOutcome> ExportReconciler::ReconcileNow(const std::string& volume) {
  return Reconcile(volume, std::nullopt, true);
}

StatusOr<ReconcileOutcome> ExportReconciler::Reconcile(const std::string& volume,
                                                       const SeenExport& seen, bool fresh,
                                                       const BatchApplied* batched) {
  auto guard = volume_locks_.Lock(volume);
  metrics::ScopedTimer timed(ControllerMetrics::Get().reconcile_duration);

  return store::RetryOnConflict("volume " + volume, [&](int attempt) -> StatusOr<ReconcileOutcome> {
    // The cache is as new as the event that queued this volume; after a lost
    // CAS (or for a caller that just wrote) read the store itself.
    auto obj = attempt == 0 && !fresh ? Read(api::kKindVolume, volume)
                                      : store_.Get(api::kKindVolume, volume);
    if (!obj.ok()) return obj.status();
    ReconcileOutcome out;
    std::optional<api::ExportInfo> info;
    const uint64_t epoch = records_epoch_.load();  // before anything is read
    {
      std::lock_guard<std::mutex> lock(verified_mu_);
      verified_.erase(volume);
    }
    std::optional<LastVerified> last;
    {
      std::lock_guard<std::mutex> lock(verified_mu_);
      auto it = last_verified_.find(volume);
      if (it != last_verified_.end()) last = it->second;
    }
    if (!Converge(*obj, seen, batched, last ? &*last : nullptr, out, info)) {
      // DeleteVolume owns it, or its create has not written its status yet.
      if (out.create_pending) EnqueueKey(kVolPrefix + volume, options_.create_grace);
      return out;
    }
    if (out.repair_cause != nullptr) ControllerMetrics::Get().Repair(out.repair_cause);
    std::string version = obj->resource_version;
    ASSIGN_OR_RETURN(out.status_written, WriteOutcome(*obj, out.condition, info, &version));
    if (NoteRecorded(volume, &out.condition) &&
        out.condition.reason == std::string(api::kReasonExportSpecMissing)) {
      ControllerMetrics::Get().Repair(kCauseSpecMissing);
    }
    if (cache_ && out.condition.status == "True" && out.actual && out.actual->protocol) {
      auto v = api::LoadVolume(*obj);
      if (v.ok()) {
        std::lock_guard<std::mutex> lock(verified_mu_);
        verified_[volume] =
            Verified{version, epoch, v->spec.agent_ref,
                     ExportKey(v->spec.agent_volume_id, *out.actual->protocol), *out.actual};
        last_verified_[volume] = LastVerified{version, *out.actual};
      }
    }
    return out;
  });
}

bool ExportReconciler::Converge(const store::Object& obj, const SeenExport& seen,
                                const BatchApplied* batched, const LastVerified* last,
                                ReconcileOutcome& out, std::optional<api::ExportInfo>& info) {
  auto loaded = api::LoadVolume(obj);
  if (!loaded.ok()) {
    out.condition =
        MakeCondition(false, api::kReasonReconcileFailed,
                      "recorded state is malformed: " + loaded.status().message(), obj.generation);
    return true;
  }
  const api::VolumeState& v = *loaded;
  if (v.meta.deletion_timestamp || v.status.deleting) return false;
  if (obj.status.empty()) {
    auto created = ParseRfc3339(obj.creation_timestamp);
    auto age = created ? clock_.Now() - *created : std::chrono::system_clock::duration::max();
    if (age < options_.create_grace && age > -options_.create_grace) {
      out.create_pending = true;
      return false;
    }
  }
  // The agent has not confirmed this volume's storage: whatever holds its
  // name there may not be pillar's, so nothing is observed, applied or
  // recorded (the Provisioned condition says why).
  if (!api::IsProvisioned(v.status)) {
    out.not_provisioned = true;
    return false;
  }
  auto fail = [&](const char* reason, const std::string& message) {
    out.condition = MakeCondition(false, reason, message, v.meta.generation);
    return true;
  };
  if (!v.status.export_spec) {
    return fail(api::kReasonExportSpecMissing,
                "status.exportSpec is absent; the controller does not guess an export. Record "
                "one (pillarctl repair export-spec)");
  }

  // Decide what the export must be, from the recorded intent only.
  auto desired = DesiredFor(v);
  if (!desired.ok()) {
    return fail(api::kReasonReconcileFailed, desired.status().message() + "; nothing was changed");
  }
  const DesiredExport& want = *desired;
  auto agent = Agent(v.spec.agent_ref);
  if (!agent.ok()) return fail(ReasonForAgentError(agent.status()), agent.status().message());

  // Observe what the agent has (or take what a resync's ListExports saw).
  auto actual = Observe(v, want, *agent->client, seen);
  if (!actual.ok()) return fail(ReasonForAgentError(actual.status()), actual.status().message());
  out.drift = Diff(want, *actual ? &**actual : nullptr);

  // Apply only when something differs, the agent's fence is behind or the
  // agent restarted since this volume was last applied.
  auto reapply_epoch = ReapplyEpoch(v.spec.agent_ref, v.meta.name);
  // What this volume's last pass verified is gone from the agent and no
  // restart is known: ask the agent whether it restarted before repairing,
  // so a volume's own pass that runs before the epoch poll (a retry after
  // AgentUnavailable, say) counts the rebuild as the restart it is.
  if (!reapply_epoch && batched == nullptr && last != nullptr) {
    AsVerified as = CompareToVerified(want, *last, *actual);
    if (as.intent && !as.agent) {
      if (auto rec = Read(api::kKindAgent, v.spec.agent_ref); rec.ok()) (void)PollAgent(*rec);
      reapply_epoch = ReapplyEpoch(v.spec.agent_ref, v.meta.name);
    }
  }
  out.observed = *actual;
  if (NeedsApply(v, *actual ? &**actual : nullptr, out.drift)) {
    std::optional<Credentials> offered = OfferedFor(v, want);
    auto request = MakeApplyRequest(v, want, offered ? &*offered : nullptr);
    // A resync's batch already sent exactly this request: its answer is this
    // apply's. Anything else (the record moved since) is applied on its own.
    bool reuse = batched != nullptr && batched->request == request;
    auto applied = reuse ? (batched->item.status.ok()
                                ? StatusOr<agent_api::ApplyExportResult>(batched->item.result)
                                : StatusOr<agent_api::ApplyExportResult>(batched->item.status))
                         : WithAgentSlot(v.spec.agent_ref,
                                         [&] { return agent->client->ApplyExport(request); });
    out.applied_in_batch = reuse;
    if (applied.ok() && offered) {
      // The agent holds them now (it stores before it applies).
      std::lock_guard<std::mutex> lock(credentials_mu_);
      credentials_.erase(v.meta.name);
    }
    if (!applied.ok()) {
      return fail(ReasonForAgentError(applied.status()), applied.status().message());
    }
    if (reapply_epoch) {
      std::lock_guard<std::mutex> lock(mu_);
      applied_in_epoch_[v.meta.name] = *reapply_epoch;
      out.epoch_reapply = true;
    }
    out.changes = std::move(applied->changes);
    *actual = std::move(applied->actual);
    if (!out.changes.empty() && last != nullptr)
      out.repair_cause = RepairCause(want, *last, obj, out);
    if (!out.changes.empty()) {
      log::Info("export repaired", {{"volume", v.meta.name},
                                    {"drift", out.drift},
                                    {"changes", out.changes},
                                    {"generation", v.status.publication_generation}});
    }
  }
  out.actual = *actual;

  // Verify: Reconciled only when the agent now has exactly the recorded intent.
  auto after = Diff(want, &*out.actual);
  if (!after.empty()) {
    return fail(api::kReasonReconcileFailed,
                "agent still differs from the recorded intent: " + Join(after));
  }
  // Consumers are told the target the controller derived, never a claim.
  auto target = TargetIdFor(v, agent->record, out.actual->target_id);
  if (!target.ok()) return fail(api::kReasonReconcileFailed, target.status().message());
  info = api::ExportInfo{*target, want.spec.bind_address, want.spec.port, v.spec.agent_volume_id};
  out.condition = MakeCondition(
      true, api::kReasonReconciled,
      "export matches the recorded intent (" + std::to_string(want.hosts.size()) +
          " ACL entries, generation " + std::to_string(v.status.publication_generation) + ")",
      v.meta.generation);
  return true;
}

StatusOr<DesiredExport> ExportReconciler::DesiredFor(const api::VolumeState& v) const {
  std::map<std::string, api::NodeRecord> nodes;
  return ComputeDesired(v, [&](const std::string& id) -> const api::NodeRecord* {
    auto it = nodes.find(id);
    if (it != nodes.end()) return &it->second;
    auto n = Read(api::kKindNode, id);
    if (!n.ok()) return nullptr;
    auto rec = api::LoadNode(*n);
    if (!rec.ok()) return nullptr;
    return &nodes.emplace(id, std::move(rec).value()).first->second;
  });
}

std::optional<Credentials> ExportReconciler::OfferedFor(const api::VolumeState& v,
                                                        const DesiredExport& want) {
  if (want.spec.auth != kAuthChap) return std::nullopt;
  std::lock_guard<std::mutex> lock(credentials_mu_);
  auto it = credentials_.find(v.meta.name);
  if (it != credentials_.end() &&
      CredentialsDigest(v.spec.agent_volume_id, it->second) == want.spec.auth_digest) {
    return it->second;
  }
  return std::nullopt;
}

bool ExportReconciler::NeedsApply(const api::VolumeState& v, const agent_api::Export* actual,
                                  const std::vector<std::string>& drift) {
  return !drift.empty() || FenceBehind(v, actual) ||
         ReapplyEpoch(v.spec.agent_ref, v.meta.name).has_value();
}

std::map<std::string, ExportReconciler::BatchApplied> ExportReconciler::ApplyInBatches(
    const std::string& agent_ref, AgentClient& client,
    const std::vector<const store::Object*>& volumes,
    const std::map<std::string, agent_api::Export>& by_key, ResyncStats& stats) {
  std::map<std::string, BatchApplied> out;
  if (options_.apply_batch <= 1) return out;
  // Planned from the same reads the volumes' own passes make: only volumes
  // whose pass would apply, each request exactly the one that pass would
  // send. An agent volume id named by two records goes to neither batch
  // (the agent refuses a batch naming a volume twice): their own passes
  // apply them one at a time.
  std::vector<std::pair<std::string, agent_api::ApplyExportRequest>> planned;
  std::map<std::string, int> ids;
  for (const store::Object* o : volumes) {
    const store::Object& obj = *o;
    auto v = api::LoadVolume(obj);
    if (!v.ok() || obj.status.empty() || v->meta.deletion_timestamp || v->status.deleting ||
        !api::IsProvisioned(v->status) || !v->status.export_spec) {
      continue;
    }
    ids[v->spec.agent_volume_id]++;
    auto want = DesiredFor(*v);
    if (!want.ok()) continue;
    auto it = by_key.find(ExportKey(v->spec.agent_volume_id, want->protocol));
    const agent_api::Export* actual = it == by_key.end() ? nullptr : &it->second;
    if (!NeedsApply(*v, actual, Diff(*want, actual))) continue;
    auto offered = OfferedFor(*v, *want);
    planned.emplace_back(obj.name, MakeApplyRequest(*v, *want, offered ? &*offered : nullptr));
  }
  std::erase_if(planned, [&](const auto& p) { return ids[p.second.agent_volume_id] > 1; });
  const size_t batch = static_cast<size_t>(options_.apply_batch);
  for (size_t start = 0; start < planned.size(); start += batch) {
    size_t end = std::min(planned.size(), start + batch);
    std::vector<agent_api::ApplyExportRequest> requests;
    requests.reserve(end - start);
    for (size_t i = start; i < end; ++i) requests.push_back(planned[i].second);
    auto answered = WithAgentSlot(agent_ref, [&] { return client.ApplyExports(requests); });
    stats.agent_calls++;
    for (size_t i = start; i < end; ++i) {
      // A call that failed as a whole is every item's answer (an agent that
      // cannot be reached is not asked once per volume).
      agent_api::ApplyExportItem item = answered.ok()
                                            ? std::move((*answered)[i - start])
                                            : agent_api::ApplyExportItem{answered.status(), {}};
      out.emplace(planned[i].first, BatchApplied{std::move(planned[i].second), std::move(item)});
    }
  }
  return out;
}

StatusOr<std::optional<agent_api::Export>> ExportReconciler::Observe(const api::VolumeState& v,
                                                                     const DesiredExport& want,
                                                                     AgentClient& client,
                                                                     const SeenExport& seen) {
  if (seen) {
    if (*seen == nullptr) return std::optional<agent_api::Export>();
    return std::optional<agent_api::Export>(**seen);
  }
  auto got = WithAgentSlot(v.spec.agent_ref,
                           [&] { return client.GetExport(v.spec.agent_volume_id, want.protocol); });
  if (got.ok()) return std::optional<agent_api::Export>(std::move(got).value());
  if (got.status().code() == Code::kNotFound) return std::optional<agent_api::Export>();
  return got.status();
}

void ExportReconciler::ResyncAgent(const std::string& agent_ref,
                                   const std::vector<const store::Object*>& volumes,
                                   ResyncStats& stats) {
  NamedLocks::Guard one_pass = agent_resyncs_.Lock(agent_ref);
  stats.agents++;
  auto agent = Agent(agent_ref);
  std::map<std::string, agent_api::Export> by_key;
  Status list_status;
  if (agent.ok()) {
    auto list = WithAgentSlot(agent_ref, [&] { return agent->client->ListExports(); });
    stats.agent_calls++;
    if (list.ok()) {
      // An export of a protocol this controller does not know is no volume's.
      for (auto& e : *list) {
        if (e.protocol) by_key[ExportKey(e.agent_volume_id, *e.protocol)] = std::move(e);
      }
    } else {
      list_status = list.status();
    }
  } else {
    list_status = agent.status();
  }
  // What drifted is applied first, in batches; each volume's pass then finds
  // its apply already answered and only verifies and records.
  // A volume nothing moved for since its last pass verified it is passed
  // over (the list just read shows its export unchanged).
  std::vector<const store::Object*> rest;
  rest.reserve(volumes.size());
  for (const store::Object* obj : volumes) {
    if (list_status.ok() && StillVerified(*obj, by_key)) {
      stats.volumes++;
      stats.skipped++;
      continue;
    }
    rest.push_back(obj);
  }
  // A volume verified at this very record that no longer is: its export
  // moved on the agent. Ask the agent whether it restarted first, so a
  // rebuild this pass finds before the epoch poll does is applied, and
  // counted, as the restart it is.
  if (list_status.ok() && VerifiedAndMoved(rest, by_key)) {
    if (auto rec = Read(api::kKindAgent, agent_ref); rec.ok()) (void)PollAgent(*rec);
  }
  std::map<std::string, BatchApplied> batched;
  if (list_status.ok()) batched = ApplyInBatches(agent_ref, *agent->client, rest, by_key, stats);
  auto one = [&](const store::Object& obj, ResyncStats& counts) {
    counts.volumes++;
    if (agent.ok() && AbandonedCreate(obj, clock_.Now(), options_.abandoned_create_ttl)) {
      ReapAbandonedCreate(obj, *agent->client);
      return;
    }
    if (!list_status.ok()) {
      // Every volume of an unreachable agent says so; one call decided it.
      auto v = api::LoadVolume(obj);
      if (!v.ok() || !v->status.export_spec || v->status.deleting || v->meta.deletion_timestamp ||
          !api::IsProvisioned(v->status)) {
        EnqueueVolume(obj.name);
        return;
      }
      api::Condition c = MakeCondition(false, ReasonForAgentError(list_status),
                                       list_status.message(), obj.generation);
      auto w = WriteOutcome(obj, c, std::nullopt, nullptr);
      if (w.ok() && *w) counts.status_writes++;
      EnqueueKey(kVolPrefix + obj.name, options_.backoff_base);
      return;
    }
    // A malformed record is reported as such by Reconcile, which never looks
    // at `seen` then.
    const agent_api::Export* seen = nullptr;
    if (auto v = api::LoadVolume(obj); v.ok()) {
      auto it = by_key.find(ExportKey(v->spec.agent_volume_id, v->spec.protocol));
      if (it != by_key.end()) seen = &it->second;
    }
    auto b = batched.find(obj.name);
    auto r = Reconcile(obj.name, seen, false, b == batched.end() ? nullptr : &b->second);
    if (!r.ok()) {
      RecordFailure(obj.name, true);
      return;
    }
    if (!r->drift.empty()) counts.drifted++;
    if (r->applied_in_batch) {
      counts.batched++;
    } else if (!r->changes.empty() || !r->drift.empty()) {
      counts.agent_calls++;
    }
    if (r->status_written) counts.status_writes++;
    RecordFailure(obj.name, r->condition.status == "False" &&
                                r->condition.reason != std::string(api::kReasonExportSpecMissing));
  };
  const size_t writers = std::min<size_t>(
      static_cast<size_t>(std::max(1, options_.resync_writers_per_agent)), (rest.size() + 63) / 64);
  if (writers <= 1) {
    for (const store::Object* o : rest) one(*o, stats);
    return;
  }
  std::vector<ResyncStats> parts(writers);
  std::atomic<size_t> next{0};
  auto run = [&](ResyncStats& part) {
    for (size_t i = next++; i < rest.size(); i = next++) one(*rest[i], part);
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < writers; ++t) threads.emplace_back(run, std::ref(parts[t]));
  run(parts[0]);
  for (auto& t : threads) t.join();
  for (const auto& p : parts) stats += p;
}

bool ExportReconciler::StillVerified(const store::Object& obj,
                                     const std::map<std::string, agent_api::Export>& by_key) {
  if (!cache_) return false;
  std::lock_guard<std::mutex> lock(verified_mu_);
  auto it = verified_.find(obj.name);
  if (it == verified_.end() || it->second.resource_version != obj.resource_version ||
      it->second.records_epoch != records_epoch_.load()) {
    return false;
  }
  auto seen = by_key.find(it->second.export_key);
  return seen != by_key.end() && seen->second == it->second.actual;
}

bool ExportReconciler::VerifiedAndMoved(const std::vector<const store::Object*>& volumes,
                                        const std::map<std::string, agent_api::Export>& by_key) {
  std::lock_guard<std::mutex> lock(verified_mu_);
  for (const store::Object* obj : volumes) {
    auto it = last_verified_.find(obj->name);
    if (it == last_verified_.end() || !it->second.actual.protocol) continue;
    auto seen =
        by_key.find(ExportKey(it->second.actual.agent_volume_id, *it->second.actual.protocol));
    if (seen == by_key.end() || !(seen->second == it->second.actual)) return true;
  }
  return false;
}

std::string ExportReconciler::AgentRefFor(const store::Object& obj) {
  {
    std::lock_guard<std::mutex> lock(verified_mu_);
    auto it = verified_.find(obj.name);
    if (it != verified_.end() && it->second.resource_version == obj.resource_version) {
      return it->second.agent_ref;
    }
  }
  return AgentRefOf(obj);
}

void ExportReconciler::ReapAbandonedCreate(const store::Object& obj, AgentClient& client) {
  auto v = api::LoadVolume(obj);
  if (!v.ok()) return;
  agent_api::DeleteVolumeRequest req{v->spec.agent_volume_id, obj.uid};
  Status deleted = WithAgentSlot(v->spec.agent_ref, [&] { return client.DeleteVolume(req); });
  // An abandoned create is never provisioned; anything but "nothing of this
  // lifecycle left": try again next resync.
  if (!deleted.ok() && !NothingOfThisLifecycleLeft(deleted, /*provisioned=*/false)) {
    log::Warn("abandoned create not reaped yet",
              {{"volume", obj.name}, {"error", deleted.ToString()}});
    return;
  }
  Status dropped = store_.Delete(api::kKindVolume, obj.name, {obj.uid, obj.resource_version});
  if (!dropped.ok() && dropped.code() != Code::kNotFound) {
    log::Warn("abandoned create's record not removed",
              {{"volume", obj.name}, {"error", dropped.ToString()}});
    return;
  }
  log::Warn("removed the record of a create that never completed",
            {{"volume", obj.name}, {"uid", obj.uid}, {"agentSaid", deleted.ToString()}});
}

ResyncStats& operator+=(ResyncStats& a, const ResyncStats& b) {
  a.agents += b.agents;
  a.agent_calls += b.agent_calls;
  a.volumes += b.volumes;
  a.drifted += b.drifted;
  a.status_writes += b.status_writes;
  a.batched += b.batched;
  a.skipped += b.skipped;
  return a;
}

ResyncStats ExportReconciler::ResyncAll() {
  ResyncStats stats;
  metrics::ScopedTimer timed(ControllerMetrics::Get().resync_duration);
  auto list = ReadAllShared(api::kKindVolume);
  if (!list.ok()) {
    log::Warn("resync: cannot list volumes", {{"error", list.status().ToString()}});
    return stats;
  }
  std::map<std::string, std::vector<const store::Object*>> by_agent;
  for (const auto& obj : *list) by_agent[AgentRefFor(*obj)].push_back(obj.get());
  // Agents are passed over side by side (up to `workers` at once, each agent
  // by one thread): a slow or unreachable agent holds its own thread only,
  // and the status writes of different agents' volumes overlap.
  std::vector<std::pair<const std::string*, const std::vector<const store::Object*>*>> work;
  work.reserve(by_agent.size());
  for (const auto& [agent_ref, vols] : by_agent) work.emplace_back(&agent_ref, &vols);
  std::vector<ResyncStats> per_agent(work.size());
  std::atomic<size_t> next{0};
  auto run = [&] {
    for (size_t i = next++; i < work.size(); i = next++) {
      ResyncAgent(*work[i].first, *work[i].second, per_agent[i]);
    }
  };
  const size_t threads = std::min(work.size(), static_cast<size_t>(std::max(1, options_.workers)));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(run);
  run();
  for (auto& t : pool) t.join();
  for (const auto& a : per_agent) stats += a;
  return stats;
}

SnapshotResyncStats ExportReconciler::ResyncSnapshots() {
  SnapshotResyncStats stats;
  auto list = ReadAll(api::kKindSnapshot);
  if (!list.ok()) {
    log::Warn("resync: cannot list snapshots", {{"error", list.status().ToString()}});
    return stats;
  }
  std::map<std::string, std::vector<std::pair<store::Object, api::SnapshotRecord>>> by_agent;
  for (const auto& obj : *list) {
    auto r = api::LoadSnapshot(obj);
    if (!r.ok()) continue;
    by_agent[r->spec.agent_ref].emplace_back(obj, std::move(*r));
  }
  const std::string now = FormatRfc3339(clock_.Now());
  for (auto& group : by_agent) {
    // Named, not structured bindings: the release step below captures them.
    const std::string& agent_ref = group.first;
    auto& records = group.second;
    auto agent = Agent(agent_ref);
    StatusOr<std::vector<agent_api::Snapshot>> held =
        agent.ok() ? WithAgentSlot(agent_ref, [&] { return agent->client->ListSnapshots(""); })
                   : StatusOr<std::vector<agent_api::Snapshot>>(agent.status());
    std::map<std::string, agent_api::Snapshot> by_id;
    if (held.ok()) {
      for (auto& s : *held) by_id[s.agent_snapshot_id] = std::move(s);
    }
    for (auto& entry : records) {
      const store::Object& obj = entry.first;
      const api::SnapshotRecord& rec = entry.second;
      stats.snapshots++;
      // The agent lets go of the snapshot (or, with `refusal_ok`, says it
      // holds nothing of this lifecycle), then the record goes, pinned to its
      // uid and version. True when the record went.
      auto release = [&](bool refusal_ok) {
        Status deleted = WithAgentSlot(agent_ref, [&] {
          return agent->client->DeleteSnapshot({rec.spec.agent_snapshot_id, obj.uid});
        });
        if (!deleted.ok() && !(refusal_ok && deleted.code() == Code::kFailedPrecondition)) {
          return false;
        }
        return store_.Delete(api::kKindSnapshot, obj.name, {obj.uid, obj.resource_version}).ok();
      };
      if (rec.status.deleting || rec.meta.deletion_timestamp) {
        if (agent.ok() && release(/*refusal_ok=*/false)) {
          stats.deletes_finished++;
          log::Info("finished a snapshot delete", {{"snapshot", obj.name}});
        }
        continue;
      }
      if (!api::SnapshotConfirmed(rec.status)) {
        // Left alone while a create may still be under way; reaped (with
        // whatever of its lifecycle the agent holds) once abandoned.
        auto created = ParseRfc3339(obj.creation_timestamp);
        if (!agent.ok() || !created || clock_.Now() - *created <= options_.abandoned_create_ttl) {
          continue;
        }
        if (release(/*refusal_ok=*/true)) {
          stats.reaped++;
          log::Warn("removed the record of a snapshot create that never completed",
                    {{"snapshot", obj.name}, {"uid", obj.uid}});
        }
        continue;
      }
      api::SnapshotStatus next = rec.status;
      api::Condition cond{api::kCondSnapshotReady,        "True", api::kReasonCreated,
                          "the agent holds the snapshot", "",     obj.generation};
      if (!held.ok()) {
        cond = {api::kCondSnapshotReady,
                "Unknown",
                api::kReasonAgentUnavailable,
                "agent " + agent_ref + " cannot be asked: " + held.status().message(),
                "",
                obj.generation};
      } else if (auto it = by_id.find(rec.spec.agent_snapshot_id);
                 it == by_id.end() || it->second.owner_uid != obj.uid) {
        cond = {api::kCondSnapshotReady,
                "False",
                api::kReasonSnapshotMissing,
                it == by_id.end()
                    ? "agent " + agent_ref + " has no snapshot " + rec.spec.agent_snapshot_id
                    : rec.spec.agent_snapshot_id + " is marked for lifecycle " +
                          it->second.owner_uid + ", not this record's",
                "",
                obj.generation};
        next.ready_to_use = false;
      } else {
        next.ready_to_use = it->second.ready_to_use;
        next.used_bytes = it->second.used_bytes;
        if (!it->second.ready_to_use) {
          cond = {api::kCondSnapshotReady,
                  "False",
                  api::kReasonCreated,
                  "the agent is still completing it",
                  "",
                  obj.generation};
        }
      }
      bool changed = api::SetCondition(next.conditions, cond, now);
      if (!changed && next == rec.status) continue;
      store::Object write = obj;
      nlohmann::json merged = obj.status.is_object() ? obj.status : nlohmann::json::object();
      nlohmann::json modeled = api::ToJson(next);
      for (auto& [k, v] : modeled.items()) merged[k] = v;
      write.status = std::move(merged);
      auto w = store_.UpdateStatus(write);
      if (w.ok()) {
        stats.status_writes++;
        if (cond.status != "True") {
          log::Warn("snapshot not ready",
                    {{"snapshot", obj.name}, {"reason", cond.reason}, {"message", cond.message}});
        }
      }
    }
  }
  return stats;
}

bool ExportReconciler::PollEpochs() {
  auto list = ReadAll(api::kKindAgent);
  if (!list.ok()) return false;
  bool some_unreachable = false;
  int connected = 0;
  for (const auto& obj : *list) {
    auto reached = PollAgent(obj);
    if (!reached) continue;  // not a loadable record
    some_unreachable = some_unreachable || !*reached;
    if (*reached) connected++;
  }
  ControllerMetrics::Get().agents.Set(static_cast<double>(list->size()));
  ControllerMetrics::Get().agents_connected.Set(connected);
  return some_unreachable;
}

std::optional<bool> ExportReconciler::PollAgent(const store::Object& obj) {
  auto rec = api::LoadAgent(obj);
  if (!rec.ok()) return std::nullopt;
  // One poll of an agent at a time: the periodic one and a resync's must
  // not both take one restart for two.
  NamedLocks::Guard polling = agent_polls_.Lock(obj.name);
  auto client = agents_.Client(obj.name, {rec->address, rec->port, rec->tls_server_name});
  Status reach;
  std::string epoch = rec->boot_epoch;
  if (client.ok()) {
    auto info = (*client)->GetInfo();
    if (info.ok()) {
      epoch = info->boot_epoch;
    } else {
      reach = info.status();
    }
  } else {
    reach = client.status();
  }
  std::vector<api::Condition> conds = rec->conditions;
  bool changed = api::SetCondition(
      conds,
      {api::kCondAgentConnected, reach.ok() ? "True" : "False",
       reach.ok() ? "Connected" : "Unreachable",
       reach.ok() ? "agent answered GetInfo" : reach.message(), "", obj.generation},
      FormatRfc3339(clock_.Now()));
  bool epoch_changed = reach.ok() && epoch != rec->boot_epoch;
  if (epoch_changed) {
    // The cache may not hold our own write of this very epoch yet.
    std::lock_guard<std::mutex> lock(mu_);
    auto known = restarted_agents_.find(obj.name);
    if (known != restarted_agents_.end() && known->second == epoch) epoch_changed = false;
  }
  std::string previous_epoch = rec->boot_epoch;
  if (changed || epoch_changed) {
    store::Object next = obj;
    rec->conditions = conds;
    rec->boot_epoch = epoch;
    next.status = api::AgentStatusToJson(*rec);
    auto w = store_.UpdateStatus(next);
    if (w.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      own_writes_[kAgentPrefix + obj.name] = w->resource_version;
    }
  }
  if (epoch_changed) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      restarted_agents_[obj.name] = epoch;
    }
    records_epoch_++;  // every volume of it is applied once again
    log::Info("agent boot epoch changed; re-applying its exports",
              {{"agent", obj.name}, {"was", previous_epoch}, {"now", epoch}});
    EnqueueKey(kAgentPrefix + obj.name);
  }
  return reach.ok();
}

bool ExportReconciler::NoteRecorded(const std::string& volume, const api::Condition* condition) {
  auto& gauge = ControllerMetrics::Get().volumes;
  std::lock_guard<std::mutex> lock(recorded_mu_);
  auto it = recorded_.find(volume);
  if (it != recorded_.end()) {
    if (condition && it->second.first == condition->status &&
        it->second.second == condition->reason) {
      return false;
    }
    gauge.Add({{"status", it->second.first}, {"reason", it->second.second}}).Decrement();
    recorded_.erase(it);
  }
  if (!condition) return true;
  gauge.Add({{"status", condition->status}, {"reason", condition->reason}}).Increment();
  recorded_.emplace(volume, std::make_pair(condition->status, condition->reason));
  return true;
}

ExportReconciler::AsVerified ExportReconciler::CompareToVerified(
    const DesiredExport& want, const LastVerified& last,
    const std::optional<agent_api::Export>& observed) {
  return {Diff(want, &last.actual).empty(), observed && *observed == last.actual};
}

const char* ExportReconciler::RepairCause(const DesiredExport& want, const LastVerified& last,
                                          const store::Object& obj, const ReconcileOutcome& out) {
  AsVerified as = CompareToVerified(want, last, out.observed);
  // The intent still asks for exactly what was verified, and the agent no
  // longer had it: lost in a restart, or changed by someone else.
  if (as.intent && !as.agent) {
    return out.epoch_reapply ? kCauseEpoch : kCauseOutOfBand;
  }
  // The agent kept what was verified and the record did not move: what
  // moved is a node's identity (its NQN, IQN or addresses).
  if (!as.intent && as.agent && last.resource_version == obj.resource_version) {
    return kCauseIdentity;
  }
  return nullptr;  // a new intent (a publish, an unpublish, an expansion): not a repair
}

std::optional<std::string> ExportReconciler::ReapplyEpoch(const std::string& agent,
                                                          const std::string& volume) {
  std::lock_guard<std::mutex> lock(mu_);
  auto restarted = restarted_agents_.find(agent);
  if (restarted == restarted_agents_.end()) return std::nullopt;
  auto applied = applied_in_epoch_.find(volume);
  if (applied != applied_in_epoch_.end() && applied->second == restarted->second) {
    return std::nullopt;
  }
  return restarted->second;
}

void ExportReconciler::AcquireAgent(const std::string& agent_ref) {
  std::unique_lock<std::mutex> lock(mu_);
  inflight_cv_.wait(lock, [&] {
    return stopping_ || inflight_[agent_ref] < std::max(1, options_.max_inflight_per_agent);
  });
  inflight_[agent_ref]++;
}

void ExportReconciler::ReleaseAgent(const std::string& agent_ref) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inflight_[agent_ref]--;
  }
  inflight_cv_.notify_all();
}

}  // namespace pillar::controller
