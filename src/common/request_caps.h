// The caps of common/caps.h applied to a whole protobuf request: every
// repeated and map field, nested messages included, before a handler acts.
#pragma once

#include <google/protobuf/message.h>

#include "common/status.h"

namespace pillar {

// INVALID_ARGUMENT naming the first field over its cap, by path.
Status CheckRequestCaps(const google::protobuf::Message& request);

}  // namespace pillar
