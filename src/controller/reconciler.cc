#include "controller/reconciler.h"

#include <random>

#include "common/log.h"

namespace pillar::controller {

namespace av1 = pillar::agent::v1;

namespace {

constexpr const char* kVolPrefix = "v/";
constexpr const char* kNodePrefix = "n/";
constexpr const char* kAgentPrefix = "a/";

Meta MetaOf(const store::Object& o) {
  return {
      o.name, o.uid, o.resource_version, o.generation, o.creation_timestamp, o.deletion_timestamp};
}

std::string Join(const std::vector<std::string>& parts, size_t limit = 5) {
  std::string out;
  for (size_t i = 0; i < parts.size() && i < limit; ++i) {
    if (!out.empty()) out += "; ";
    out += parts[i];
  }
  if (parts.size() > limit) out += "; and " + std::to_string(parts.size() - limit) + " more";
  return out;
}

Condition MakeCondition(bool ok, const char* reason, std::string message, int64_t generation) {
  return {kCondExportReconciled, ok ? "True" : "False", reason, std::move(message), "", generation};
}

bool IsUnreachable(const Status& s) {
  return s.code() == Code::kUnavailable || s.code() == Code::kDeadlineExceeded;
}

std::string ExportKey(const std::string& id, av1::Protocol p) {
  return id + "#" + std::to_string(static_cast<int>(p));
}

}  // namespace

ExportReconciler::ExportReconciler(store::Store& store, AgentDirectory& agents, Clock& clock,
                                   ReconcilerOptions options)
    : store_(store), agents_(agents), clock_(clock), options_(options) {}

ExportReconciler::~ExportReconciler() { Stop(); }

Status ExportReconciler::Start() {
  RETURN_IF_ERROR(StartWatches());
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
  watches_.clear();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

Status ExportReconciler::StartWatches() {
  watches_.clear();
  ASSIGN_OR_RETURN(int64_t rev, store_.CurrentRevision());
  auto on_error = [this](const Status& s) {
    log::Warn("store watch ended; relisting", {{"error", s.ToString()}});
    rewatch_ = true;
    cv_.notify_all();
  };
  auto own = [this](const std::string& key, int64_t rv) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = own_writes_.find(key);
    if (it != own_writes_.end() && it->second == rv) {
      own_writes_.erase(it);
      return true;
    }
    return false;
  };
  ASSIGN_OR_RETURN(auto vw, store_.Watch(
                                kKindVolume, rev,
                                [this, own](const store::Event& e) {
                                  std::string key = kVolPrefix + e.object.name;
                                  if (e.type != store::EventType::kDeleted &&
                                      own(key, e.object.resource_version)) {
                                    return;
                                  }
                                  EnqueueKey(key);
                                },
                                on_error));
  ASSIGN_OR_RETURN(
      auto nw,
      store_.Watch(
          kKindNode, rev,
          [this](const store::Event& e) { EnqueueKey(kNodePrefix + e.object.name); }, on_error));
  ASSIGN_OR_RETURN(auto aw, store_.Watch(
                                kKindAgent, rev,
                                [this, own](const store::Event& e) {
                                  std::string key = kAgentPrefix + e.object.name;
                                  if (own(key, e.object.resource_version)) return;
                                  EnqueueKey(key);
                                },
                                on_error));
  watches_.push_back(std::move(vw));
  watches_.push_back(std::move(nw));
  watches_.push_back(std::move(aw));
  return Status::Ok();
}

void ExportReconciler::EnqueueVolume(const std::string& volume) { EnqueueKey(kVolPrefix + volume); }

void ExportReconciler::EnqueueKey(const std::string& key, std::chrono::milliseconds delay) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    if (delay.count() > 0) {
      auto at = clock_.SteadyNow() + delay;
      auto& nb = not_before_[key];
      if (nb < at) nb = at;
    }
    if (queued_.insert(key).second) queue_.push_back(key);
  }
  cv_.notify_one();
}

