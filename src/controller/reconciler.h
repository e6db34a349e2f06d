// The export reconciler: level-triggered convergence of every volume's kernel
// export to its recorded intent (docs/architecture.md, "The export reconciler").
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/convert.h"
#include "common/clock.h"
#include "common/named_locks.h"
#include "controller/agent_api.h"
#include "controller/desired.h"
#include "kube/events.h"
#include "store/cache.h"
#include "store/store.h"

namespace pillar::controller {

struct ReconcilerOptions {
  std::chrono::milliseconds resync_interval{std::chrono::seconds(30)};
  double resync_jitter = 0.2;  // each period is interval * [1 - j, 1 + j]
  int workers = 8;
  int max_inflight_per_agent = 4;
  // A resync applies what it found drifted on one agent in ApplyExports calls
  // of at most this many volumes (1: one ApplyExport per volume).
  int apply_batch = 256;
  // Threads a resync gives one agent's per-volume passes (verify, record)
  // once its batches were applied, so its status writes overlap instead of
  // queueing one behind another (one thread per 64 volumes, at most this).
  int resync_writers_per_agent = 4;
  // How many workers may work on one agent's keys at once (0: half the
  // workers, at least 1, and never all of them when there are two or more):
  // a slow or hanging agent holds only these, and every other agent's
  // volumes go on being reconciled by the rest.
  int max_workers_per_agent = 0;
  std::chrono::milliseconds backoff_base{500};
  std::chrono::milliseconds backoff_max{std::chrono::seconds(30)};
  std::chrono::milliseconds epoch_poll_interval{std::chrono::seconds(5)};
  // While an agent is unreachable it is polled this often instead: a
  // restarted agent's new epoch (its target state to rebuild) is then
  // noticed within this much of its return, not a whole poll interval.
  std::chrono::milliseconds unreachable_poll_interval{250};
  // A volume record with no status at all is a create still in flight (the
  // Kubernetes store writes an object and its status in two requests): it is
  // left alone this long after its creationTimestamp, then judged as it is.
  std::chrono::milliseconds create_grace{std::chrono::seconds(10)};
  // A record whose create never completed (Provisioned=False: the agent was
  // unreachable or timed out, and the CO did not come back) is removed this
  // long after its creationTimestamp, with whatever storage of its lifecycle
  // the agent holds. Far above the agent call timeout, so a create still in
  // flight is never reaped.
  std::chrono::milliseconds abandoned_create_ttl{std::chrono::minutes(10)};
  // Told of every ExportReconciled transition (status or reason changed),
  // after it is written; none when null.
  kube::EventSink* events = nullptr;
};

struct ReconcileOutcome {
  api::Condition condition;          // the ExportReconciled condition written
  std::vector<std::string> drift;    // what differed before the pass
  std::vector<std::string> changes;  // what the agent changed
  std::optional<agent_api::Export> actual;
  bool status_written = false;    // the condition or exportInfo changed and was written
  bool create_pending = false;    // a create in flight: nothing done, looked at again later
  bool not_provisioned = false;   // Provisioned=False: nothing done, nothing recorded
  bool applied_in_batch = false;  // the apply was the resync's ApplyExports item, not its own call
  bool epoch_reapply = false;     // applied because the agent's boot epoch moved
  const char* repair_cause = nullptr;         // a repair's cause (controller_metrics.h), else null
  std::optional<agent_api::Export> observed;  // what the agent had before any apply
};

struct ResyncStats {
  int agents = 0;
  int agent_calls = 0;
  int volumes = 0;
  int drifted = 0;
  int status_writes = 0;
  int batched = 0;  // volumes applied through an ApplyExports batch
  int skipped = 0;  // passed over: record and export exactly as last verified
};

// Adds `b`'s counts to `a` (per-agent and per-thread parts of a pass).
ResyncStats& operator+=(ResyncStats& a, const ResyncStats& b);

struct SnapshotResyncStats {
  int snapshots = 0;
  int status_writes = 0;
  int deletes_finished = 0;  // records marked deleting whose agent delete completed here
  int reaped = 0;            // unconfirmed creates past abandoned_create_ttl
};

class ExportReconciler {
 public:
  ExportReconciler(store::Store& store, AgentDirectory& agents, Clock& clock,
                   ReconcilerOptions options = {});
  ~ExportReconciler();

