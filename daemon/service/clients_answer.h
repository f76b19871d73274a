// ClientsAnswer: perld.v1.GetClientsResponse, serialized by hand. A
// GetClients answer is one row and ~30 percentiles per client -- ~6,000
// sub-messages for a 200-client run -- and building them as protobuf
// objects (on an arena) and serializing those was most of the daemon's
// cost of the call (tests/bench/DAEMON.md, "GetClients written to the
// wire"). Each row is serialized from one reused RemoteClient holding every
// field but the percentiles; each percentile is written straight to the
// wire after it. A reader parses the message a generated serializer would
// have written: the same fields and values, a row's percentiles (field 18)
// after its fields 19-21, an order the protobuf wire format allows (tested:
// the parsed answer equals the one built from protobuf objects).
//
// Threads: one call's; nothing shared.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "daemon/ingest/ingest_types.h"
#include "perld/v1/perld.pb.h"

namespace perld::service {

class ClientsAnswer {
 public:
  // Appends the serialized GetClientsResponse of `clients` (in order) to `out`.
  void Serialize(uint64_t run_id, std::span<const ingest::ClientView> clients,
                 int64_t breakdown_bytes, int64_t breakdown_limit_bytes, std::string* out);

 private:
  v1::RemoteClient row_;  // reused: its strings keep their capacity
};

}  // namespace perld::service
