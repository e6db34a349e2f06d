// What the CSI Controller's volume and snapshot halves share: how a record
// is read (an absent one is NOT_FOUND with a message naming it), which agent
// answers count as a refusal, and the reply mapping.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "api/convert.h"
#include "common/status.h"
#include "store/store.h"

namespace pillar::controller {

grpc::Status Reply(const Status& s);

// The agent looked at the request and said no: it refuses before it creates,
// marks or fences anything (a retry cannot succeed without a change).
// UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL and the like may have left
// storage of the request's lifecycle behind, so they are not refusals.
bool AgentRefusedCreate(const Status& s);

// The status of a record as stored (empty when it has none or it is bad).
api::VolumeStatus LoadStatusOrEmpty(const store::Object& obj);

// The one mapping of an absent record: NOT_FOUND with `absent` as the
// message. A name the store cannot even hold names no object: NOT_FOUND too.
StatusOr<store::Object> GetRecord(store::Store& st, const char* kind, const std::string& name,
                                  const std::string& absent);

StatusOr<store::Object> GetVolume(store::Store& st, const std::string& volume_id);

// A volume the CO may use: its record, once the agent confirmed its storage.
// A create still under way (or failed and waiting for its retry) is no
// volume yet: NOT_FOUND, so nothing is published or expanded on it.
StatusOr<api::VolumeState> GetProvisionedVolume(store::Store& st, const std::string& volume_id);

}  // namespace pillar::controller
