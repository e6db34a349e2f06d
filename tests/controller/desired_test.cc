// The reconciler's desired-state rules, on recorded intent alone.
#include "controller/desired.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "controller/csi_controller.h"

namespace pillar::controller {
namespace {

using ::testing::HasSubstr;

api::VolumeState Volume(Protocol protocol, bool acl) {
  api::VolumeState v;
  v.meta.name = "pvc-1";
  v.meta.uid = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f";
  v.spec.protocol = protocol;
  v.spec.agent_volume_id = "tank/pvc-1";
  v.status.export_spec = api::ExportSpec{"10.0.0.5", 0, acl, std::nullopt};
  v.status.publication_generation = 7;
  return v;
}

struct Nodes {
  std::map<std::string, api::NodeRecord> records;
  NodeLookup Lookup() {
    return [this](const std::string& id) -> const api::NodeRecord* {
      auto it = records.find(id);
      return it == records.end() ? nullptr : &it->second;
    };
  }
  void Add(const std::string& id, const std::string& nqn, std::vector<std::string> ips) {
    api::NodeRecord n;
    n.node_id = id;
    n.host_nqn = nqn;
    n.ip_addresses = std::move(ips);
    records[id] = n;
  }
};

TEST(DesiredTest, AclIsPublishedNonRevokingNodesThroughCurrentRecords) {
  Nodes nodes;
  nodes.Add("a", "nqn.2014-08.org.x:a", {"10.0.0.11"});
  nodes.Add("b", "nqn.2014-08.org.x:b", {"10.0.0.12", "fd00::12"});
  nodes.Add("c", "nqn.2014-08.org.x:c", {"10.0.0.13"});
  auto v = Volume(Protocol::kNvmeofTcp, true);
  v.status.published_nodes = {{"a", false}, {"b", false}, {"c", true}};
  auto d = ComputeDesired(v, nodes.Lookup());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->protocol, Protocol::kNvmeofTcp);
  EXPECT_EQ(d->spec.port, 4420) << "0 means the protocol default";
  EXPECT_EQ(d->hosts, (std::vector<std::string>{"nqn.2014-08.org.x:a", "nqn.2014-08.org.x:b"}));

  v.spec.protocol = Protocol::kNfs;
  d = ComputeDesired(v, nodes.Lookup());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->spec.port, 2049);
  EXPECT_EQ(d->hosts, (std::vector<std::string>{"10.0.0.11", "10.0.0.12", "fd00::12"}));

  // The record is what counts: a re-IP'd node's new address is the desired one.
  nodes.Add("a", "nqn.2014-08.org.x:a", {"10.0.0.21"});
  d = ComputeDesired(v, nodes.Lookup());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->hosts.front(), "10.0.0.12");
  EXPECT_EQ(std::count(d->hosts.begin(), d->hosts.end(), "10.0.0.21"), 1);
  EXPECT_EQ(std::count(d->hosts.begin(), d->hosts.end(), "10.0.0.11"), 0);
}

TEST(DesiredTest, RefusesToGuess) {
  Nodes nodes;
  auto v = Volume(Protocol::kNvmeofTcp, true);
  v.status.export_spec.reset();
  EXPECT_EQ(ComputeDesired(v, nodes.Lookup()).status().code(), Code::kFailedPrecondition);
  // An unresolvable published node makes the whole ACL unknowable: applying
  // the rest would drop that node's entry.
  v = Volume(Protocol::kNvmeofTcp, true);
  v.status.published_nodes = {{"ghost", false}};
  auto d = ComputeDesired(v, nodes.Lookup());
  EXPECT_EQ(d.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("ghost"), std::string::npos);
  nodes.Add("noid", "", {"10.0.0.1"});
  v.status.published_nodes = {{"noid", false}};
  EXPECT_NE(ComputeDesired(v, nodes.Lookup()).status().message().find("host NQN"),
            std::string::npos);
  // ACL off admits everyone by intent and needs no identity.
  v = Volume(Protocol::kNvmeofTcp, false);
  v.status.published_nodes = {{"ghost", false}};
  d = ComputeDesired(v, nodes.Lookup());
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->hosts.empty());
}