void ExportReconciler::WorkerLoop() {
  while (true) {
    std::string key;
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (true) {
        if (stopping_) return;
        auto now = clock_.SteadyNow();
        auto next = std::chrono::steady_clock::time_point::max();
        for (auto it = queue_.begin(); it != queue_.end(); ++it) {
          auto nb = not_before_.find(*it);
          if (nb == not_before_.end() || nb->second <= now) {
            key = *it;
            queue_.erase(it);
            queued_.erase(key);
            if (nb != not_before_.end()) not_before_.erase(nb);
            break;
          }
          next = std::min(next, nb->second);
        }
        if (!key.empty()) break;
        if (next == std::chrono::steady_clock::time_point::max()) {
          cv_.wait(lock);
        } else {
          cv_.wait_until(lock, next);
        }
      }
    }
    if (key.rfind(kVolPrefix, 0) == 0) {
      std::string name = key.substr(2);
      auto r = Reconcile(name, std::nullopt);
      if (!r.ok() && r.status().code() == Code::kNotFound &&
          store_.Get(kKindVolume, name).status().code() == Code::kNotFound) {
        // Deleted while queued (DeleteVolume, or a retry of an earlier
        // failure): nothing left to reconcile, so no retry either.
        RecordFailure(name, false);
      } else if (!r.ok()) {
        log::Warn("reconcile failed", {{"volume", name}, {"error", r.status().ToString()}});
        RecordFailure(name, true);
      } else {
        RecordFailure(name, r->condition.status != "True" &&
                                r->condition.reason != std::string(kReasonExportSpecMissing));
      }
    } else if (key.rfind(kNodePrefix, 0) == 0) {
      ExpandNode(key.substr(2));
    } else if (key.rfind(kAgentPrefix, 0) == 0) {
      ExpandAgent(key.substr(2));
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
  auto list = store_.List(kKindVolume);
  if (!list.ok()) return;
  for (const auto& obj : list->items) {
    const auto& nodes = obj.status.value("publishedNodes", nlohmann::json::array());
    if (!nodes.is_array()) continue;
    for (const auto& n : nodes) {
      if (n.is_object() && n.value("nodeID", "") == node_id) {
        EnqueueVolume(obj.name);
        break;
      }
    }
  }
}

void ExportReconciler::ExpandAgent(const std::string& agent_ref) {
  auto list = store_.List(kKindVolume);
  if (!list.ok()) return;
  std::vector<store::Object> mine;
  for (auto& obj : list->items) {
    if (obj.spec.value("agentRef", "") == agent_ref) mine.push_back(std::move(obj));
  }
  ResyncStats stats;
  ResyncAgent(agent_ref, mine, stats);
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
      cv_.wait_for(lock, period, [this] { return stopping_ || rewatch_.load(); });
      if (stopping_) return;
    }
    if (rewatch_.exchange(false)) {
      Status s = StartWatches();
      if (!s.ok()) {
        log::Warn("re-watch failed", {{"error", s.ToString()}});
        rewatch_ = true;
      }
    }
    ResyncStats stats = ResyncAll();
    log::Debug("resync done", {{"agents", stats.agents},
                               {"volumes", stats.volumes},
                               {"drifted", stats.drifted},
                               {"statusWrites", stats.status_writes}});
  }
}

void ExportReconciler::EpochLoop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, options_.epoch_poll_interval, [this] { return stopping_; });
      if (stopping_) return;
    }
    PollEpochs();
  }
}

StatusOr<ExportReconciler::AgentView> ExportReconciler::Agent(const std::string& agent_ref) {
  auto obj = store_.Get(kKindAgent, agent_ref);
  if (!obj.ok()) {
    if (obj.status().code() == Code::kNotFound) {
      return FailedPrecondition("PillarAgent " + agent_ref + " is not registered");
    }
    return obj.status();
  }
  ASSIGN_OR_RETURN(AgentRecord rec, AgentFromJson(MetaOf(*obj), obj->spec, obj->status));
  ASSIGN_OR_RETURN(auto client,
                   agents_.Client(agent_ref, {rec.address, rec.port, rec.tls_server_name}));
  return AgentView{std::move(rec), std::move(client)};
}

StatusOr<VolumeState> ExportReconciler::LoadVolume(const store::Object& obj) {
  VolumeState v;
  v.meta = MetaOf(obj);
  ASSIGN_OR_RETURN(v.spec, VolumeSpecFromJson(obj.spec));
  ASSIGN_OR_RETURN(v.status, VolumeStatusFromJson(obj.status));
  return v;
}

