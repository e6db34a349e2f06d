#include "controller/desired.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "common/target_name.h"
#include "common/validate.h"

namespace pillar::controller {

namespace {

// Targets report addresses in canonical form ("fd00::1"), records may hold
// any spelling ("fd00:0::1"): compare the addresses, not the strings.
bool SameAddress(const std::string& a, const std::string& b) {
  if (a == b) return true;
  unsigned char x[16] = {}, y[16] = {};
  for (int family : {AF_INET, AF_INET6}) {
    if (inet_pton(family, a.c_str(), x) == 1 && inet_pton(family, b.c_str(), y) == 1) {
      return std::memcmp(x, y, sizeof(x)) == 0;
    }
  }
  return false;
}

// Volumes recorded without nfsRootSquash get the safe default.
bool RootSquash(const api::ExportSpec& spec) { return spec.nfs_root_squash.value_or(true); }

}  // namespace

StatusOr<DesiredExport> ComputeDesired(const api::VolumeState& volume, const NodeLookup& nodes) {
  if (!volume.status.export_spec) {
    return FailedPrecondition("volume " + volume.meta.name +
                              " has no status.exportSpec; refusing to guess one");
  }
  DesiredExport want;
  want.protocol = volume.spec.protocol;
  want.spec = *volume.status.export_spec;
  if (want.spec.port == 0) want.spec.port = DefaultPort(want.protocol);
  if (!want.spec.acl_enabled) return want;

  std::set<std::string> hosts;
  for (const auto& pub : volume.status.published_nodes) {
    if (pub.revoking) continue;
    const api::NodeRecord* node = nodes(pub.node_id);
    if (node == nullptr) {
      return FailedPrecondition("published node " + pub.node_id + " of volume " + volume.meta.name +
                                " has no PillarNode record");
    }
    switch (want.protocol) {
      case Protocol::kNvmeofTcp:
        if (node->host_nqn.empty()) {
          return FailedPrecondition("published node " + pub.node_id +
                                    " has no registered host NQN");
        }
        hosts.insert(node->host_nqn);
        break;
      case Protocol::kIscsi:
        if (node->initiator_iqn.empty()) {
          return FailedPrecondition("published node " + pub.node_id +
                                    " has no registered initiator IQN");
        }
        hosts.insert(node->initiator_iqn);
        break;
      case Protocol::kNfs:
        if (node->ip_addresses.empty()) {
          return FailedPrecondition("published node " + pub.node_id +
                                    " has no registered IP address");
        }
        hosts.insert(node->ip_addresses.begin(), node->ip_addresses.end());
        break;
    }
  }
  want.hosts.assign(hosts.begin(), hosts.end());
  return want;
}

std::vector<std::string> Diff(const DesiredExport& want, const agent_api::Export* actual) {
  std::vector<std::string> out;
  if (actual == nullptr) {
    out.push_back("export is missing on the agent");
    return out;
  }
  const auto& spec = actual->spec;
  if (!SameAddress(spec.bind_address, want.spec.bind_address)) {
    out.push_back("bindAddress is " + spec.bind_address + ", want " + want.spec.bind_address);
  }
  if (spec.port != want.spec.port) {
    out.push_back("port is " + std::to_string(spec.port) + ", want " +
                  std::to_string(want.spec.port));
  }
  if (spec.acl_enabled != want.spec.acl_enabled) {
    out.push_back(std::string("aclEnabled is ") + (spec.acl_enabled ? "true" : "false") +
                  ", want " + (want.spec.acl_enabled ? "true" : "false"));
  }
  if (want.spec.in_capsule_data_size &&
      spec.in_capsule_data_size != *want.spec.in_capsule_data_size) {
    out.push_back("inCapsuleDataSize is " + std::to_string(spec.in_capsule_data_size) + ", want " +
                  std::to_string(*want.spec.in_capsule_data_size));
  }
  if (!actual->enabled) out.push_back("export is disabled");
  // Authentication and squashing are properties of the admitted hosts: with
  // nobody admitted there is nothing to compare.
  bool admits = !spec.acl_enabled || !actual->allowed_hosts.empty();
  if (admits && want.spec.auth == kAuthChap) {
    if (spec.auth != kAuthChap) {
      out.push_back("auth is " + (spec.auth.empty() ? std::string(kAuthNone) : spec.auth) +
                    ", want chap");
    } else if (spec.auth_digest != want.spec.auth_digest) {
      out.push_back("the hosts' credentials differ from the recorded authDigest");
    }
  }
  if (admits && want.protocol == Protocol::kIscsi && want.spec.auth != kAuthChap &&
      spec.auth == kAuthChap) {
    out.push_back("auth is chap, want none");  // initiators without CHAP are refused
  }
  if (admits && want.protocol == Protocol::kNfs &&
      spec.nfs_no_root_squash == RootSquash(want.spec)) {
    out.push_back(std::string("nfsRootSquash is ") + (RootSquash(want.spec) ? "false" : "true") +
                  ", want " + (RootSquash(want.spec) ? "true" : "false"));
  }
  if (want.spec.acl_enabled) {
    std::set<std::string> have(actual->allowed_hosts.begin(), actual->allowed_hosts.end());
    std::set<std::string> need(want.hosts.begin(), want.hosts.end());
    for (const auto& h : need) {
      if (have.count(h) == 0) out.push_back("missing ACL entry " + h);
    }
    for (const auto& h : have) {
      if (need.count(h) == 0) out.push_back("unexpected ACL entry " + h);
    }
  }
  return out;
}

bool FenceBehind(const api::VolumeState& volume, const agent_api::Export* actual) {
  return actual == nullptr || !actual->fence || actual->fence->volume_uid != volume.meta.uid ||
         actual->fence->publication_generation < volume.status.publication_generation;
}

const char* ReasonForAgentError(const Status& s) {
  if (s.code() == Code::kAborted) return api::kReasonStaleGeneration;
  if (s.code() == Code::kUnavailable || s.code() == Code::kDeadlineExceeded) {
    return api::kReasonAgentUnavailable;
  }
  return api::kReasonReconcileFailed;
}

agent_api::ApplyExportRequest MakeApplyRequest(const api::VolumeState& volume,
                                               const DesiredExport& want,
                                               const Credentials* credentials) {
  agent_api::ApplyExportRequest req;
  req.agent_volume_id = volume.spec.agent_volume_id;
  req.protocol = want.protocol;
  req.spec.bind_address = want.spec.bind_address;
  req.spec.port = static_cast<int32_t>(want.spec.port);
  req.spec.acl_enabled = want.spec.acl_enabled;
  if (want.spec.in_capsule_data_size) {
    req.spec.in_capsule_data_size = static_cast<int32_t>(*want.spec.in_capsule_data_size);
  }
  if (want.spec.auth == kAuthChap) {
    req.spec.auth = kAuthChap;
    req.spec.auth_digest = want.spec.auth_digest;
  }
  if (want.protocol == Protocol::kNfs) req.spec.nfs_no_root_squash = !RootSquash(want.spec);
  if (credentials != nullptr) req.credentials = *credentials;
  req.fence = {volume.meta.uid, volume.status.publication_generation};
  req.allowed_hosts = want.hosts;
  return req;
}

StatusOr<std::string> TargetIdFor(const api::VolumeState& volume, const api::AgentRecord& agent,
                                  const std::string& reported) {
  std::string expected;
  switch (volume.spec.protocol) {
    case Protocol::kNvmeofTcp:
      expected = TargetName(agent.nqn_prefix.empty() ? kDefaultNqnPrefix : agent.nqn_prefix,
                            volume.spec.agent_volume_id);
      break;
    case Protocol::kIscsi:
      expected = TargetName(agent.iqn_prefix.empty() ? kDefaultIqnPrefix : agent.iqn_prefix,
                            volume.spec.agent_volume_id);
      break;
    case Protocol::kNfs: {
      Status path =
          validate::ExportPath("the export path agent " + agent.meta.name + " reports", reported);
      if (!path.ok()) return FailedPrecondition(path.message() + "; not taken");
      return reported;
    }
  }
  if (reported != expected) {
    return FailedPrecondition("agent " + agent.meta.name + " reports target " + reported +
                              " for volume " + volume.meta.name + ", which pillar names " +
                              expected + "; its claim is not taken (set spec.nqnPrefix / " +
                              "spec.iqnPrefix of PillarAgent " + agent.meta.name +
                              " if the agent runs with another prefix)");
  }
  return expected;
}

bool NothingOfThisLifecycleLeft(const Status& deleted, bool provisioned) {
  if (deleted.code() == Code::kNotFound) return true;
  return !provisioned &&
         (deleted.code() == Code::kFailedPrecondition || deleted.code() == Code::kAborted);
}

}  // namespace pillar::controller