TEST(DesiredTest, DiffNamesEveryDifference) {
  DesiredExport want;
  want.protocol = Protocol::kNvmeofTcp;
  want.spec = {"fd00::5", 4420, true, std::nullopt};
  want.hosts = {"nqn.2014-08.org.x:a", "nqn.2014-08.org.x:b"};
  EXPECT_EQ(Diff(want, nullptr), std::vector<std::string>{"export is missing on the agent"});
  agent_api::Export actual;
  actual.spec.bind_address = "fd00:0:0::5";  // same address, other spelling
  actual.spec.port = 4420;
  actual.spec.acl_enabled = true;
  actual.spec.in_capsule_data_size = 8192;  // not asked for: not compared
  actual.enabled = true;
  actual.allowed_hosts.push_back("nqn.2014-08.org.x:a");
  actual.allowed_hosts.push_back("nqn.2014-08.org.x:b");
  EXPECT_TRUE(Diff(want, &actual).empty());
  actual.allowed_hosts.clear();
  actual.allowed_hosts.push_back("nqn.2014-08.org.x:a");
  actual.allowed_hosts.push_back("nqn.2014-08.org.x:stale");
  auto d = Diff(want, &actual);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], "missing ACL entry nqn.2014-08.org.x:b");
  EXPECT_EQ(d[1], "unexpected ACL entry nqn.2014-08.org.x:stale");
  actual.spec.port = 4421;
  actual.enabled = false;
  EXPECT_EQ(Diff(want, &actual).size(), 4u);
}

// Diff one field at a time: a Diff that is silent about any single field
// lets a drifted export pass as Reconciled.
class ReconcilerDiffTest : public ::testing::Test {
 protected:
  static DesiredExport Want(bool acl = true) {
    DesiredExport want;
    want.protocol = Protocol::kNvmeofTcp;
    want.spec = {"fd00::5", 4420, acl, 16384};
    if (acl) want.hosts = {"nqn.2014-08.org.x:a", "nqn.2014-08.org.x:b"};
    return want;
  }
  // What an agent holding exactly `want` reports.
  static agent_api::Export Have(const DesiredExport& want) {
    agent_api::Export e;
    e.spec.bind_address = want.spec.bind_address;
    e.spec.port = static_cast<int32_t>(want.spec.port);
    e.spec.acl_enabled = want.spec.acl_enabled;
    e.spec.in_capsule_data_size = static_cast<int32_t>(want.spec.in_capsule_data_size.value_or(0));
    e.enabled = true;
    for (const auto& h : want.hosts) e.allowed_hosts.push_back(h);
    return e;
  }
  using Lines = std::vector<std::string>;
};

TEST_F(ReconcilerDiffTest, ExactIntentHasNoDifference) {
  EXPECT_EQ(Diff(Want(), nullptr), Lines{"export is missing on the agent"});
  auto have = Have(Want());
  EXPECT_EQ(Diff(Want(), &have), Lines{});
  have = Have(Want(false));
  EXPECT_EQ(Diff(Want(false), &have), Lines{});
}

TEST_F(ReconcilerDiffTest, BindAddressIsComparedAsAnAddress) {
  auto have = Have(Want());
  for (const char* same : {"fd00:0:0:0:0:0:0:5", "fd00:0::5", "FD00::5"}) {
    have.spec.bind_address = same;
    EXPECT_EQ(Diff(Want(), &have), Lines{}) << same;
  }
  have.spec.bind_address = "fd00::6";
  EXPECT_EQ(Diff(Want(), &have), Lines{"bindAddress is fd00::6, want fd00::5"});
  have.spec.bind_address = "10.0.0.5";
  EXPECT_EQ(Diff(Want(), &have).size(), 1u);
  auto v4 = Want();
  v4.spec.bind_address = "10.0.0.5";
  have.spec.bind_address = "10.0.0.6";
  EXPECT_EQ(Diff(v4, &have), Lines{"bindAddress is 10.0.0.6, want 10.0.0.5"});
}