  // Starts the watches, workers, the periodic resync and the epoch poller.
  Status Start();
  void Stop();

  // Reconciles one volume now, on the caller's thread, and records the
  // condition. Publish/unpublish use it to confirm an ACL change.
  StatusOr<ReconcileOutcome> ReconcileNow(const std::string& volume);

  // One pass over every agent: one ListExports per agent, a comparison per
  // volume, an apply only where something drifted, a status write only where
  // the condition changed.
  ResyncStats ResyncAll();
  // The same pass for one agent's volumes: what a new boot epoch of that
  // agent starts (its lost exports rebuilt in ApplyExports batches).
  ResyncStats ResyncAgentNow(const std::string& agent_ref);

  // One pass over every PillarSnapshot: one ListSnapshots per agent; the
  // Ready condition says whether the agent still holds each (SnapshotMissing
  // when not, AgentUnavailable when it cannot be asked); a delete the CO
  // left half done (marked deleting) is finished; a create never confirmed
  // is reaped after abandoned_create_ttl. Status written only on change.
  SnapshotResyncStats ResyncSnapshots();

  // Checks every agent's boot epoch; an agent whose epoch changed (restart,
  // reboot, module reload) is resynced at once. Returns whether some agent
  // did not answer.
  bool PollEpochs();
  // How long the epoch loop waits after a poll.
  std::chrono::milliseconds NextEpochPoll(bool some_unreachable) const;
  // Whether `volume` of `agent` waits for its one apply since the agent's
  // restart; the epoch it would be applied in.
  std::optional<std::string> ReapplyEpoch(const std::string& agent, const std::string& volume);

  void EnqueueVolume(const std::string& volume);

  // An auth=chap volume's credentials, from CreateVolume / ControllerPublish
  // secrets: held in memory only, sent with the next apply whose recorded
  // digest they match, and dropped once the agent reports that digest (the
  // agent keeps its own copy; the store only ever holds the digest).
  void OfferCredentials(const std::string& volume, Credentials credentials);

  // Every object of `kind`, sorted by name: from the watch-fed cache every
  // read of a resync is served from once started, from the store before.
  // The CSI controller lists through it too.
  StatusOr<std::vector<store::Object>> ReadAll(const std::string& kind) const;
  // ReadAll without copying each record out of the cache (a resync's list).
  StatusOr<std::vector<store::StoreCache::Shared>> ReadAllShared(const std::string& kind) const;

 private:
  struct AgentView {
    api::AgentRecord record;
    std::shared_ptr<AgentClient> client;
  };

  // What a resync's ListExports saw for one volume (nullptr: no export);
  // nullopt: ask the agent.
  using SeenExport = std::optional<const agent_api::Export*>;

  // An apply a resync already made in one ApplyExports batch: the request as
  // it was sent and the agent's answer for it.
  struct BatchApplied {
    agent_api::ApplyExportRequest request;
    agent_api::ApplyExportItem item;
  };

