// The export reconciler's decisions, against a scripted agent and the real
// SQLite store: when it applies, what it reports, and what it never does.
#include "controller/reconciler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>

#include "controller/controller_fixture.h"
#include "controller/controller_metrics.h"

namespace pillar::controller::testing {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Nothing runs on its own unless a test asks for it.
ReconcilerOptions QuietOptions() {
  ReconcilerOptions o;
  o.resync_interval = std::chrono::hours(24);
  o.epoch_poll_interval = std::chrono::hours(24);
  o.backoff_base = milliseconds(100);
  o.backoff_max = std::chrono::seconds(5);
  return o;
}

class ReconcilerTest : public ControllerFixture {
 protected:
  void TearDown() override {
    agent_->Release();
    if (reconciler_) reconciler_->Stop();
  }

  ExportReconciler& reconciler() {
    if (!reconciler_) {
      reconciler_ = std::make_unique<ExportReconciler>(store(), agents_, clock_, options_);
    }
    return *reconciler_;
  }

  ReconcileOutcome Reconcile(const std::string& name) {
    auto r = reconciler().ReconcileNow(name);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ReconcileOutcome();
  }

  std::string Uid(const std::string& name) { return Get(api::kKindVolume, name).uid; }

  ReconcilerOptions options_ = QuietOptions();
  std::unique_ptr<ExportReconciler> reconciler_;
};

TEST_F(ReconcilerTest, MissingExportIsBuiltFromTheRecordedIntentWithItsFence) {
  RegisterNode("node-a");
  RegisterNode("node-b");
  auto status = Intent(true, {"node-a", "node-b"}, 2);
  status.published_nodes.push_back({"node-c", true});  // revoking: out of the ACL
  CreateVolume(Spec("pvc-1"), status);

  auto out = Reconcile("pvc-1");
  EXPECT_EQ(out.condition.reason, api::kReasonReconciled) << out.condition.message;
  EXPECT_THAT(out.drift, ElementsAre("export is missing on the agent"));
  auto applies = agent_->Applies();
  ASSERT_EQ(applies.size(), 1u);
  EXPECT_EQ(applies[0].fence.volume_uid, Uid("pvc-1"));
  EXPECT_EQ(applies[0].fence.publication_generation, 2);
  EXPECT_EQ(applies[0].spec.port, 4420) << "port 0 is the protocol default";
  EXPECT_EQ(applies[0].spec.bind_address, kAgentAddress);
  EXPECT_TRUE(applies[0].spec.acl_enabled);
  EXPECT_THAT(AllowedHosts("pvc-1"), ElementsAre(NqnOf("node-a"), NqnOf("node-b")));
  EXPECT_EQ(Condition("pvc-1"), "True/Reconciled");
  auto v = Volume("pvc-1");
  ASSERT_TRUE(v.status.export_info.has_value());
  EXPECT_EQ(v.status.export_info->target_id, "nqn.2026-12.com.bhyoo.pillar-csi:tank:2fpvc-1");
  EXPECT_EQ(v.status.export_info->port, 4420);
}

TEST_F(ReconcilerTest, ExportThatLooksRightButWhoseFenceIsBehindIsReapplied) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 5));
  // Exactly the intent, but written at generation 3: the mark never caught
  // up (a lost answer, an agent restored from an old disk).
  agent_->SetExport(ExportFor("pvc-1", Uid("pvc-1"), 3));

  auto out = Reconcile("pvc-1");
  EXPECT_TRUE(out.drift.empty()) << "the export itself matched";
  ASSERT_EQ(agent_->Calls(AgentCall::kApplyExport), 1) << "a fence behind must be re-applied";
  EXPECT_EQ(agent_->Applies()[0].fence.publication_generation, 5);
  ASSERT_TRUE(agent_->MarkOf("tank/pvc-1").has_value());
  EXPECT_EQ(agent_->MarkOf("tank/pvc-1")->publication_generation, 5);
  EXPECT_EQ(Condition("pvc-1"), "True/Reconciled");
}

// Issue 28: a restarted agent knows only what was applied since its start,
// and repairs on a kernel event (an NFS table wiped) only what it knows. So
// after a new boot epoch each volume is applied once even when the export
// survived the restart (knfsd kept it), and only once.
TEST_F(ReconcilerTest, AfterAnAgentRestartEachVolumeIsAppliedOnceEvenWithoutDrift) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 1));
  CreateVolume(Spec("pvc-2"), Intent(true, {"node-a"}, 1));
  Reconcile("pvc-1");
  Reconcile("pvc-2");
  reconciler().PollEpochs();  // records epoch-1
  Reconcile("pvc-1");
  const int settled = agent_->Calls(AgentCall::kApplyExport);
  ASSERT_EQ(settled, 2) << "nothing differs and the agent did not restart: no apply";

  agent_->SetBootEpoch("epoch-2");  // restarted, its exports intact
  reconciler().PollEpochs();
  auto out = Reconcile("pvc-1");
  EXPECT_TRUE(out.drift.empty());
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), settled + 1);
  Reconcile("pvc-1");
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), settled + 1) << "once per restart";
  Reconcile("pvc-2");
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), settled + 2);
  EXPECT_EQ(Condition("pvc-1"), "True/Reconciled");

  agent_->SetBootEpoch("epoch-3");  // and again
  reconciler().PollEpochs();
  Reconcile("pvc-1");
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), settled + 3);
}

TEST_F(ReconcilerTest, ExportWithoutAnyFenceIsReappliedSoTheMarkExists) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 1));
  agent_->SetExport(ExportFor("pvc-1", "", 0));  // made before fencing existed

  Reconcile("pvc-1");
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 1);
  ASSERT_TRUE(agent_->MarkOf("tank/pvc-1").has_value());
  EXPECT_EQ(agent_->MarkOf("tank/pvc-1")->volume_uid, Uid("pvc-1"));
  EXPECT_EQ(Condition("pvc-1"), "True/Reconciled");
}