TEST_F(ReconcilerDiffTest, PortIncludingTheProtocolDefaultForZero) {
  auto have = Have(Want());
  have.spec.port = 4421;
  EXPECT_EQ(Diff(Want(), &have), Lines{"port is 4421, want 4420"});

  // A recorded port of 0 means the protocol's default, which is what targets report.
  api::VolumeState v;
  v.meta.name = "pvc-1";
  v.status.export_spec = api::ExportSpec{"10.0.0.5", 0, false, std::nullopt};
  const std::map<Protocol, int> defaults = {
      {Protocol::kNvmeofTcp, 4420}, {Protocol::kIscsi, 3260}, {Protocol::kNfs, 2049}};
  for (const auto& [protocol, port] : defaults) {
    v.spec.protocol = protocol;
    auto want = ComputeDesired(v, [](const std::string&) { return nullptr; });
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(want->spec.port, port);
    auto at_default = Have(*want);
    EXPECT_EQ(Diff(*want, &at_default), Lines{}) << ProtocolName(protocol);
    at_default.spec.port = 0;
    EXPECT_EQ(Diff(*want, &at_default), Lines{"port is 0, want " + std::to_string(port)});
  }
}

TEST_F(ReconcilerDiffTest, AclEnabledMismatchEitherWay) {
  // Same entries, but the target admits any host: wider than the intent.
  auto have = Have(Want());
  have.spec.acl_enabled = false;
  EXPECT_EQ(Diff(Want(), &have), Lines{"aclEnabled is false, want true"});
  have = Have(Want(false));
  have.spec.acl_enabled = true;
  EXPECT_EQ(Diff(Want(false), &have), Lines{"aclEnabled is true, want false"});
}

TEST_F(ReconcilerDiffTest, InCapsuleDataSizeIsComparedOnlyWhenRecorded) {
  auto have = Have(Want());
  have.spec.in_capsule_data_size = 8192;
  EXPECT_EQ(Diff(Want(), &have), Lines{"inCapsuleDataSize is 8192, want 16384"});
  auto unrecorded = Want();
  unrecorded.spec.in_capsule_data_size.reset();
  EXPECT_EQ(Diff(unrecorded, &have), Lines{}) << "not recorded: whatever the port has";
}

TEST_F(ReconcilerDiffTest, DisabledExportDiffers) {
  auto have = Have(Want());
  have.enabled = false;
  EXPECT_EQ(Diff(Want(), &have), Lines{"export is disabled"});
}

TEST_F(ReconcilerDiffTest, MissingAndUnexpectedAclEntries) {
  auto have = Have(Want());
  have.allowed_hosts.clear();
  have.allowed_hosts.push_back("nqn.2014-08.org.x:a");
  EXPECT_EQ(Diff(Want(), &have), Lines{"missing ACL entry nqn.2014-08.org.x:b"});
  have.allowed_hosts.push_back("nqn.2014-08.org.x:b");
  have.allowed_hosts.push_back("nqn.2014-08.org.x:intruder");
  EXPECT_EQ(Diff(Want(), &have), Lines{"unexpected ACL entry nqn.2014-08.org.x:intruder"});
  // ACL on with nobody published admits nobody: any entry is unexpected.
  auto nobody = Want();
  nobody.hosts.clear();
  have.allowed_hosts.clear();
  EXPECT_EQ(Diff(nobody, &have), Lines{});
  have.allowed_hosts.push_back("nqn.2014-08.org.x:a");
  EXPECT_EQ(Diff(nobody, &have), Lines{"unexpected ACL entry nqn.2014-08.org.x:a"});
}

TEST_F(ReconcilerDiffTest, AclOffIgnoresEntries) {
  auto have = Have(Want(false));
  have.allowed_hosts.push_back("nqn.2014-08.org.x:leftover");
  EXPECT_EQ(Diff(Want(false), &have), Lines{}) << "any host is admitted by intent";
}