  // One pass for one volume: converge, then record the condition (CAS-retried).
  // `fresh` reads the store itself rather than the cache first. `batched`:
  // the answer to the apply this volume would make, when it is exactly that
  // request (the record did not move since the batch was planned).
  StatusOr<ReconcileOutcome> Reconcile(const std::string& volume, const SeenExport& seen,
                                       bool fresh, const BatchApplied* batched = nullptr);
  // Observe, decide, apply and verify; fills out.condition (and `info` when
  // reconciled). False when the volume is being deleted or its create is in
  // flight (out.create_pending): nothing to record.
  // `last`: what the volume's last Reconciled pass verified, if any.
  struct LastVerified;
  bool Converge(const store::Object& obj, const SeenExport& seen, const BatchApplied* batched,
                const LastVerified* last, ReconcileOutcome& out,
                std::optional<api::ExportInfo>& info);
  // The export the volume's recorded intent asks for (node records read
  // through the cache).
  StatusOr<DesiredExport> DesiredFor(const api::VolumeState& v) const;
  // The credentials offered for an auth=chap volume that match its recorded
  // digest, if any.
  std::optional<Credentials> OfferedFor(const api::VolumeState& v, const DesiredExport& want);
  // Whether the volume's export must be applied: it differs from the intent,
  // its fence is behind, or the agent restarted since it was last applied.
  bool NeedsApply(const api::VolumeState& v, const agent_api::Export* actual,
                  const std::vector<std::string>& drift);
  // A resync's applies for one agent, made in ApplyExports batches before the
  // volumes' own passes: volume name -> what was sent and answered.
  std::map<std::string, BatchApplied> ApplyInBatches(
      const std::string& agent_ref, AgentClient& client,
      const std::vector<const store::Object*>& volumes,
      const std::map<std::string, agent_api::Export>& by_key, ResyncStats& stats);
  // The agent's export of the volume; nullopt when it has none.
  StatusOr<std::optional<agent_api::Export>> Observe(const api::VolumeState& v,
                                                     const DesiredExport& want, AgentClient& client,
                                                     const SeenExport& seen);
  StatusOr<AgentView> Agent(const std::string& agent_ref);
  // Writes the condition (and exportInfo when reconciled) unless unchanged;
  // `version` becomes the record's resourceVersion after it.
  StatusOr<bool> WriteOutcome(const store::Object& obj, const api::Condition& cond,
                              const std::optional<api::ExportInfo>& info, std::string* version);
  void ResyncAgent(const std::string& agent_ref, const std::vector<const store::Object*>& volumes,
                   ResyncStats& stats);
  // One agent's GetInfo: its AgentConnected condition, and a new boot
  // epoch recorded and acted on. Whether it answered (nullopt: the record
  // does not load).
  std::optional<bool> PollAgent(const store::Object& obj);
  // Whether the agent lists, for one of `volumes`, something other than the
  // export its last Reconciled pass verified.
  bool VerifiedAndMoved(const std::vector<const store::Object*>& volumes,
                        const std::map<std::string, agent_api::Export>& by_key);
  // Whether a resync may pass over `obj`: its last pass verified it
  // Reconciled at this very record version, no node or agent record (nor an
  // agent's boot epoch) moved since, and its agent lists exactly the export
  // it verified then.
  bool StillVerified(const store::Object& obj,
                     const std::map<std::string, agent_api::Export>& by_key);
  // The agent a record names: from the last verification of this very
  // record version when there is one, else parsed.
  std::string AgentRefFor(const store::Object& obj);
  // Removes a record whose create was abandoned (see abandoned_create_ttl):
  // first the storage of its lifecycle on the agent (the agent deletes only
  // what carries that uid), then the record, pinned to its uid and version.
  void ReapAbandonedCreate(const store::Object& obj, AgentClient& client);
  // `agent` (when known) is the agent whose calls the key's work makes; the
  // workers skip a key while that agent has max_workers_per_agent busy.
  void EnqueueKey(const std::string& key, std::chrono::milliseconds delay = {},
                  const std::string& agent = "");
  // The agent a queued key works on: from the key ("a/NAME"), or learned
  // when it was queued or last looked at; "" when not known yet.
  std::string AgentOfKeyLocked(const std::string& key) const;
  int WorkerCapPerAgent() const;
  void ExpandNode(const std::string& node_id);
  void WorkerLoop();
  void ResyncLoop();
  void EpochLoop();
  // Reads from the watch-fed cache once started, from the store before.
  StatusOr<store::Object> Read(const std::string& kind, const std::string& name) const;
  void RecordFailure(const std::string& volume, bool failed);

  // Per-agent bound on concurrent agent calls: `call` runs holding one of
  // the agent's slots (waiting for one), released however it returns.
  template <typename Call>
  auto WithAgentSlot(const std::string& agent_ref, Call&& call) {
    AgentSlot slot(*this, agent_ref);
    return call();
  }
  class AgentSlot {
   public:
    AgentSlot(ExportReconciler& r, std::string agent_ref)
        : r_(r), agent_ref_(std::move(agent_ref)) {
      r_.AcquireAgent(agent_ref_);
    }
    ~AgentSlot() { r_.ReleaseAgent(agent_ref_); }
    AgentSlot(const AgentSlot&) = delete;
    AgentSlot& operator=(const AgentSlot&) = delete;