TEST_F(ReconcilerTest, ExportFencedByAnotherLifecycleIsNeverReportedReconciled) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 5));
  // Same name, same ACL, but another lifecycle of the volume holds the mark.
  agent_->SetExport(ExportFor("pvc-1", "0d6c1f4e-0000-4000-8000-000000000000", 9));

  auto out = Reconcile("pvc-1");
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 1) << "a foreign fence is behind";
  EXPECT_EQ(Condition("pvc-1"), "False/StaleGeneration") << out.condition.message;
}

TEST_F(ReconcilerTest, CurrentOrNewerFenceWithTheRightExportAppliesNothing) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 5));
  agent_->SetExport(ExportFor("pvc-1", Uid("pvc-1"), 5));
  Reconcile("pvc-1");
  EXPECT_EQ(agent_->Calls(AgentCall::kGetExport), 1);
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 0);
  EXPECT_EQ(Condition("pvc-1"), "True/Reconciled");

  // A newer mark than this write: re-applying would only be refused.
  agent_->SetExport(ExportFor("pvc-1", Uid("pvc-1"), 8));
  Reconcile("pvc-1");
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 0);
}

TEST_F(ReconcilerTest, ApplyThatLeavesTheExportDifferentIsReconcileFailedNeverReconciled) {
  RegisterNode("node-a");
  RegisterNode("node-b");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a", "node-b"}, 4));
  // The agent answers OK but node-b's entry did not take.
  agent_->RewriteApply([](agent_api::Export& e) {
    e.allowed_hosts.clear();
    e.allowed_hosts.push_back(NqnOf("node-a"));
  });
  auto out = Reconcile("pvc-1");
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 1);
  EXPECT_EQ(Condition("pvc-1"), "False/ReconcileFailed");
  EXPECT_THAT(ConditionMessage("pvc-1"), HasSubstr("still differs"));
  EXPECT_THAT(ConditionMessage("pvc-1"), HasSubstr("missing ACL entry " + NqnOf("node-b")));
  EXPECT_FALSE(Volume("pvc-1").status.export_info.has_value()) << "no endpoint for consumers";

  // An agent whose ACL stays off when the intent has it on: wider than recorded.
  agent_->RewriteApply([](agent_api::Export& e) { e.spec.acl_enabled = false; });
  Reconcile("pvc-1");
  EXPECT_EQ(Condition("pvc-1"), "False/ReconcileFailed");
  EXPECT_THAT(ConditionMessage("pvc-1"), HasSubstr("aclEnabled is false, want true"));

  // Once the apply takes, the same volume is Reconciled.
  agent_->RewriteApply(nullptr);
  Reconcile("pvc-1");
  EXPECT_EQ(Condition("pvc-1"), "True/Reconciled");
}

TEST_F(ReconcilerTest, AgentErrorsMapToTheirReasons) {
  CreateVolume(Spec("pvc-1"), Intent(false));
  struct Case {
    AgentCall call;
    pillar::Status error;
    const char* want;
  };
  const std::vector<Case> cases = {
      {AgentCall::kApplyExport, Aborted("fenced: generation 9 held"), "False/StaleGeneration"},
      {AgentCall::kApplyExport, Unavailable("connection refused"), "False/AgentUnavailable"},
      {AgentCall::kApplyExport, DeadlineExceeded("deadline"), "False/AgentUnavailable"},
      {AgentCall::kApplyExport, Internal("configfs write failed"), "False/ReconcileFailed"},
      {AgentCall::kGetExport, Unavailable("connection refused"), "False/AgentUnavailable"},
      {AgentCall::kGetExport, DeadlineExceeded("deadline"), "False/AgentUnavailable"},
      {AgentCall::kGetExport, Internal("cannot read configfs"), "False/ReconcileFailed"},
  };
  for (const auto& c : cases) {
    agent_->FailWith(c.call, c.error);
    Reconcile("pvc-1");
    EXPECT_EQ(Condition("pvc-1"), c.want) << c.error.ToString();
    EXPECT_THAT(ConditionMessage("pvc-1"), HasSubstr(c.error.message()));
    agent_->ClearFailure(c.call);
  }
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 4) << "a failed observe applies nothing";
}

// A user sees every ExportReconciled transition as an Event (status or
// reason changed), after it is written, and nothing for a pass that changes
// neither (a new message alone is no transition).
class RecordingSink : public kube::EventSink {
 public:
  void Record(const kube::ObjectRef& about, bool warning, const std::string& reason,
              const std::string& message) override {
    seen.push_back((warning ? "Warning/" : "Normal/") + reason);
    refs.push_back(about);
    messages.push_back(message);
  }
  std::vector<std::string> seen;
  std::vector<kube::ObjectRef> refs;
  std::vector<std::string> messages;
};

TEST_F(ReconcilerTest, EveryExportReconciledTransitionIsOneEvent) {
  RecordingSink sink;
  options_.events = &sink;
  CreateVolume(Spec("pvc-1"), Intent(false));
  Reconcile("pvc-1");
  Reconcile("pvc-1");  // converged: no write, no event
  ASSERT_THAT(sink.seen, ElementsAre("Normal/Reconciled"));
  EXPECT_EQ(sink.refs[0].kind, api::kKindVolume);
  EXPECT_EQ(sink.refs[0].name, "pvc-1");
  EXPECT_EQ(sink.refs[0].uid, Uid("pvc-1"));
  EXPECT_EQ(sink.refs[0].api_version, "pillar-csi.bhyoo.com/v1alpha1");
  EXPECT_EQ(sink.refs[0].resource_version, Get(api::kKindVolume, "pvc-1").resource_version)
      << "the version the transition was written at";

  agent_->FailWith(AgentCall::kGetExport, Unavailable("connection refused"));
  Reconcile("pvc-1");
  agent_->FailWith(AgentCall::kGetExport, Unavailable("no route to host"));
  Reconcile("pvc-1");  // same status and reason, another message: written, no event
  EXPECT_THAT(ConditionMessage("pvc-1"), HasSubstr("no route to host"));
  agent_->FailWith(AgentCall::kGetExport, Internal("cannot read configfs"));
  Reconcile("pvc-1");  // False -> False, another reason: a transition
  agent_->ClearFailure(AgentCall::kGetExport);
  Reconcile("pvc-1");
  EXPECT_THAT(sink.seen, ElementsAre("Normal/Reconciled", "Warning/AgentUnavailable",
                                     "Warning/ReconcileFailed", "Normal/Reconciled"));
  EXPECT_THAT(sink.messages[1], HasSubstr("connection refused"));
}

