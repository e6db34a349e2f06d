// pillarctl: an operator's view of the recorded intent and the guided repair
// of what the controller refuses to guess. Works on the controller's store.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include "api/convert.h"
#include "api/crd.h"
#include "common/clock.h"
#include "common/validate.h"
#include "common/version.h"
#include "controller/agent_client.h"
#include "controller/desired.h"
#include "ctl/certs.h"
#include "store/open.h"

namespace pillar::ctl {
namespace {

using namespace pillar::controller;  // NOLINT(google-build-using-namespace): CLI glue only

int Fail(const Status& s) {
  std::cerr << "pillarctl: " << s.ToString() << "\n";
  return s.code() == Code::kInvalidArgument ? 2 : 1;
}

std::string Pad(std::string s, size_t n) {
  if (s.size() < n) s.append(n - s.size(), ' ');
  return s + " ";
}

// `get ... --json`: the objects as stored, one JSON array.
int PrintJson(const std::vector<store::Object>& items) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& o : items) arr.push_back(store::ToJson(o));
  std::cout << arr.dump(2) << "\n";
  return 0;
}

std::string ConditionSummary(const api::VolumeStatus& status) {
  const api::Condition* c = api::FindCondition(status.conditions, api::kCondExportReconciled);
  if (!api::IsProvisioned(status)) return "NotProvisioned";
  if (c == nullptr) return "Unknown";
  return c->status + "/" + c->reason;
}

int GetVolumes(store::Store& store, bool json_out) {
  auto list = store.List(api::kKindVolume);
  if (!list.ok()) return Fail(list.status());
  if (json_out) return PrintJson(list->items);
  std::cout << Pad("NAME", 40) << Pad("AGENT", 14) << Pad("PROTOCOL", 11) << Pad("PUBLISHED", 22)
            << "EXPORT\n";
  for (const auto& o : list->items) {
    auto v = api::LoadVolume(o);
    if (!v.ok()) {
      std::cout << Pad(o.name, 40) << "malformed: " << v.status().message() << "\n";
      continue;
    }
    std::string published;
    for (const auto& n : v->status.published_nodes) {
      if (!published.empty()) published += ",";
      published += n.node_id + (n.revoking ? "(revoking)" : "");
    }
    std::cout << Pad(o.name, 40) << Pad(v->spec.agent_ref, 14)
              << Pad(ProtocolName(v->spec.protocol), 11)
              << Pad(published.empty() ? "-" : published, 22) << ConditionSummary(v->status)
              << "\n";
  }
  return 0;
}

std::string OriginOf(const api::VolumeSpec& spec) {
  if (!spec.content_source) return "-";
  const api::ContentSource& c = *spec.content_source;
  std::string from = c.snapshot_id.empty() ? "volume " + c.volume_id : "snapshot " + c.snapshot_id;
  return from + (c.detached ? " (detached copy)" : "");
}

std::string SnapshotSummary(const api::SnapshotStatus& status) {
  if (status.deleting) return "Deleting";
  const api::Condition* c = api::FindCondition(status.conditions, api::kCondSnapshotReady);
  if (c == nullptr) return "Unknown";
  return c->status + "/" + c->reason;
}

int GetSnapshots(store::Store& store, bool json_out) {
  auto list = store.List(api::kKindSnapshot);
  if (!list.ok()) return Fail(list.status());
  if (json_out) return PrintJson(list->items);
  std::cout << Pad("NAME", 40) << Pad("SOURCE", 40) << Pad("AGENT", 14) << Pad("SIZE", 14)
            << "READY\n";
  for (const auto& o : list->items) {
    auto r = api::LoadSnapshot(o);
    if (!r.ok()) {
      std::cout << Pad(o.name, 40) << "malformed: " << r.status().message() << "\n";
      continue;
    }
    std::cout << Pad(o.name, 40) << Pad(r->spec.source_volume_id, 40) << Pad(r->spec.agent_ref, 14)
              << Pad(std::to_string(r->status.size_bytes), 14) << SnapshotSummary(r->status)
              << "\n";
  }
  return 0;
}

