// The one place Status meets grpc::Status: at the API edge.
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace pillar {

inline grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return {static_cast<grpc::StatusCode>(s.code()), s.message()};
}

inline Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return Status::Ok();
  return {static_cast<Code>(s.error_code()), s.error_message()};
}

}  // namespace pillar