// The Kubernetes store writes a record and its status in two requests; in
// between the record has no status at all. The reconciler leaves such a
// record alone for a grace period (writing ExportSpecMissing there would make
// the create's own status write lose its compare-and-swap), and after it
// judges the record as it is.
TEST_F(ReconcilerTest, ARecordWithoutStatusIsACreateInFlightUntilItsGraceEnds) {
  store::Object o;
  o.kind = api::kKindVolume;
  o.name = "pvc-1";
  o.spec = api::ToJson(Spec("pvc-1"));
  ASSERT_TRUE(store().Create(o).ok());
  const std::string version = Get(api::kKindVolume, "pvc-1").resource_version;

  options_.create_grace = std::chrono::hours(1);
  auto out = Reconcile("pvc-1");
  EXPECT_TRUE(out.create_pending);
  EXPECT_FALSE(out.status_written);
  EXPECT_EQ(Get(api::kKindVolume, "pvc-1").resource_version, version) << "nothing written";
  EXPECT_EQ(agent_->TotalCalls(), 0);

  reconciler_.reset();
  options_.create_grace = milliseconds(0);
  out = Reconcile("pvc-1");
  EXPECT_FALSE(out.create_pending);
  EXPECT_EQ(Condition("pvc-1"), "False/ExportSpecMissing");
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 0) << "and still nothing guessed";
}

api::VolumeStatus Unconfirmed(api::VolumeStatus s) {
  api::SetCondition(s.conditions, {api::kCondProvisioned, "False", api::kReasonCreating, "", "", 0},
                    "2026-12-06T00:00:00Z");
  return s;
}

// Issue 22, item 3: a record whose storage the agent has not confirmed (a
// create under way, or one that failed and waits for its retry) is never
// acted on: whatever holds its name on the agent may not be pillar's.
TEST_F(ReconcilerTest, ARecordTheAgentHasNotConfirmedIsLeftAlone) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Unconfirmed(Intent(true, {"node-a"}, 1)));
  agent_->AddVolume("tank/pvc-1", 1LL << 30);  // someone's, of the same name
  const std::string version = Get(api::kKindVolume, "pvc-1").resource_version;
  auto out = Reconcile("pvc-1");
  EXPECT_TRUE(out.not_provisioned);
  EXPECT_FALSE(out.status_written);
  reconciler().ResyncAll();
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 0);
  EXPECT_EQ(agent_->Calls(AgentCall::kGetExport), 0);
  EXPECT_EQ(agent_->Calls(AgentCall::kDeleteVolume), 0);
  EXPECT_FALSE(agent_->MarkOf("tank/pvc-1").has_value());
  EXPECT_EQ(Get(api::kKindVolume, "pvc-1").resource_version, version) << "nothing written";
}

// An unconfirmed record the CO never came back for is removed after
// abandoned_create_ttl, with the storage of its lifecycle on the agent; a
// young one is left to the create that may still be in flight.
TEST_F(ReconcilerTest, AnAbandonedCreateIsReapedWithWhatItsLifecycleLeft) {
  CreateVolume(Spec("pvc-1"), Unconfirmed(Intent(true, {}, 0)));
  agent_->AddVolume("tank/pvc-1", 1LL << 30);  // made, but the answer was lost
  options_.abandoned_create_ttl = std::chrono::hours(1);
  reconciler().ResyncAll();
  EXPECT_EQ(agent_->Calls(AgentCall::kDeleteVolume), 0);
  EXPECT_TRUE(store().Get(api::kKindVolume, "pvc-1").ok());

  reconciler_.reset();
  options_.abandoned_create_ttl = milliseconds(0);
  std::this_thread::sleep_for(milliseconds(1100));  // creationTimestamp has seconds only
  reconciler().ResyncAll();
  EXPECT_EQ(agent_->Calls(AgentCall::kDeleteVolume), 1);
  EXPECT_FALSE(agent_->VolumeOf("tank/pvc-1").has_value());
  EXPECT_EQ(store().Get(api::kKindVolume, "pvc-1").status().code(), Code::kNotFound);
}

// Issue 22, item 2: the target consumers are told is the one the controller
// derives; an agent reporting another (a victim's NQN) is ReconcileFailed and
// its claim is never recorded in exportInfo.
TEST_F(ReconcilerTest, AnAgentsClaimOfAnotherTargetIsNeverTakenForConsumers) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 1));
  const std::string victim = "nqn.2026-12.com.bhyoo.pillar-csi:tank:2fvictim";
  agent_->RewriteApply([&](agent_api::Export& e) { e.target_id = victim; });
  auto out = Reconcile("pvc-1");
  EXPECT_EQ(Condition("pvc-1"), "False/ReconcileFailed");
  EXPECT_THAT(out.condition.message, HasSubstr("reports target " + victim));
  EXPECT_THAT(out.condition.message, HasSubstr("nqn.2026-12.com.bhyoo.pillar-csi:tank:2fpvc-1"));
  EXPECT_FALSE(Volume("pvc-1").status.export_info.has_value());
}

TEST_F(ReconcilerTest, RealFencingRefusalIsStaleGeneration) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 5));
  // A newer controller (generation 7) already changed the ACL; this record is older.
  auto newer = ExportFor("pvc-1", Uid("pvc-1"), 7);
  newer.allowed_hosts.clear();
  agent_->SetExport(newer);
  Reconcile("pvc-1");
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 1);
  EXPECT_EQ(Condition("pvc-1"), "False/StaleGeneration");
  EXPECT_TRUE(AllowedHosts("pvc-1").empty()) << "the newer write stands";
}