int DescribeSnapshot(store::Store& store, const std::string& name, bool json_out) {
  auto o = store.Get(api::kKindSnapshot, name);
  if (!o.ok()) return Fail(o.status());
  if (json_out) {
    std::cout << store::ToJson(*o).dump(2) << "\n";
    return 0;
  }
  auto r = api::LoadSnapshot(*o);
  if (!r.ok()) {
    std::cout << "Name:            " << o->name << "\n"
              << "Malformed:       " << r.status().message() << "\n"
              << store::ToJson(*o).dump(2) << "\n";
    return 1;
  }
  std::cout << "Name:            " << o->name << "\n"
            << "UID:             " << o->uid << "\n"
            << "Agent:           " << r->spec.agent_ref << "\n"
            << "AgentSnapshotID: " << r->spec.agent_snapshot_id << "\n"
            << "Source:          " << r->spec.source_volume_id << " (uid "
            << r->spec.source_volume_uid << ")\n"
            << "VolumeMode:      " << r->spec.volume_mode << "\n"
            << "ReadyToUse:      " << (r->status.ready_to_use ? "true" : "false") << "\n"
            << "SizeBytes:       " << r->status.size_bytes << "\n"
            << "UsedBytes:       " << r->status.used_bytes << "\n"
            << "Backend:         " << r->status.backend << (r->status.detached ? " (detached)" : "")
            << "\n"
            << "Deleting:        " << (r->status.deleting ? "true" : "false") << "\n"
            << "Conditions:\n";
  for (const auto& c : r->status.conditions) {
    std::cout << "  " << c.type << "=" << c.status << " reason=" << c.reason << " since "
              << c.last_transition_time << "\n    " << c.message << "\n";
  }
  // The volumes made from it.
  auto vols = store.List(api::kKindVolume);
  if (vols.ok()) {
    for (const auto& vo : vols->items) {
      auto v = api::LoadVolume(vo);
      if (v.ok() && v->spec.content_source && v->spec.content_source->snapshot_id == name) {
        std::cout << "RestoredInto:    " << vo.name << "\n";
      }
    }
  }
  return 0;
}

int DescribeVolume(store::Store& store, const std::string& name, bool json_out) {
  auto o = store.Get(api::kKindVolume, name);
  if (!o.ok()) return Fail(o.status());
  if (json_out) {
    std::cout << store::ToJson(*o).dump(2) << "\n";
    return 0;
  }
  auto v = api::LoadVolume(*o);
  if (!v.ok()) {
    std::cout << "Name:                  " << o->name << "\n"
              << "Malformed:             " << v.status().message() << "\n"
              << store::ToJson(*o).dump(2) << "\n";
    return 1;
  }
  nlohmann::json published = nlohmann::json::array();
  for (const auto& n : v->status.published_nodes) {
    published.push_back({{"nodeID", n.node_id}, {"revoking", n.revoking}});
  }
  std::cout << "Name:                  " << o->name << "\n"
            << "UID:                   " << o->uid << "\n"
            << "ResourceVersion:       " << o->resource_version << "\n"
            << "Agent:                 " << v->spec.agent_ref << "\n"
            << "AgentVolumeID:         " << v->spec.agent_volume_id << "\n"
            << "Protocol:              " << ProtocolName(v->spec.protocol) << "\n"
            << "Origin:                " << OriginOf(v->spec) << "\n"
            << "ExportSpec:            "
            << (v->status.export_spec ? api::ToJson(*v->status.export_spec).dump() : "<absent>")
            << "\n"
            << "ExportInfo:            "
            << (v->status.export_info ? api::ToJson(*v->status.export_info).dump() : "<absent>")
            << "\n"
            << "PublishedNodes:        " << published.dump() << "\n"
            << "PublicationGeneration: " << v->status.publication_generation << "\n"
            << "Conditions:\n";
  for (const auto& c : v->status.conditions) {
    std::cout << "  " << c.type << "=" << c.status << " reason=" << c.reason << " since "
              << c.last_transition_time << "\n    " << c.message << "\n";
  }
  return 0;
}