   private:
    ExportReconciler& r_;
    std::string agent_ref_;
  };
  void AcquireAgent(const std::string& agent_ref);
  void ReleaseAgent(const std::string& agent_ref);

  store::Store& store_;
  AgentDirectory& agents_;
  Clock& clock_;
  ReconcilerOptions options_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<std::string> queue_;
  std::set<std::string> queued_;
  std::map<std::string, std::chrono::steady_clock::time_point> not_before_;
  std::map<std::string, int> failures_;
  // key -> resourceVersion of our own last status write (its event is ours)
  std::map<std::string, decltype(store::Object::resource_version)> own_writes_;
  std::map<std::string, int> inflight_;
  std::condition_variable inflight_cv_;
  std::map<std::string, std::string> agent_of_;  // volume key -> its agent
  std::map<std::string, int> busy_workers_;      // agent -> workers on its keys
  // After an agent's boot epoch changed (seen by PollEpochs), each of its
  // volumes is applied once even when nothing differs: the new agent process
  // then holds the intent and repairs what it sees lost on a kernel event
  // (an NFS export table wiped) without waiting for a resync.
  std::map<std::string, std::string> restarted_agents_;  // agent -> its new epoch
  std::map<std::string, std::string> applied_in_epoch_;  // volume -> epoch applied in
  NamedLocks agent_polls_;                               // PollAgent: one at a time per agent

  std::mutex credentials_mu_;
  std::map<std::string, Credentials> credentials_;  // volume -> offered, not yet on the agent

  NamedLocks volume_locks_;  // serializes reconciles of the same volume
  // Serializes resyncs of the same agent: two passes planning at once (the
  // agent's key taken by two workers, a periodic pass beside an epoch's)
  // would each send a batch before either recorded what it applied.
  NamedLocks agent_resyncs_;

  // Each volume's last recorded ExportReconciled "status/reason", behind the
  // pillar_controller_volumes gauge.
  std::mutex recorded_mu_;
  std::map<std::string, std::pair<std::string, std::string>> recorded_;
  // Returns whether the volume's status/reason moved (null: it is gone).
  bool NoteRecorded(const std::string& volume, const api::Condition* condition);

  // What a pass last verified for each volume (see StillVerified); kept only
  // while the watch-fed cache runs, whose node and agent events (and each new
  // boot epoch) move records_epoch_ and so retire every entry at once.
  struct Verified {
    std::string resource_version;
    uint64_t records_epoch = 0;
    std::string agent_ref;
    std::string export_key;
    agent_api::Export actual;
  };
  std::mutex verified_mu_;
  std::map<std::string, Verified> verified_;
  std::atomic<uint64_t> records_epoch_{0};
  // The export each volume's last Reconciled pass verified, and the record
  // version it verified it at. Unlike verified_ it outlives failed passes
  // (an agent down for a while): what a repair is measured against.
  struct LastVerified {
    std::string resource_version;
    agent_api::Export actual;
  };
  std::map<std::string, LastVerified> last_verified_;  // under verified_mu_
  // What was last verified, held against the intent and against what the
  // agent has (`observed`; nullopt: nothing). intent && !agent: the agent
  // lost it (a restart, or someone else's edit).
  struct AsVerified {
    bool intent = false;  // the intent still asks for exactly it
    bool agent = false;   // the agent still has exactly it
  };
  static AsVerified CompareToVerified(const DesiredExport& want, const LastVerified& last,
                                      const std::optional<agent_api::Export>& observed);
  // What a pass that changed the agent repaired (the cause label of
  // pillar_controller_repairs_total), or null when it applied a new intent
  // (a publish, an expansion).
  static const char* RepairCause(const DesiredExport& want, const LastVerified& last,
                                 const store::Object& obj, const ReconcileOutcome& out);

  std::vector<std::thread> threads_;
  std::unique_ptr<store::StoreCache> cache_;
};

}  // namespace pillar::controller