TEST_F(ReconcilerTest, UnreachableOrUnregisteredAgent) {
  RegisterAgent("storage-2", "10.0.0.6", kBootEpoch);  // in the store, nothing answers
  auto spec = Spec("pvc-2");
  spec.agent_ref = "storage-2";
  CreateVolume(spec, Intent(false));
  Reconcile("pvc-2");
  EXPECT_EQ(Condition("pvc-2"), "False/AgentUnavailable");

  spec = Spec("pvc-9");
  spec.agent_ref = "storage-9";  // no PillarAgent at all
  CreateVolume(spec, Intent(false));
  Reconcile("pvc-9");
  EXPECT_EQ(Condition("pvc-9"), "False/ReconcileFailed");
  EXPECT_THAT(ConditionMessage("pvc-9"), HasSubstr("PillarAgent storage-9"));
  EXPECT_EQ(agent_->TotalCalls(), 0);
}

TEST_F(ReconcilerTest, MalformedRecordIsReconcileFailedNamingTheFieldAndTouchesNothing) {
  CreateVolume(Spec("pvc-1"), Intent(false));
  EditStatus(api::kKindVolume, "pvc-1", [](nlohmann::json& s) { s["exportSpec"]["port"] = "80"; });
  Reconcile("pvc-1");
  EXPECT_EQ(Condition("pvc-1"), "False/ReconcileFailed");
  EXPECT_THAT(ConditionMessage("pvc-1"), HasSubstr("status.exportSpec.port"));

  CreateVolume(Spec("pvc-2"), Intent(true, {"node-a"}));
  EditStatus(api::kKindVolume, "pvc-2",
             [](nlohmann::json& s) { s["publishedNodes"][0].erase("nodeID"); });
  Reconcile("pvc-2");
  EXPECT_EQ(Condition("pvc-2"), "False/ReconcileFailed");
  EXPECT_THAT(ConditionMessage("pvc-2"), HasSubstr("status.publishedNodes[0].nodeID"));
  EXPECT_EQ(agent_->TotalCalls(), 0);
}

TEST_F(ReconcilerTest, DeletingVolumeIsSkippedWithoutAnyAgentCall) {
  RegisterNode("node-a");
  auto status = Intent(true, {"node-a"}, 3);
  status.deleting = true;
  CreateVolume(Spec("pvc-1"), status);
  CreateVolume(Spec("pvc-2"), Intent(true, {"node-a"}, 3));
  MarkDeletedByStore(api::kKindVolume, "pvc-2");
  ASSERT_TRUE(Get(api::kKindVolume, "pvc-2").deletion_timestamp);
  auto before1 = Get(api::kKindVolume, "pvc-1");
  auto before2 = Get(api::kKindVolume, "pvc-2");

  EXPECT_TRUE(reconciler().ReconcileNow("pvc-1").ok());
  EXPECT_TRUE(reconciler().ReconcileNow("pvc-2").ok());
  EXPECT_EQ(agent_->TotalCalls(), 0);
  EXPECT_EQ(agents_.ClientCalls(), 0);
  EXPECT_EQ(Get(api::kKindVolume, "pvc-1"), before1) << "DeleteVolume owns it: nothing recorded";
  EXPECT_EQ(Get(api::kKindVolume, "pvc-2"), before2);
}

TEST_F(ReconcilerTest, ExportSpecMissingTouchesNothing) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 3));
  auto existing = ExportFor("pvc-1", Uid("pvc-1"), 2);
  existing.allowed_hosts.push_back(NqnOf("node-z"));  // whatever the target has, it stays
  agent_->SetExport(existing);
  EditStatus(api::kKindVolume, "pvc-1", [](nlohmann::json& s) { s.erase("exportSpec"); });

  Reconcile("pvc-1");
  EXPECT_EQ(Condition("pvc-1"), "False/ExportSpecMissing");
  EXPECT_EQ(agent_->TotalCalls(), 0);
  EXPECT_EQ(agents_.ClientCalls(), 0);
  auto now = agent_->ExportOf("tank/pvc-1", Protocol::kNvmeofTcp);
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(*now, existing);
}

TEST_F(ReconcilerTest, UnresolvablePublishedNodeAppliesNothingSoItsEntryIsNeverDropped) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 2));
  auto existing = ExportFor("pvc-1", Uid("pvc-1"), 2);
  existing.allowed_hosts.push_back(NqnOf("node-gone"));
  agent_->SetExport(existing);
  // node-gone is published but its PillarNode record is missing.
  EditStatus(api::kKindVolume, "pvc-1", [](nlohmann::json& s) {
    s["publishedNodes"].push_back({{"nodeID", "node-gone"}, {"revoking", false}});
    s["publicationGeneration"] = 3;
  });

  Reconcile("pvc-1");
  EXPECT_EQ(Condition("pvc-1"), "False/ReconcileFailed");
  EXPECT_THAT(ConditionMessage("pvc-1"), HasSubstr("node-gone"));
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 0);
  EXPECT_THAT(AllowedHosts("pvc-1"), ElementsAre(NqnOf("node-a"), NqnOf("node-gone")));
}

TEST_F(ReconcilerTest, ConcurrentStatusWriteIsRetriedAndNeitherWriteIsLost) {
  RegisterNode("node-a");
  RegisterNode("node-b");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 1));
  // Between the reconciler's read and its status write, a publish records
  // node-b and the resize path records a new capacity.
  std::atomic<bool> fired{false};
  agent_->OnCall([&](AgentCall c) {
    if (c != AgentCall::kGetExport || fired.exchange(true)) return;
    EditStatus(api::kKindVolume, "pvc-1", [](nlohmann::json& s) {
      s["publishedNodes"].push_back({{"nodeID", "node-b"}, {"revoking", false}});
      s["publicationGeneration"] = 2;
      s["capacityBytes"] = 2LL << 30;
    });
  });

  auto r = reconciler().ReconcileNow("pvc-1");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(fired);
  EXPECT_EQ(agent_->Calls(AgentCall::kGetExport), 2) << "the lost CAS re-reads and re-observes";
  auto v = Volume("pvc-1");
  EXPECT_EQ(v.status.capacity_bytes, 2LL << 30);
  ASSERT_EQ(v.status.published_nodes.size(), 2u);
  EXPECT_EQ(v.status.publication_generation, 2);
  EXPECT_EQ(Condition("pvc-1"), "True/Reconciled");
  EXPECT_THAT(AllowedHosts("pvc-1"), ElementsAre(NqnOf("node-a"), NqnOf("node-b")));
  EXPECT_EQ(agent_->MarkOf("tank/pvc-1")->publication_generation, 2);
}