StatusOr<bool> ExportReconciler::WriteOutcome(const store::Object& obj, const Condition& cond,
                                              const std::optional<ExportInfo>& info) {
  // Only the condition and exportInfo are touched; every other status field
  // stays byte-for-byte what the operator or the CSI path wrote.
  std::vector<Condition> conds;
  if (obj.status.contains("conditions")) {
    auto parsed = ConditionsFromJson(obj.status["conditions"]);
    if (parsed.ok()) conds = std::move(parsed).value();
  }
  bool changed = SetCondition(conds, cond, FormatRfc3339(clock_.Now()));
  nlohmann::json status = obj.status.is_object() ? obj.status : nlohmann::json::object();
  if (info) {
    nlohmann::json ij = {{"targetID", info->target_id},
                         {"address", info->address},
                         {"port", info->port},
                         {"volumeRef", info->volume_ref}};
    if (status.value("exportInfo", nlohmann::json()) != ij) {
      status["exportInfo"] = ij;
      changed = true;
    }
  }
  if (!changed) return false;
  status["conditions"] = ToJson(conds);
  store::Object next = obj;
  next.status = std::move(status);
  ASSIGN_OR_RETURN(store::Object written, store_.UpdateStatus(next));
  std::lock_guard<std::mutex> lock(mu_);
  own_writes_[kVolPrefix + obj.name] = written.resource_version;
  return true;
}

StatusOr<ReconcileOutcome> ExportReconciler::ReconcileNow(const std::string& volume) {
  return Reconcile(volume, std::nullopt);
}

