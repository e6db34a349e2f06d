// The JSON forms of the API types (field names as in the CRDs) and the typed
// views of the store's generic objects. From* and the loaders return
// INVALID_ARGUMENT naming the field when stored JSON does not fit the schema.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "api/types.h"
#include "common/status.h"
#include "store/store.h"

namespace pillar::api {

Meta MetaOf(const store::Object& o);
StatusOr<VolumeState> LoadVolume(const store::Object& o);
StatusOr<NodeRecord> LoadNode(const store::Object& o);
StatusOr<AgentRecord> LoadAgent(const store::Object& o);
StatusOr<SnapshotRecord> LoadSnapshot(const store::Object& o);

// JSON conversions (field names as in the CRDs). From* return INVALID_ARGUMENT
// naming the field when the stored JSON does not fit the schema.
nlohmann::json ToJson(const ExportSpec& s);
StatusOr<ExportSpec> ExportSpecFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const VolumeSpec& s);
nlohmann::json ToJson(const VolumeStatus& s);
StatusOr<VolumeSpec> VolumeSpecFromJson(const nlohmann::json& j);
StatusOr<VolumeStatus> VolumeStatusFromJson(const nlohmann::json& j);
nlohmann::json NodeSpecToJson(const NodeRecord& n);
StatusOr<NodeRecord> NodeFromJson(const Meta& meta, const nlohmann::json& spec);
nlohmann::json AgentSpecToJson(const AgentRecord& a);
nlohmann::json AgentStatusToJson(const AgentRecord& a);
StatusOr<AgentRecord> AgentFromJson(const Meta& meta, const nlohmann::json& spec,
                                    const nlohmann::json& status);
nlohmann::json ToJson(const SnapshotSpec& s);
nlohmann::json ToJson(const SnapshotStatus& s);
StatusOr<SnapshotSpec> SnapshotSpecFromJson(const nlohmann::json& j);
StatusOr<SnapshotStatus> SnapshotStatusFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const std::vector<Condition>& conditions);
StatusOr<std::vector<Condition>> ConditionsFromJson(const nlohmann::json& j);

nlohmann::json ToJson(const ExportInfo& e);
StatusOr<ExportInfo> ExportInfoFromJson(const nlohmann::json& j);

// Writes that touch one field of a volume's stored status and keep every
// other field byte for byte as it is (what the reconciler and pillarctl's
// repair write: another writer's fields, even ones this version does not
// know, survive). `status` is made an object when it is not one.
// `stored` with every top-level field of `modeled` written over it: the
// fields this version models change, the others stay as they were.
nlohmann::json MergeStatus(const nlohmann::json& stored, const nlohmann::json& modeled);
// The conditions of a stored status; none when it has none or they do not
// fit the schema.
std::vector<Condition> StoredConditions(const nlohmann::json& status);
void SetStoredConditions(nlohmann::json& status, const std::vector<Condition>& conditions);
// Returns whether the stored exportInfo changed.
bool SetStoredExportInfo(nlohmann::json& status, const ExportInfo& info);
void SetStoredExportSpec(nlohmann::json& status, const ExportSpec& spec);

}  // namespace pillar::api