TEST_F(ReconcilerTest, ResyncWithoutDriftWritesNoStatusAndAppliesNothing) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 1));
  CreateVolume(Spec("pvc-2", Protocol::kNfs, "mount"), Intent(true, {"node-a"}, 1));
  Reconcile("pvc-1");
  Reconcile("pvc-2");
  ASSERT_EQ(Condition("pvc-1"), "True/Reconciled");
  ASSERT_EQ(Condition("pvc-2"), "True/Reconciled");
  auto before1 = Get(api::kKindVolume, "pvc-1");
  auto before2 = Get(api::kKindVolume, "pvc-2");
  int applies = agent_->Calls(AgentCall::kApplyExport);
  int gets = agent_->Calls(AgentCall::kGetExport);

  ResyncStats stats = reconciler().ResyncAll();
  EXPECT_EQ(stats.volumes, 2);
  EXPECT_EQ(stats.drifted, 0);
  EXPECT_EQ(stats.status_writes, 0);
  EXPECT_EQ(agent_->Calls(AgentCall::kListExports), 1) << "one list per agent";
  EXPECT_EQ(agent_->Calls(AgentCall::kGetExport), gets);
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), applies);
  EXPECT_EQ(Get(api::kKindVolume, "pvc-1"), before1);
  EXPECT_EQ(Get(api::kKindVolume, "pvc-2"), before2);
}

TEST_F(ReconcilerTest, ResyncRepairsAnOutOfBandEdit) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 1));
  Reconcile("pvc-1");
  // Someone edits the target behind pillar's back: node-a's entry goes, an intruder comes.
  auto edited = *agent_->ExportOf("tank/pvc-1", Protocol::kNvmeofTcp);
  edited.allowed_hosts.clear();
  edited.allowed_hosts.push_back(NqnOf("intruder"));
  agent_->SetExport(edited);

  ResyncStats stats = reconciler().ResyncAll();
  EXPECT_EQ(stats.drifted, 1);
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 1) << "the first reconcile's only";
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExports), 1) << "the resync's repair";
  EXPECT_THAT(AllowedHosts("pvc-1"), ElementsAre(NqnOf("node-a")));
  EXPECT_EQ(Condition("pvc-1"), "True/Reconciled");
}

// Issue 25: what a resync finds drifted on an agent (a rebuild after its
// target state was lost) goes in ApplyExports batches, not a call per volume;
// each volume is still verified and recorded on its own.
TEST_F(ReconcilerTest, AResyncAppliesWhatDriftedInBatchesAndRecordsEachVolume) {
  options_.apply_batch = 2;
  RegisterNode("node-a");
  for (int i = 1; i <= 5; ++i) {
    CreateVolume(Spec("pvc-" + std::to_string(i)), Intent(true, {"node-a"}, 1));
  }
  ResyncStats first = reconciler().ResyncAll();
  EXPECT_EQ(first.drifted, 5);
  EXPECT_EQ(first.batched, 5);
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 0) << "no call per volume";
  EXPECT_THAT(agent_->Batches(), ElementsAre(2u, 2u, 1u));
  for (int i = 1; i <= 5; ++i) {
    std::string name = "pvc-" + std::to_string(i);
    EXPECT_EQ(Condition(name), "True/Reconciled") << name;
    EXPECT_THAT(AllowedHosts(name), ElementsAre(NqnOf("node-a"))) << name;
    EXPECT_EQ(agent_->MarkOf("tank/" + name)->volume_uid, Uid(name));
  }

  agent_->WipeExports();
  ResyncStats rebuilt = reconciler().ResyncAll();
  EXPECT_EQ(rebuilt.drifted, 5);
  EXPECT_EQ(rebuilt.status_writes, 0) << "Reconciled before and after: nothing to write";
  EXPECT_EQ(agent_->Batches().size(), 6u);
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 0);
  for (int i = 1; i <= 5; ++i) {
    EXPECT_TRUE(agent_->ExportOf("tank/pvc-" + std::to_string(i), Protocol::kNvmeofTcp));
  }

  ResyncStats quiet = reconciler().ResyncAll();
  EXPECT_EQ(quiet.drifted, 0);
  EXPECT_EQ(quiet.batched, 0);
  EXPECT_EQ(agent_->Batches().size(), 6u) << "nothing drifted: no batch at all";
}

// The batch is planned from the records as they were; a record that moved
// while it was in flight (a publish of another node) gets its own apply of
// the new intent, and the batch's answer for the old one is never recorded.
TEST_F(ReconcilerTest, ARecordThatMovedWhileItsBatchWasInFlightIsAppliedOnItsOwn) {
  RegisterNode("node-a");
  RegisterNode("node-b");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 1));
  CreateVolume(Spec("pvc-2"), Intent(true, {"node-a"}, 1));
  std::atomic<bool> fired{false};
  agent_->OnCall([&](AgentCall c) {
    if (c != AgentCall::kApplyExports || fired.exchange(true)) return;
    EditStatus(api::kKindVolume, "pvc-1", [](nlohmann::json& s) {
      s["publishedNodes"].push_back({{"nodeID", "node-b"}, {"revoking", false}});
      s["publicationGeneration"] = 2;
    });
  });

  ResyncStats stats = reconciler().ResyncAll();
  EXPECT_TRUE(fired);
  EXPECT_EQ(stats.batched, 1) << "pvc-2's answer is its own";
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 1) << "pvc-1 applied again, on its own";
  auto applies = agent_->Applies();
  ASSERT_EQ(applies.size(), 3u);
  EXPECT_EQ(applies.back().agent_volume_id, "tank/pvc-1");
  EXPECT_EQ(applies.back().fence.publication_generation, 2);
  EXPECT_THAT(AllowedHosts("pvc-1"), ElementsAre(NqnOf("node-a"), NqnOf("node-b")));
  EXPECT_EQ(Condition("pvc-1"), "True/Reconciled");
  EXPECT_THAT(ConditionMessage("pvc-1"), HasSubstr("generation 2"));
  EXPECT_EQ(Condition("pvc-2"), "True/Reconciled");
}