TEST(ReconcilerFenceTest, BehindUnlessThisLifecycleAtThisGenerationOrNewer) {
  api::VolumeState v;
  v.meta.uid = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f";
  v.status.publication_generation = 5;
  EXPECT_TRUE(FenceBehind(v, nullptr));
  agent_api::Export e;
  EXPECT_TRUE(FenceBehind(v, &e)) << "no mark";
  e.fence = agent_api::Fence{v.meta.uid, 4};
  EXPECT_TRUE(FenceBehind(v, &e));
  e.fence->publication_generation = 5;
  EXPECT_FALSE(FenceBehind(v, &e));
  e.fence->publication_generation = 6;
  EXPECT_FALSE(FenceBehind(v, &e));
  e.fence->volume_uid = "0d6c1f4e-0000-4000-8000-000000000000";
  EXPECT_TRUE(FenceBehind(v, &e)) << "another lifecycle";
}

TEST(ReconcilerFenceTest, AgentErrorReasons) {
  EXPECT_STREQ(ReasonForAgentError(Aborted("fenced")), api::kReasonStaleGeneration);
  EXPECT_STREQ(ReasonForAgentError(Unavailable("down")), api::kReasonAgentUnavailable);
  EXPECT_STREQ(ReasonForAgentError(DeadlineExceeded("slow")), api::kReasonAgentUnavailable);
  EXPECT_STREQ(ReasonForAgentError(Internal("x")), api::kReasonReconcileFailed);
  EXPECT_STREQ(ReasonForAgentError(NotFound("x")), api::kReasonReconcileFailed);
}

TEST(DesiredTest, ApplyRequestCarriesTheFence) {
  auto v = Volume(Protocol::kIscsi, true);
  DesiredExport want;
  want.protocol = Protocol::kIscsi;
  want.spec = {"10.0.0.5", 3260, true, std::nullopt};
  want.hosts = {"iqn.1993-08.org.debian:01:a"};
  auto req = MakeApplyRequest(v, want);
  EXPECT_EQ(req.fence.volume_uid, v.meta.uid);
  EXPECT_EQ(req.fence.publication_generation, 7);
  EXPECT_EQ(req.agent_volume_id, "tank/pvc-1");
  ASSERT_EQ(req.allowed_hosts.size(), 1u);
}

TEST(ModelTest, ExportSpecSchemaIsStrict) {
  EXPECT_TRUE(
      api::ExportSpecFromJson({{"bindAddress", "10.0.0.5"}, {"port", 4420}, {"aclEnabled", true}})
          .ok());
  auto missing = api::ExportSpecFromJson({{"bindAddress", "10.0.0.5"}, {"port", 4420}});
  EXPECT_NE(missing.status().message().find("aclEnabled"), std::string::npos);
  auto str_acl = api::ExportSpecFromJson(
      {{"bindAddress", "10.0.0.5"}, {"port", 4420}, {"aclEnabled", "true"}});
  EXPECT_NE(str_acl.status().message().find("boolean"), std::string::npos);
  EXPECT_FALSE(
      api::ExportSpecFromJson({{"bindAddress", ""}, {"port", 4420}, {"aclEnabled", true}}).ok());
  EXPECT_FALSE(
      api::ExportSpecFromJson({{"bindAddress", "x"}, {"port", 70000}, {"aclEnabled", true}}).ok());
}

TEST(ModelTest, ConditionTransitionTimeMovesOnlyWithStatus) {
  std::vector<api::Condition> conds;
  api::Condition c{"ExportReconciled", "True", "Reconciled", "ok", "", 1};
  EXPECT_TRUE(api::SetCondition(conds, c, "t1"));
  EXPECT_FALSE(api::SetCondition(conds, c, "t2"));
  EXPECT_EQ(conds[0].last_transition_time, "t1");
  c.message = "ok again";
  EXPECT_TRUE(api::SetCondition(conds, c, "t3"));
  EXPECT_EQ(conds[0].last_transition_time, "t1");
  c.status = "False";
  EXPECT_TRUE(api::SetCondition(conds, c, "t4"));
  EXPECT_EQ(conds[0].last_transition_time, "t4");
}