StatusOr<ReconcileOutcome> ExportReconciler::Reconcile(
    const std::string& volume, const std::optional<const av1::Export*>& seen) {
  std::shared_ptr<std::mutex> vlock;
  {
    std::lock_guard<std::mutex> lock(volume_mu_);
    auto& slot = volume_locks_[volume];
    if (!slot) slot = std::make_shared<std::mutex>();
    vlock = slot;
  }
  std::lock_guard<std::mutex> guard(*vlock);

  for (int attempt = 0; attempt < 5; ++attempt) {
    auto obj = store_.Get(kKindVolume, volume);
    if (!obj.ok()) return obj.status();
    ReconcileOutcome out;
    auto finish = [&](const Condition& cond,
                      const std::optional<ExportInfo>& info) -> StatusOr<bool> {
      out.condition = cond;
      return WriteOutcome(*obj, cond, info);
    };

    auto parsed = LoadVolume(*obj);
    if (!parsed.ok()) {
      auto w = finish(MakeCondition(false, kReasonReconcileFailed,
                                    "recorded state is malformed: " + parsed.status().message(),
                                    obj->generation),
                      std::nullopt);
      if (!w.ok() && w.status().code() == Code::kAborted) continue;
      RETURN_IF_ERROR(w.status());
      return out;
    }
    VolumeState v = std::move(parsed).value();
    if (v.meta.deletion_timestamp || v.status.deleting) return out;  // DeleteVolume owns it

    if (!v.status.export_spec) {
      auto w = finish(MakeCondition(false, kReasonExportSpecMissing,
                                    "status.exportSpec is absent; the controller does not guess "
                                    "an export. Record one (pillarctl repair export-spec)",
                                    v.meta.generation),
                      std::nullopt);
      if (!w.ok() && w.status().code() == Code::kAborted) continue;
      RETURN_IF_ERROR(w.status());
      return out;
    }

    auto fail = [&](const char* reason, const std::string& msg) -> StatusOr<bool> {
      return finish(MakeCondition(false, reason, msg, v.meta.generation), std::nullopt);
    };
    StatusOr<bool> written = false;

    std::map<std::string, NodeRecord> nodes;
    auto lookup = [&](const std::string& id) -> const NodeRecord* {
      auto it = nodes.find(id);
      if (it != nodes.end()) return &it->second;
      auto n = store_.Get(kKindNode, id);
      if (!n.ok()) return nullptr;
      auto rec = NodeFromJson(MetaOf(*n), n->spec);
      if (!rec.ok()) return nullptr;
      return &nodes.emplace(id, std::move(rec).value()).first->second;
    };
    auto desired = ComputeDesired(v, lookup);
    auto agent = Agent(v.spec.agent_ref);
    if (!desired.ok()) {
      written = fail(kReasonReconcileFailed, desired.status().message() + "; nothing was changed");
    } else if (!agent.ok()) {
      written =
          fail(IsUnreachable(agent.status()) ? kReasonAgentUnavailable : kReasonReconcileFailed,
               agent.status().message());
    } else {
      const DesiredExport& want = *desired;
      std::optional<av1::Export> actual;
      Status observe;
      if (seen) {
        if (*seen != nullptr) actual = **seen;
      } else {
        av1::GetExportRequest req;
        req.set_agent_volume_id(v.spec.agent_volume_id);
        req.set_protocol(want.protocol);
        AcquireAgent(v.spec.agent_ref);
        auto got = agent->client->GetExport(req);
        ReleaseAgent(v.spec.agent_ref);
        if (got.ok()) {
          actual = got->export_();
        } else if (got.status().code() != Code::kNotFound) {
          observe = got.status();
        }
      }
      if (!observe.ok()) {
        written = fail(IsUnreachable(observe) ? kReasonAgentUnavailable : kReasonReconcileFailed,
                       observe.message());
      } else {
        out.drift = Diff(want, actual ? &*actual : nullptr);
        bool fence_behind =
            !actual || actual->fence().volume_uid() != v.meta.uid ||
            actual->fence().publication_generation() < v.status.publication_generation;
        if (out.drift.empty() && !fence_behind) {
          out.actual = actual;
        } else {
          AcquireAgent(v.spec.agent_ref);
          auto applied = agent->client->ApplyExport(MakeApplyRequest(v, want));
          ReleaseAgent(v.spec.agent_ref);
          if (!applied.ok()) {
            const Status& s = applied.status();
            const char* reason = s.code() == Code::kAborted ? kReasonStaleGeneration
                                 : IsUnreachable(s)         ? kReasonAgentUnavailable
                                                            : kReasonReconcileFailed;
            written = fail(reason, s.message());
          } else {
            out.changes.assign(applied->changes().begin(), applied->changes().end());
            out.actual = applied->export_();
            if (!out.changes.empty()) {
              log::Info("export repaired", {{"volume", volume},
                                            {"drift", out.drift},
                                            {"changes", out.changes},
                                            {"generation", v.status.publication_generation}});
            }
          }
        }
        if (out.actual) {
          auto after = Diff(want, &*out.actual);
          if (!after.empty()) {
            written = fail(kReasonReconcileFailed,
                           "agent still differs from the recorded intent: " + Join(after));
          } else {
            ExportInfo info{out.actual->target_id(), want.spec.bind_address, want.spec.port,
                            v.spec.agent_volume_id};
            written = finish(
                MakeCondition(true, kReasonReconciled,
                              "export matches the recorded intent (" +
                                  std::to_string(want.hosts.size()) + " ACL entries, generation " +
                                  std::to_string(v.status.publication_generation) + ")",
                              v.meta.generation),
                info);
          }
        }
      }
    }
    if (!written.ok() && written.status().code() == Code::kAborted) continue;  // CAS lost
    RETURN_IF_ERROR(written.status());
    return out;
  }
  return Aborted("volume " + volume + " kept changing during reconcile; will retry");
}