// A batch the agent does not answer at all is every item's answer: each
// volume says the agent is unavailable, and none is asked again on its own.
TEST_F(ReconcilerTest, ABatchThatFailsAsAWholeFailsEachVolumeWithoutACallPerVolume) {
  RegisterNode("node-a");
  for (int i = 1; i <= 3; ++i) {
    CreateVolume(Spec("pvc-" + std::to_string(i)), Intent(true, {"node-a"}, 1));
  }
  agent_->FailWith(AgentCall::kApplyExports, Unavailable("connection reset"));
  reconciler().ResyncAll();
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExports), 1);
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 0);
  for (int i = 1; i <= 3; ++i) {
    EXPECT_EQ(Condition("pvc-" + std::to_string(i)), "False/AgentUnavailable");
  }
}

// Two records naming one agent volume (a hand-made record, a restore gone
// wrong) are never in one batch, which the agent would refuse whole: the
// other volumes are batched, those two go one at a time and are fenced
// against each other as always.
TEST_F(ReconcilerTest, TwoRecordsNamingOneAgentVolumeStayOutOfTheBatch) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 1));
  CreateVolume(Spec("pvc-2"), Intent(true, {"node-a"}, 1));
  auto twin = Spec("pvc-twin");
  twin.agent_volume_id = "tank/pvc-1";
  CreateVolume(twin, Intent(true, {"node-a"}, 1));

  ResyncStats stats = reconciler().ResyncAll();
  EXPECT_THAT(agent_->Batches(), ElementsAre(1u)) << "pvc-2 alone";
  EXPECT_EQ(stats.batched, 1);
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 2);
  EXPECT_EQ(Condition("pvc-2"), "True/Reconciled");
  // The first of the two to apply plants its mark; the other is another
  // lifecycle to the agent and is refused.
  EXPECT_EQ(Condition("pvc-1"), "True/Reconciled");
  EXPECT_EQ(Condition("pvc-twin"), "False/StaleGeneration");
}

// The background loops: workers, backoff, the per-agent bound, the epoch poller.
class ReconcilerLoopTest : public ReconcilerTest {
 protected:
  // A second, healthy agent "storage-2" holding one volume `name`.
  void AddSecondAgentWithVolume(const std::string& name, const api::VolumeStatus& status) {
    auto healthy = agents_.Add("storage-2");
    healthy->SetBootEpoch(kBootEpoch);
    RegisterAgent("storage-2", "10.0.0.2", kBootEpoch);
    api::VolumeSpec other = Spec(name);
    other.agent_ref = "storage-2";
    store::Object o;
    o.kind = api::kKindVolume;
    o.name = other.volume_id;
    o.spec = api::ToJson(other);
    o.status = api::ToJson(status);
    ASSERT_TRUE(store().Create(o).ok());
    healthy->AddVolume(other.agent_volume_id, other.capacity_bytes);
  }
};

TEST_F(ReconcilerLoopTest, FailingVolumeIsRetriedLaterWithBackoffNotHotLooped) {
  options_.workers = 1;
  options_.backoff_base = milliseconds(100);
  CreateVolume(Spec("pvc-1"), Intent(false));
  std::mutex mu;
  std::vector<std::chrono::steady_clock::time_point> attempts;
  agent_->OnCall([&](AgentCall c) {
    if (c != AgentCall::kGetExport) return;
    std::lock_guard<std::mutex> lock(mu);
    attempts.push_back(std::chrono::steady_clock::now());
  });
  agent_->FailWith(AgentCall::kGetExport, Unavailable("agent down"));
  ASSERT_TRUE(reconciler().Start().ok());
  reconciler().EnqueueVolume("pvc-1");

  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(mu);
    return attempts.size() >= 4;
  })) << "a failing volume is retried";
  {
    std::lock_guard<std::mutex> lock(mu);
    // Exponential: at least 100, 200, 400 ms between attempts.
    for (size_t i = 1; i < 4; ++i) {
      auto gap = std::chrono::duration_cast<milliseconds>(attempts[i] - attempts[i - 1]);
      EXPECT_GE(gap.count(), 100 << (i - 1)) << "attempt " << i;
    }
  }
  EXPECT_EQ(Condition("pvc-1"), "False/AgentUnavailable");

  agent_->ClearFailure(AgentCall::kGetExport);
  EXPECT_TRUE(WaitFor([&] { return Condition("pvc-1") == "True/Reconciled"; }))
      << "retried once the agent is back, with no trigger but the backoff";
}

TEST_F(ReconcilerLoopTest, ConcurrentAgentCallsAreBoundedPerAgent) {
  options_.workers = 6;
  options_.max_inflight_per_agent = 2;
  std::vector<std::string> names;
  for (int i = 0; i < 6; ++i) {
    names.push_back("pvc-" + std::to_string(i));
    CreateVolume(Spec(names.back()), Intent(false));
  }
  agent_->Hold();
  ASSERT_TRUE(reconciler().Start().ok());
  for (const auto& n : names) reconciler().EnqueueVolume(n);

  ASSERT_TRUE(WaitFor([&] { return agent_->InFlight() == 2; }));
  // Six workers are busy; give any unbounded one time to pile in.
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(agent_->InFlight(), 2);
  agent_->Release();
  EXPECT_TRUE(WaitFor([&] {
    for (const auto& n : names) {
      if (Condition(n) != "True/Reconciled") return false;
    }
    return true;
  }));
  EXPECT_EQ(agent_->MaxInFlight(), 2);
}