TEST(CreateParametersTest, ValidatesEveryParameterByName) {
  google::protobuf::Map<std::string, std::string> p;
  p["agent"] = "storage-1";
  p["pool"] = "tank/k8s";
  p["protocol"] = "nvmeof-tcp";
  p["backend.compression"] = "lz4";
  p["csi.storage.k8s.io/pvc/name"] = "data";
  auto ok = ParseCreateParameters(p);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(ok->acl_enabled) << "ACL defaults to on";
  EXPECT_EQ(ok->backend_params.at("compression"), "lz4");
  auto bad = [&](const std::string& k, const std::string& v, const std::string& field) {
    auto q = p;
    q[k] = v;
    auto r = ParseCreateParameters(q);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << k << "=" << v;
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().message();
  };
  bad("pool", "../etc", "parameters.pool");
  bad("port", "44x0", "parameters.port");
  bad("port", "0", "parameters.port");
  bad("bindAddress", "host.example", "parameters.bindAddress");
  bad("acl", "1", "parameters.acl");
  bad("fsType", "btrfs", "parameters.fsType");
  bad("aclEnabled", "true", "parameters.aclEnabled");
  bad("agent", "Bad_Agent", "parameters.agent");
  bad("auth", "krb5", "parameters.auth");
  bad("auth", "CHAP", "parameters.auth");
  bad("nfsRootSquash", "false", "parameters.nfsRootSquash");  // nvmeof-tcp
  auto chap = p;
  chap["auth"] = "chap";
  ASSERT_TRUE(ParseCreateParameters(chap).ok());
  EXPECT_EQ(ParseCreateParameters(chap)->auth, "chap");
  chap["acl"] = "false";
  EXPECT_EQ(ParseCreateParameters(chap).status().code(), Code::kInvalidArgument);
  auto nfs = p;
  nfs["protocol"] = "nfs";
  nfs["auth"] = "chap";
  EXPECT_EQ(ParseCreateParameters(nfs).status().code(), Code::kInvalidArgument);
  nfs.erase("auth");
  nfs["nfsRootSquash"] = "no";
  EXPECT_EQ(ParseCreateParameters(nfs).status().code(), Code::kInvalidArgument);
  nfs["nfsRootSquash"] = "false";
  ASSERT_TRUE(ParseCreateParameters(nfs).ok());
  EXPECT_EQ(ParseCreateParameters(nfs)->nfs_root_squash, false);
}