// Recorded snapshots against what each agent holds: a recorded snapshot the
// agent lacks (or holds for another lifecycle), and a pillar-marked snapshot
// no record names. Returns how many differ.
int SnapshotDrift(store::Store& store, AgentDirectory& agents) {
  auto list = store.List(api::kKindSnapshot);
  if (!list.ok()) {
    std::cout << "snapshots: cannot list: " << list.status().message() << "\n";
    return 1;
  }
  std::map<std::string, std::vector<api::SnapshotRecord>> by_agent;
  int drifted = 0;
  for (const auto& o : list->items) {
    auto r = api::LoadSnapshot(o);
    if (!r.ok()) {
      std::cout << "snapshot " << o.name << ": recorded state malformed: " << r.status().message()
                << "\n";
      ++drifted;
      continue;
    }
    by_agent[r->spec.agent_ref].push_back(*r);
  }
  // Agents with no recorded snapshot may still hold orphans.
  auto agent_list = store.List(api::kKindAgent);
  if (agent_list.ok()) {
    for (const auto& a : agent_list->items) by_agent[a.name];
  }
  for (const auto& [agent_ref, records] : by_agent) {
    auto agent_obj = store.Get(api::kKindAgent, agent_ref);
    auto rec = agent_obj.ok() ? api::LoadAgent(*agent_obj)
                              : StatusOr<api::AgentRecord>(agent_obj.status());
    auto client = rec.ok()
                      ? agents.Client(agent_ref, {rec->address, rec->port, rec->tls_server_name})
                      : StatusOr<std::shared_ptr<AgentClient>>(rec.status());
    auto held = client.ok() ? (*client)->ListSnapshots("")
                            : StatusOr<std::vector<agent_api::Snapshot>>(client.status());
    if (!held.ok()) {
      if (records.empty()) continue;
      std::cout << "agent " << agent_ref << ": cannot list snapshots: " << held.status().message()
                << "\n";
      ++drifted;
      continue;
    }
    std::map<std::string, const agent_api::Snapshot*> by_id;
    for (const auto& s : *held) by_id[s.agent_snapshot_id] = &s;
    std::set<std::string> recorded;
    for (const auto& r : records) {
      recorded.insert(r.spec.agent_snapshot_id);
      auto it = by_id.find(r.spec.agent_snapshot_id);
      if (r.status.deleting) {
        std::cout << "snapshot " << r.meta.name << ": being deleted"
                  << (it == by_id.end() ? "" : " (the agent still lists it)") << "\n";
        continue;
      }
      if (it == by_id.end()) {
        std::cout << "snapshot " << r.meta.name << ": DRIFT\n  - agent " << agent_ref
                  << " has no snapshot " << r.spec.agent_snapshot_id << "\n";
        ++drifted;
      } else if (it->second->owner_uid != r.meta.uid) {
        std::cout << "snapshot " << r.meta.name << ": DRIFT\n  - " << r.spec.agent_snapshot_id
                  << " is marked for lifecycle " << it->second->owner_uid << ", not " << r.meta.uid
                  << "\n";
        ++drifted;
      } else {
        std::cout << "snapshot " << r.meta.name << ": in sync (" << it->second->size_bytes
                  << " bytes)\n";
      }
    }
    for (const auto& s : *held) {
      if (recorded.count(s.agent_snapshot_id) == 0 && !s.owner_uid.empty()) {
        std::cout << "agent " << agent_ref << ": DRIFT\n  - snapshot " << s.agent_snapshot_id
                  << " (lifecycle " << s.owner_uid << ") has no PillarSnapshot\n";
        ++drifted;
      }
    }
  }
  return drifted;
}

int Drift(store::Store& store, AgentDirectory& agents, const std::string& only) {
  auto list = store.List(api::kKindVolume);
  if (!list.ok()) return Fail(list.status());
  int drifted = 0;
  for (const auto& o : list->items) {
    if (!only.empty() && o.name != only) continue;
    auto loaded = api::LoadVolume(o);
    if (!loaded.ok()) {
      std::cout << o.name << ": recorded state malformed: " << loaded.status().message() << "\n";
      ++drifted;
      continue;
    }
    const api::VolumeState& v = *loaded;
    auto desired = ComputeDesired(v, [&](const std::string& id) -> const api::NodeRecord* {
      static thread_local std::map<std::string, api::NodeRecord> cache;
      auto n = store.Get(api::kKindNode, id);
      if (!n.ok()) return nullptr;
      auto rec = api::LoadNode(*n);
      if (!rec.ok()) return nullptr;
      return &(cache[id] = *rec);
    });
    if (!desired.ok()) {
      std::cout << o.name << ": cannot compute desired state: " << desired.status().message()
                << "\n";
      ++drifted;
      continue;
    }
    auto agent_obj = store.Get(api::kKindAgent, v.spec.agent_ref);
    if (!agent_obj.ok()) {
      std::cout << o.name << ": agent " << v.spec.agent_ref << " not registered\n";
      ++drifted;
      continue;
    }
    auto rec = api::LoadAgent(*agent_obj);
    if (!rec.ok()) return Fail(rec.status());
    auto client = agents.Client(v.spec.agent_ref, {rec->address, rec->port, rec->tls_server_name});
    if (!client.ok()) return Fail(client.status());
    auto got = (*client)->GetExport(v.spec.agent_volume_id, desired->protocol);
    if (!got.ok() && got.status().code() != Code::kNotFound) {
      std::cout << o.name << ": cannot observe: " << got.status().message() << "\n";
      ++drifted;
      continue;
    }
    auto diff = Diff(*desired, got.ok() ? &*got : nullptr);
    if (diff.empty()) {
      std::cout << o.name << ": in sync (" << desired->hosts.size() << " ACL entries)\n";
    } else {
      ++drifted;
      std::cout << o.name << ": DRIFT\n";
      for (const auto& d : diff) std::cout << "  - " << d << "\n";
    }
  }
  if (only.empty()) drifted += SnapshotDrift(store, agents);
  return drifted == 0 ? 0 : 3;
}