TEST_F(ReconcilerLoopTest, AHangingAgentHoldsOnlyItsShareOfTheWorkers) {
  options_.workers = 4;  // two of them at most on one agent's keys
  options_.max_inflight_per_agent = 4;
  std::vector<std::string> names;
  for (int i = 0; i < 6; ++i) {
    names.push_back("pvc-" + std::to_string(i));
    CreateVolume(Spec(names.back()), Intent(false));
  }
  ASSERT_NO_FATAL_FAILURE(AddSecondAgentWithVolume("pvc-other", Intent(false)));

  agent_->Hold();  // storage-1 hangs
  ASSERT_TRUE(reconciler().Start().ok());
  for (const auto& n : names) reconciler().EnqueueVolume(n);
  ASSERT_TRUE(WaitFor([&] { return agent_->InFlight() == 2; }));
  reconciler().EnqueueVolume("pvc-other");
  EXPECT_TRUE(WaitFor([&] { return Condition("pvc-other") == "True/Reconciled"; }))
      << "storage-2's volume waited behind storage-1's hanging calls";
  EXPECT_EQ(agent_->MaxInFlight(), 2) << "only its share of the workers went to storage-1";
  agent_->Release();
  EXPECT_TRUE(WaitFor([&] {
    for (const auto& n : names) {
      if (Condition(n) != "True/Reconciled") return false;
    }
    return true;
  }));
}

TEST_F(ReconcilerLoopTest, BootEpochChangeAloneReappliesTheAgentsExports) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 1));
  Reconcile("pvc-1");
  reconciler().PollEpochs();  // records AgentConnected now, before any watch runs
  ASSERT_TRUE(reconciler().Start().ok());

  // The agent restarts empty (module reload); nothing in the store changes
  // and the periodic resync is a day away: only the epoch can tell.
  agent_->WipeExports();
  agent_->SetBootEpoch("epoch-2");
  reconciler().PollEpochs();
  EXPECT_TRUE(WaitFor([&] { return !AllowedHosts("pvc-1").empty(); }));
  EXPECT_THAT(AllowedHosts("pvc-1"), ElementsAre(NqnOf("node-a")));
  EXPECT_EQ(Get(api::kKindAgent, kAgentRef).status.value("bootEpoch", ""), "epoch-2");
}

// Issue 25: a resync passes over agents side by side, so one agent that
// hangs holds only its own share of the pass: another agent's drift is
// repaired and recorded while the first has not answered.
TEST_F(ReconcilerLoopTest, AResyncRepairsAHealthyAgentWhileAnotherHangs) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 1));
  ASSERT_NO_FATAL_FAILURE(AddSecondAgentWithVolume("pvc-other", Intent(true, {"node-a"}, 1)));

  agent_->Hold();  // storage-1 hangs on its ListExports
  std::thread pass([&] { reconciler().ResyncAll(); });
  EXPECT_TRUE(WaitFor([&] { return Condition("pvc-other") == "True/Reconciled"; }))
      << "storage-2's repair waited behind storage-1";
  EXPECT_EQ(Condition("pvc-1"), "") << "storage-1 has not answered yet";
  agent_->Release();
  pass.join();
  EXPECT_EQ(Condition("pvc-1"), "True/Reconciled");
}

// Issue 25: a resync passes over a volume whose record, node and agent
// records and listed export are exactly as its last pass verified them, and
// looks again at once when any of them moved.
TEST_F(ReconcilerLoopTest, AResyncPassesOverWhatNothingMovedForAndLooksAgainWhenSomethingDid) {
  RegisterNode("node-a");
  RegisterNode("node-b");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 1));
  CreateVolume(Spec("pvc-2"), Intent(true, {"node-a"}, 1));
  ASSERT_TRUE(reconciler().Start().ok());
  ResyncStats first = reconciler().ResyncAll();
  EXPECT_EQ(first.skipped, 0);
  ASSERT_EQ(Condition("pvc-1"), "True/Reconciled");
  ASSERT_EQ(Condition("pvc-2"), "True/Reconciled");
  // Once the cache holds the records as written, nothing is looked at twice.
  ASSERT_TRUE(WaitFor([&] { return reconciler().ResyncAll().skipped == 2; }));

  // Out of band, pvc-1's ACL gains an intruder: its export is not what was
  // verified, so it is compared and repaired; pvc-2 is still passed over.
  auto edited = *agent_->ExportOf("tank/pvc-1", Protocol::kNvmeofTcp);
  edited.allowed_hosts.push_back(NqnOf("intruder"));
  agent_->SetExport(edited);
  ResyncStats repaired = reconciler().ResyncAll();
  EXPECT_EQ(repaired.skipped, 1);
  EXPECT_EQ(repaired.drifted, 1);
  EXPECT_THAT(AllowedHosts("pvc-1"), ElementsAre(NqnOf("node-a")));

  // A node record moved (one no volume is published to, so no worker looks
  // at the volumes first): the next pass compares every volume again.
  auto node = Get(api::kKindNode, "node-b");
  node.spec["ipAddresses"] = {"10.0.1.2"};
  ASSERT_TRUE(store().Update(node).ok());
  ASSERT_TRUE(WaitFor([&] { return reconciler().ResyncAll().skipped == 0; }))
      << "a pass over a changed node record must compare every volume";
  EXPECT_TRUE(WaitFor([&] { return reconciler().ResyncAll().skipped == 2; }));

  // A new boot epoch of the agent: each volume is applied once again.
  const size_t applies = agent_->Applies().size();
  agent_->SetBootEpoch("epoch-2");
  reconciler().PollEpochs();
  EXPECT_TRUE(WaitFor([&] { return agent_->Applies().size() == applies + 2; }))
      << "both volumes applied once in the new epoch, none passed over";
  EXPECT_TRUE(WaitFor([&] { return reconciler().ResyncAll().skipped == 2; }));
  EXPECT_EQ(agent_->Applies().size(), applies + 2) << "and only once";
}