std::string SourceFile(const std::string& rel) {
  std::ifstream in(std::string(PILLAR_SOURCE_DIR) + "/" + rel);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One list of parameters: what CreateVolume accepts is what README documents
// and what the chart's schema lets a StorageClass carry.
TEST(CreateParametersTest, ReadmeAndChartSchemaListEveryKnownParameter) {
  const std::set<std::string>& known = KnownCreateParameters();
  ASSERT_GE(known.size(), 10u);
  google::protobuf::Map<std::string, std::string> base;
  base["agent"] = "storage-1";
  base["pool"] = "p";
  base["protocol"] = "iscsi";
  for (const std::string& k : known) {
    auto q = base;
    q[k] = "x";
    auto r = ParseCreateParameters(q);
    EXPECT_THAT(std::string(r.status().message()),
                ::testing::Not(HasSubstr("not a pillar parameter")))
        << k;
  }

  std::string readme = SourceFile("README.md");
  size_t from = readme.find("StorageClass parameters:");
  size_t to = readme.find("Unknown parameters are refused.", from);
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  std::string paragraph = readme.substr(from, to - from);
  for (const std::string& k : known) {
    EXPECT_THAT(paragraph, HasSubstr("`" + k + "`"))
        << "README's StorageClass parameters miss " << k;
  }

  // The chart: a class's own fields for some, the parameters map's pattern
  // (an alternation of names, then the two prefixes) for the rest.
  auto schema = nlohmann::json::parse(SourceFile("charts/pillar/values.schema.json"));
  const auto& cls = schema["definitions"]["storageClass"]["properties"];
  const std::set<std::string> kClassFields = {"agent", "pool", "protocol", "acl", "fsType", "auth"};
  for (const std::string& f : kClassFields) {
    EXPECT_TRUE(cls.contains(f)) << "the chart's storageClass has no field " << f;
  }
  const auto& patterns = cls["parameters"]["patternProperties"];
  ASSERT_EQ(patterns.size(), 1u);
  std::string pattern = patterns.begin().key();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(pattern, m, std::regex(R"(^\^\(([A-Za-z|]+)\|backend)")))
      << pattern;
  std::set<std::string> chart = kClassFields;
  std::stringstream names(m[1].str());
  for (std::string n; std::getline(names, n, '|');) {
    EXPECT_EQ(kClassFields.count(n), 0u) << n << " is both a class field and a parameter";
    chart.insert(n);
  }
  EXPECT_EQ(chart, known);
  EXPECT_NE(pattern.find("backend\\."), std::string::npos) << pattern;
  EXPECT_NE(pattern.find("csi\\.storage\\.k8s\\.io/"), std::string::npos) << pattern;
}

TEST(CreateParametersTest, NfsRootModeAndOwnerDefaultTo0777RootAndRefuseBadForms) {
  google::protobuf::Map<std::string, std::string> nfs;
  nfs["agent"] = "storage-1";
  nfs["pool"] = "tank/k8s";
  nfs["protocol"] = "nfs";
  auto plain = ParseCreateParameters(nfs);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->nfs_root_mode, 0777u);
  EXPECT_EQ(plain->nfs_root_uid, 0u);
  EXPECT_EQ(plain->nfs_root_gid, 0u);

  struct Good {
    std::string mode, owner;
    uint32_t want_mode, want_uid, want_gid;
  };
  for (const Good& g : std::vector<Good>{{"0770", "1000:2000", 0770, 1000, 2000},
                                         {"770", "0:0", 0770, 0, 0},
                                         {"2770", "65534:65534", 02770, 65534, 65534},
                                         {"1777", "4294967294:7", 01777, 4294967294u, 7},
                                         {"0000", "0001:00", 0, 1, 0}}) {
    auto q = nfs;
    q["nfsRootMode"] = g.mode;
    q["nfsRootOwner"] = g.owner;
    auto r = ParseCreateParameters(q);
    ASSERT_TRUE(r.ok()) << g.mode << " " << g.owner << ": " << r.status().ToString();
    EXPECT_EQ(r->nfs_root_mode, g.want_mode) << g.mode;
    EXPECT_EQ(r->nfs_root_uid, g.want_uid) << g.owner;
    EXPECT_EQ(r->nfs_root_gid, g.want_gid) << g.owner;
  }

  auto bad = [&](const std::string& key, const std::string& value, const std::string& allowed) {
    auto q = nfs;
    q[key] = value;
    auto r = ParseCreateParameters(q);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << key << "=" << value;
    EXPECT_THAT(r.status().message(), HasSubstr("parameters." + key)) << value;
    EXPECT_THAT(r.status().message(), HasSubstr(allowed)) << value;
  };
  for (const char* mode :
       {"", "77", "07777", "0778", "0o770", "rwx", "-777", " 777", "0x1ff", "+777", "1e3"}) {
    bad("nfsRootMode", mode, "3 or 4 octal digits");
  }
  for (const char* owner :
       {"", "1000", "1000:", ":1000", "a:b", "-1:0", "1000:-1", "+1:0", "4294967295:0",
        "0:4294967295", "99999999999:0", "1000:1000:1000", "1000 :1000", "root:root", "1000.5:0"}) {
    bad("nfsRootOwner", owner, "each a decimal number from 0 to 4294967294");
  }
  // Block protocols have no root directory to give.
  for (const char* protocol : {"nvmeof-tcp", "iscsi"}) {
    for (const auto& [key, value] : std::map<std::string, std::string>{
             {"nfsRootMode", "0770"}, {"nfsRootOwner", "1000:1000"}}) {
      auto q = nfs;
      q["protocol"] = protocol;
      q[key] = value;
      auto r = ParseCreateParameters(q);
      EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << protocol << " " << key;
      EXPECT_THAT(r.status().message(), HasSubstr("parameters." + key + " applies to nfs only"));
    }
  }
}