void ExportReconciler::ResyncAgent(const std::string& agent_ref,
                                   const std::vector<store::Object>& volumes, ResyncStats& stats) {
  stats.agents++;
  auto agent = Agent(agent_ref);
  std::map<std::string, av1::Export> by_key;
  Status list_status;
  if (agent.ok()) {
    AcquireAgent(agent_ref);
    auto list = agent->client->ListExports();
    ReleaseAgent(agent_ref);
    stats.agent_calls++;
    if (list.ok()) {
      for (auto& e : *list->mutable_exports()) {
        by_key[ExportKey(e.agent_volume_id(), e.protocol())] = std::move(e);
      }
    } else {
      list_status = list.status();
    }
  } else {
    list_status = agent.status();
  }
  for (const auto& obj : volumes) {
    stats.volumes++;
    if (!list_status.ok()) {
      // Every volume of an unreachable agent says so; one call decided it.
      auto v = LoadVolume(obj);
      if (!v.ok() || !v->status.export_spec || v->status.deleting || v->meta.deletion_timestamp) {
        EnqueueVolume(obj.name);
        continue;
      }
      Condition c = MakeCondition(
          false, IsUnreachable(list_status) ? kReasonAgentUnavailable : kReasonReconcileFailed,
          list_status.message(), obj.generation);
      auto w = WriteOutcome(obj, c, std::nullopt);
      if (w.ok() && *w) stats.status_writes++;
      EnqueueKey(kVolPrefix + obj.name, options_.backoff_base);
      continue;
    }
    auto proto = ProtocolFromString(obj.spec.value("protocol", ""));
    std::string id = obj.spec.value("agentVolumeID", "");
    const av1::Export* seen = nullptr;
    if (proto.ok()) {
      auto it = by_key.find(ExportKey(id, *proto));
      if (it != by_key.end()) seen = &it->second;
    }
    int64_t rv_before = obj.resource_version;
    auto r = Reconcile(obj.name, seen);
    if (!r.ok()) {
      RecordFailure(obj.name, true);
      continue;
    }
    if (!r->drift.empty()) stats.drifted++;
    if (!r->changes.empty() || !r->drift.empty()) stats.agent_calls++;
    auto now = store_.Get(kKindVolume, obj.name);
    if (now.ok() && now->resource_version != rv_before) stats.status_writes++;
    RecordFailure(obj.name, r->condition.status == "False" &&
                                r->condition.reason != std::string(kReasonExportSpecMissing));
  }
}

ResyncStats ExportReconciler::ResyncAll() {
  ResyncStats stats;
  auto list = store_.List(kKindVolume);
  if (!list.ok()) {
    log::Warn("resync: cannot list volumes", {{"error", list.status().ToString()}});
    return stats;
  }
  std::map<std::string, std::vector<store::Object>> by_agent;
  for (auto& obj : list->items) {
    by_agent[obj.spec.value("agentRef", "")].push_back(std::move(obj));
  }
  for (const auto& [agent_ref, vols] : by_agent) ResyncAgent(agent_ref, vols, stats);
  return stats;
}

void ExportReconciler::PollEpochs() {
  auto list = store_.List(kKindAgent);
  if (!list.ok()) return;
  for (const auto& obj : list->items) {
    auto rec = AgentFromJson(MetaOf(obj), obj.spec, obj.status);
    if (!rec.ok()) continue;
    auto client = agents_.Client(obj.name, {rec->address, rec->port, rec->tls_server_name});
    Status reach;
    std::string epoch = rec->boot_epoch;
    if (client.ok()) {
      auto info = (*client)->GetInfo();
      if (info.ok()) {
        epoch = info->boot_epoch();
      } else {
        reach = info.status();
      }
    } else {
      reach = client.status();
    }
    std::vector<Condition> conds = rec->conditions;
    bool changed =
        SetCondition(conds,
                     {kCondAgentConnected, reach.ok() ? "True" : "False",
                      reach.ok() ? "Connected" : "Unreachable",
                      reach.ok() ? "agent answered GetInfo" : reach.message(), "", obj.generation},
                     FormatRfc3339(clock_.Now()));
    bool epoch_changed = reach.ok() && epoch != rec->boot_epoch;
    std::string previous_epoch = rec->boot_epoch;
    if (changed || epoch_changed) {
      store::Object next = obj;
      rec->conditions = conds;
      rec->boot_epoch = epoch;
      next.status = AgentStatusToJson(*rec);
      auto w = store_.UpdateStatus(next);
      if (w.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        own_writes_[kAgentPrefix + obj.name] = w->resource_version;
      }
    }
    if (epoch_changed) {
      log::Info("agent boot epoch changed; re-applying its exports",
                {{"agent", obj.name}, {"was", previous_epoch}, {"now", epoch}});
      EnqueueKey(kAgentPrefix + obj.name);
    }
  }
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