// Two resyncs of one agent at once (its key re-queued while a worker had
// it, a periodic pass beside an epoch's) apply a new epoch's exports once:
// the second plans only after the first recorded what it applied.
TEST_F(ReconcilerLoopTest, TwoResyncsOfOneAgentAtOnceApplyANewEpochOnce) {
  options_.max_inflight_per_agent = 4;
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 1));
  CreateVolume(Spec("pvc-2"), Intent(true, {"node-a"}, 1));
  reconciler().ResyncAll();
  ASSERT_EQ(Condition("pvc-1"), "True/Reconciled");
  reconciler().PollEpochs();
  const size_t applies = agent_->Applies().size();
  agent_->SetBootEpoch("epoch-2");
  reconciler().PollEpochs();  // no workers: only the two passes below run

  agent_->Hold();
  std::thread first([&] { reconciler().ResyncAgentNow(kAgentRef); });
  ASSERT_TRUE(WaitFor([&] { return agent_->InFlight() == 1; }));
  std::thread second([&] { reconciler().ResyncAgentNow(kAgentRef); });
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(agent_->InFlight(), 1) << "the second pass listed while the first was planning";
  agent_->Release();
  first.join();
  second.join();
  EXPECT_EQ(agent_->Applies().size(), applies + 2) << "each volume applied once in the new epoch";
  EXPECT_EQ(Condition("pvc-1"), "True/Reconciled");
  EXPECT_EQ(Condition("pvc-2"), "True/Reconciled");
}

// Issue 25: pillar_controller_repairs_total counts what a pass put back by
// its cause, and nothing for a new intent (the first export, a publish).
TEST_F(ReconcilerLoopTest, RepairsAreCountedByTheirCause) {
  auto count = [](const char* cause) {
    return ControllerMetrics::Get().repairs.Add({{"cause", cause}}).Value();
  };
  const double oob = count(kCauseOutOfBand);
  const double identity = count(kCauseIdentity);
  const double epoch = count(kCauseEpoch);
  RegisterNode("node-a");
  RegisterNode("node-b");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 1));
  reconciler().PollEpochs();  // as the epoch loop does at start
  ASSERT_TRUE(reconciler().Start().ok());
  reconciler().ResyncAll();
  ASSERT_EQ(Condition("pvc-1"), "True/Reconciled");
  EXPECT_EQ(count(kCauseOutOfBand), oob) << "the first export is an intent, not a repair";

  // A publish to node-b: a new intent.
  auto v = Get(api::kKindVolume, "pvc-1");
  v.status["publishedNodes"].push_back({{"nodeID", "node-b"}, {"revoking", false}});
  v.status["publicationGeneration"] = 2;
  ASSERT_TRUE(store().UpdateStatus(v).ok());
  ASSERT_TRUE(WaitFor([&] { return AllowedHosts("pvc-1").size() == 2; }));
  ASSERT_TRUE(WaitFor([&] { return Condition("pvc-1") == "True/Reconciled"; }));
  EXPECT_EQ(count(kCauseOutOfBand), oob) << "a publish is an intent, not a repair";

  // An entry added out of band. (A worker still busy with the publish may
  // repair it beside the resync's batch, from the same stale listing, and
  // both count: at least one, then.)
  auto edited = *agent_->ExportOf("tank/pvc-1", Protocol::kNvmeofTcp);
  edited.allowed_hosts.push_back(NqnOf("intruder"));
  agent_->SetExport(edited);
  ASSERT_TRUE(WaitFor([&] {
    reconciler().ResyncAll();
    return AllowedHosts("pvc-1").size() == 2;
  }));
  const double after_edit = count(kCauseOutOfBand);
  EXPECT_GE(after_edit, oob + 1);

  // node-b's NQN changes: the record did not move, the agent kept what was
  // verified.
  auto node = Get(api::kKindNode, "node-b");
  node.spec["hostNQN"] = NqnOf("node-b-reinstalled");
  ASSERT_TRUE(store().Update(node).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto hosts = AllowedHosts("pvc-1");
    return std::find(hosts.begin(), hosts.end(), NqnOf("node-b-reinstalled")) != hosts.end();
  }));
  EXPECT_TRUE(WaitFor([&] { return count(kCauseIdentity) == identity + 1; }));

  // The agent restarts empty.
  agent_->WipeExports();
  agent_->SetBootEpoch("epoch-2");
  reconciler().PollEpochs();
  EXPECT_TRUE(WaitFor([&] { return count(kCauseEpoch) == epoch + 1; }));
  EXPECT_EQ(AllowedHosts("pvc-1").size(), 2U);
  EXPECT_EQ(count(kCauseOutOfBand), after_edit) << "a restart is not an out-of-band edit";
  EXPECT_EQ(count(kCauseIdentity), identity + 1);
}

// Issue 28: a down agent is polled every unreachable_poll_interval, so its
// restart is noticed within that of its return, not a whole poll interval.
TEST_F(ReconcilerLoopTest, AnUnreachableAgentIsPolledSoonerUntilItAnswers) {
  options_.epoch_poll_interval = std::chrono::seconds(5);
  options_.unreachable_poll_interval = milliseconds(250);
  EXPECT_FALSE(reconciler().PollEpochs()) << "the agent answers";
  EXPECT_EQ(reconciler().NextEpochPoll(false), std::chrono::seconds(5));
  agent_->FailWith(AgentCall::kGetInfo, Unavailable("agent down"));
  EXPECT_TRUE(reconciler().PollEpochs());
  EXPECT_EQ(reconciler().NextEpochPoll(true), milliseconds(250));
  agent_->ClearFailure(AgentCall::kGetInfo);
  EXPECT_FALSE(reconciler().PollEpochs());
}

TEST_F(ReconcilerLoopTest, EpochLoopNoticesARestartedAgentOnItsOwn) {
  options_.epoch_poll_interval = milliseconds(50);
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {"node-a"}, 1));
  Reconcile("pvc-1");
  reconciler().PollEpochs();
  ASSERT_TRUE(reconciler().Start().ok());

  agent_->WipeExports();
  agent_->SetBootEpoch("epoch-2");
  EXPECT_TRUE(WaitFor([&] { return !AllowedHosts("pvc-1").empty(); }));
  EXPECT_THAT(AllowedHosts("pvc-1"), ElementsAre(NqnOf("node-a")));
  EXPECT_EQ(Condition("pvc-1"), "True/Reconciled");
}

}  // namespace
}  // namespace pillar::controller::testing