TEST_F(ReconcilerDiffTest, AuthAndRootSquashAreComparedOnAdmittedHosts) {
  DesiredExport want = Want();
  want.spec.auth = "chap";
  want.spec.auth_digest = "sha256:aa";
  auto have = Have(want);
  have.spec.auth = "chap";
  have.spec.auth_digest = "sha256:aa";
  EXPECT_TRUE(Diff(want, &have).empty());
  have.spec.auth_digest = "sha256:bb";
  EXPECT_EQ(Diff(want, &have), Lines{"the hosts' credentials differ from the recorded authDigest"});
  have.spec.auth = "none";
  EXPECT_EQ(Diff(want, &have), Lines{"auth is none, want chap"});
  have.allowed_hosts.clear();  // nobody admitted: nothing to authenticate
  want.hosts.clear();
  EXPECT_TRUE(Diff(want, &have).empty());

  DesiredExport nfs;
  nfs.protocol = Protocol::kNfs;
  nfs.spec = {"10.0.0.5", 2049, true, std::nullopt};
  nfs.hosts = {"10.0.1.1"};
  auto served = Have(nfs);
  EXPECT_TRUE(Diff(nfs, &served).empty()) << "absent nfsRootSquash means root_squash";
  served.spec.nfs_no_root_squash = true;
  EXPECT_EQ(Diff(nfs, &served), Lines{"nfsRootSquash is false, want true"});
  nfs.spec.nfs_root_squash = false;
  EXPECT_TRUE(Diff(nfs, &served).empty());
  auto req = MakeApplyRequest(Volume(Protocol::kNfs, true), nfs);
  EXPECT_TRUE(req.spec.nfs_no_root_squash);
  EXPECT_FALSE(req.credentials.has_value());
}

// DeleteVolume and the reaper of abandoned creates decide alike when a
// record may go: only when nothing of its lifecycle can remain on the agent.
TEST(LifecycleTest, NothingLeftOnlyWhenTheAgentSaysSo) {
  EXPECT_TRUE(NothingOfThisLifecycleLeft(NotFound("no such volume"), true));
  EXPECT_TRUE(NothingOfThisLifecycleLeft(NotFound("no such volume"), false));
  // Not ours (foreign, or another record's): only an unconfirmed create may
  // drop its record over it; a provisioned volume must not vanish so.
  EXPECT_TRUE(NothingOfThisLifecycleLeft(FailedPrecondition("not pillar's"), false));
  EXPECT_TRUE(NothingOfThisLifecycleLeft(Aborted("another lifecycle"), false));
  EXPECT_FALSE(NothingOfThisLifecycleLeft(FailedPrecondition("in use"), true));
  EXPECT_FALSE(NothingOfThisLifecycleLeft(Aborted("another lifecycle"), true));
  for (bool provisioned : {true, false}) {
    EXPECT_FALSE(NothingOfThisLifecycleLeft(Unavailable("agent down"), provisioned));
    EXPECT_FALSE(NothingOfThisLifecycleLeft(DeadlineExceeded("timeout"), provisioned));
    EXPECT_FALSE(NothingOfThisLifecycleLeft(Internal("lvremove failed"), provisioned));
  }
}

}  // namespace
}  // namespace pillar::controller