struct RepairArgs {
  std::string volume;
  std::string bind_address;
  std::string port;
  std::string acl_enabled;
  std::string expect_uid;
  std::string expect_resource_version;
  std::string backup_dir;
  int timeout_seconds = 60;
};

// The seed-001 procedure: one snapshot, verified; explicit values only; a
// write of status.exportSpec alone, pinned to the snapshot's uid and
// resourceVersion; then wait for Reconciled.
int RepairExportSpec(store::Store& store, const RepairArgs& a) {
  if (Status s = validate::IpAddress("--bind-address", a.bind_address); !s.ok()) return Fail(s);
  if (a.port.empty() || a.port.size() > 5 ||
      a.port.find_first_not_of("0123456789") != std::string::npos || std::stoll(a.port) > 65535) {
    return Fail(InvalidArgument("--port \"" + a.port + "\" must be an integer 0-65535"));
  }
  if (a.acl_enabled != "true" && a.acl_enabled != "false") {
    return Fail(InvalidArgument("--acl-enabled must be exactly true or false"));
  }
  auto snap = store.Get(api::kKindVolume, a.volume);
  if (!snap.ok()) return Fail(snap.status());
  const store::Object obj = *snap;
  auto refuse = [&](const std::string& why) {
    return Fail(FailedPrecondition("volume " + a.volume + ": " + why +
                                   "; nothing was written. Leave the volume at "
                                   "ExportSpecMissing until this is resolved"));
  };
  if (!a.expect_uid.empty() && obj.uid != a.expect_uid) {
    return refuse("uid is " + obj.uid + ", not the expected " + a.expect_uid);
  }
  if (!a.expect_resource_version.empty() && obj.resource_version != a.expect_resource_version) {
    return refuse("resourceVersion is " + obj.resource_version + ", not the expected " +
                  a.expect_resource_version);
  }
  auto v = api::LoadVolume(obj);
  if (!v.ok()) return refuse("its record is malformed (" + v.status().message() + ")");
  if (v->spec.volume_id != obj.name) {
    return refuse("spec.volumeID \"" + v->spec.volume_id + "\" does not name it");
  }
  if (v->status.export_spec) {
    return refuse("status.exportSpec is already recorded; this procedure only fills an absent one");
  }
  if (obj.deletion_timestamp || v->status.deleting) return refuse("it is being deleted");
  if (ConditionSummary(v->status) != std::string("False/") + api::kReasonExportSpecMissing) {
    return refuse("ExportReconciled is " + ConditionSummary(v->status) +
                  ", not False/ExportSpecMissing: fix that fault instead");
  }
  const std::string& agent_ref = v->spec.agent_ref;
  auto agent = store.Get(api::kKindAgent, agent_ref);
  if (!agent.ok()) return refuse("its agent " + agent_ref + " is not registered");
  auto rec = api::LoadAgent(*agent);
  const api::Condition* connected =
      rec.ok() ? api::FindCondition(rec->conditions, api::kCondAgentConnected) : nullptr;
  if (connected == nullptr || connected->status != "True") {
    return refuse("agent " + agent_ref + " is not AgentConnected=True");
  }

  std::string dir = a.backup_dir.empty() ? "pvs-recovery-" + a.volume : a.backup_dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::ofstream backup(dir + "/pvst-backup.json");
  backup << store::ToJson(obj).dump(2) << "\n";
  if (!backup.good()) return Fail(Internal("cannot write backup to " + dir));
  backup.close();

  store::Object next = obj;  // uid and resourceVersion pin the write to the snapshot
  // Only exportSpec is written; every other status field stays as it was.
  const api::ExportSpec spec{a.bind_address, std::stoll(a.port), a.acl_enabled == "true",
                             std::nullopt};
  api::SetStoredExportSpec(next.status, spec);
  auto written = store.UpdateStatus(next);
  if (!written.ok()) {
    if (written.status().code() == Code::kAborted) {
      return refuse("it changed after the snapshot (" + written.status().message() +
                    "); read it again and restart the procedure");
    }
    return Fail(written.status());
  }
  std::cout << "recorded status.exportSpec " << api::ToJson(spec).dump() << " on " << a.volume
            << " (uid " << obj.uid << ", resourceVersion " << obj.resource_version << " -> "
            << written->resource_version << "); backup in " << dir << "/pvst-backup.json\n";

  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.timeout_seconds);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    auto now = store.Get(api::kKindVolume, a.volume);
    auto loaded = now.ok() ? api::LoadVolume(*now) : StatusOr<api::VolumeState>(now.status());
    if (loaded.ok()) {
      last = ConditionSummary(loaded->status);
      if (last == std::string("True/") + api::kReasonReconciled) {
        std::cout << "ExportReconciled=True reason=Reconciled\n";
        return 0;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  std::cerr << "pillarctl: not reconciled within " << a.timeout_seconds << " s (last: " << last
            << "); the controller keeps retrying from the record; do not patch again\n";
  return 4;
}

int PrintCrds(const std::string& dir) {
  bool first = true;
  for (const auto& crd : api::CustomResourceDefinitions()) {
    std::string yaml = api::CrdYaml(crd);
    if (dir.empty()) {
      std::cout << (first ? "" : "---\n") << yaml;
      first = false;
      continue;
    }
    std::string path = dir + "/" + crd["metadata"]["name"].get<std::string>() + ".yaml";
    std::ofstream out(path);
    out << yaml;
    if (!out.good()) return Fail(Internal("cannot write " + path));
    std::cout << path << "\n";
  }
  return 0;
}

int Run(int argc, char** argv) {
  CLI::App app{"pillarctl: inspect and repair pillar's recorded intent"};
  app.set_version_flag("--version", "pillarctl " + std::string(pillar::Version()));
  app.require_subcommand(1);
  std::string store_path = "/var/lib/pillar-csi/controller/store.db";
  bool json_out = false;
  AgentTlsConfig tls;
  std::string kubeconfig;
  app.add_option("--store", store_path,
                 "the controller's store: sqlite:PATH, PATH, kube (in-cluster) or kube:KUBECONFIG");
  app.add_option("--kubeconfig", kubeconfig, "the Kubernetes store of this kubeconfig")
      ->excludes("--store");
  app.add_flag("-j,--json", json_out, "JSON output");
  app.add_option("--agent-tls-cert", tls.files.cert, "client certificate for agents (drift)");
  app.add_option("--agent-tls-key", tls.files.key, "client key for agents (drift)");
  app.add_option("--agent-tls-ca", tls.files.ca, "CA of the agents (drift)");
  app.add_flag("--agent-insecure", tls.insecure, "talk to agents without TLS (demos)");

  auto* get = app.add_subcommand("get", "list objects");
  get->require_subcommand(1);
  get->add_subcommand("volumes", "list PillarVolumeStates");
  get->add_subcommand("snapshots", "list PillarSnapshots");
  auto* describe = app.add_subcommand("describe", "show one object");
  std::string describe_name;
  auto* describe_volume = describe->add_subcommand("volume", "one PillarVolumeState");
  describe_volume->add_option("NAME", describe_name)->required();
  auto* describe_snapshot = describe->add_subcommand("snapshot", "one PillarSnapshot");
  describe_snapshot->add_option("NAME", describe_name)->required();
  describe->require_subcommand(1);
  auto* drift = app.add_subcommand(
      "drift", "desired vs actual export per volume, and recorded vs held snapshots");
  std::string drift_name;
  drift->add_option("VOLUME", drift_name, "only this volume");
  auto* repair = app.add_subcommand("repair", "guided repairs");
  repair->require_subcommand(1);
  auto* repair_spec = repair->add_subcommand(
      "export-spec", "record a missing status.exportSpec (runbook: ExportSpecMissing)");
  RepairArgs ra;
  repair_spec->add_option("VOLUME", ra.volume)->required();
  repair_spec->add_option("--bind-address", ra.bind_address, "decided bind address")->required();
  repair_spec->add_option("--port", ra.port, "decided port")->required();
  repair_spec->add_option("--acl-enabled", ra.acl_enabled, "true or false, decided")->required();
  repair_spec->add_option("--expect-uid", ra.expect_uid, "refuse unless the uid is this");
  repair_spec->add_option("--expect-resource-version", ra.expect_resource_version,
                          "refuse unless the resourceVersion is this");
  repair_spec->add_option("--backup-dir", ra.backup_dir, "where the snapshot is saved");
  repair_spec->add_option("--timeout", ra.timeout_seconds, "seconds to wait for Reconciled");
  auto* crds = app.add_subcommand("crds", "print the CustomResourceDefinitions (YAML)");
  std::string crd_dir;
  crds->add_option("--dir", crd_dir, "write one <name>.yaml per CRD into this directory");
  auto* certs = app.add_subcommand("certs", "issue a CA and per-role certificates (mutual TLS)");
  certs->require_subcommand(1);
  std::string ca_out, ca_cn = "pillar-csi-ca";
  int ca_days = 3650;
  auto* certs_ca = certs->add_subcommand("ca", "a new CA: OUT/ca.crt, OUT/ca.key");
  certs_ca->add_option("--out", ca_out, "directory to write into")->required();
  certs_ca->add_option("--cn", ca_cn, "the CA's common name");
  certs_ca->add_option("--days", ca_days, "validity in days (1-3650)");
  std::string role_name, ca_dir, leaf_out;
  LeafRequest leaf;
  auto* certs_issue = certs->add_subcommand(
      "issue", "a certificate for one role: OUT/tls.crt, OUT/tls.key, OUT/ca.crt");
  certs_issue->add_option("--role", role_name, "controller, agent, node or operator")
      ->required()
      ->check(CLI::IsMember({"controller", "agent", "node", "operator"}));
  certs_issue->add_option("--name", leaf.name, "node ID for a node, else any name")->required();
  certs_issue->add_option("--ca", ca_dir, "directory of ca.crt and ca.key")->required();
  certs_issue->add_option("--out", leaf_out, "directory to write into")->required();
  certs_issue->add_option("--dns", leaf.dns_names, "a DNS name the server answers as");
  certs_issue->add_option("--ip", leaf.ip_addresses, "an IP address the server answers on");
  certs_issue->add_option("--days", leaf.days, "validity in days (1-3650)");
  CLI11_PARSE(app, argc, argv);

  if (crds->parsed()) return PrintCrds(crd_dir);
  if (Status s = RequireTls13(); !s.ok()) return Fail(s);
  if (certs_ca->parsed()) {
    Status s = IssueCa(ca_out, ca_cn, ca_days);
    if (!s.ok()) return Fail(s);
    std::cout << "CA written to " << ca_out << "/ca.crt and ca.key (keep ca.key offline)\n";
    return 0;
  }
  if (certs_issue->parsed()) {
    auto uri = ParseIdentityUri(std::string(kIdentityScheme) + role_name + "/" + leaf.name);
    if (!uri.ok()) return Fail(uri.status());
    leaf.role = uri->role;
    Status s = IssueLeaf(ca_dir, leaf_out, leaf);
    if (!s.ok()) return Fail(s);
    std::cout << uri->Uri() << " written to " << leaf_out << "/tls.crt, tls.key, ca.crt\n";
    return 0;
  }
  if (!kubeconfig.empty()) store_path = "kube:" + kubeconfig;
  auto where = store::ParseStoreUri(store_path);
  if (!where.ok()) return Fail(where.status());
  // pillarctl never creates a store: a missing SQLite file is an error.
  if (where->backend == store::StoreUri::Backend::kSqlite &&
      access(where->path.c_str(), R_OK) != 0) {
    return Fail(NotFound("store " + where->path + " cannot be read"));
  }
  auto opened = store::OpenStore(*where);
  if (!opened.ok()) return Fail(opened.status());
  store::Store& store = **opened;
  if (get->got_subcommand("volumes")) return GetVolumes(store, json_out);
  if (get->got_subcommand("snapshots")) return GetSnapshots(store, json_out);
  if (describe_volume->parsed()) return DescribeVolume(store, describe_name, json_out);
  if (describe_snapshot->parsed()) return DescribeSnapshot(store, describe_name, json_out);
  if (drift->parsed()) {
    if (tls.insecure) std::cerr << "pillarctl: INSECURE: agents are called without TLS\n";
    GrpcAgentDirectory agents(tls);
    return Drift(store, agents, drift_name);
  }
  if (repair_spec->parsed()) return RepairExportSpec(store, ra);
  return Fail(InvalidArgument("unknown command"));
}

}  // namespace
}  // namespace pillar::ctl

int main(int argc, char** argv) { return pillar::ctl::Run(argc, argv); }
