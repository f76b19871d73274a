// The one mapping from perld's absl::Status to grpc::Status: the codes are
// the same numbers (both follow google.rpc.Code), the message is kept.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace perld::service {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace perld::service
