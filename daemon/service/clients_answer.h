// SerializeClientsAnswer: perld.v1.GetClientsResponse, serialized by hand. A
// GetClients answer is one row and ~30 percentiles per client -- ~6,000
// sub-messages for a 200-client run -- and building them as protobuf
// objects (on an arena) and serializing those was the largest part of the daemon's
// cost of the call (tests/bench/DAEMON.md, "GetClients written to the
// wire"). Each row is serialized from one reused RemoteClient holding every
// field but the percentiles; each percentile is written straight to the
// wire after it. A reader parses the message a generated serializer would
// have written: the same fields and values, a row's percentiles (field 18)
// after its fields 19-21, an order the protobuf wire format allows (tested:
// the parsed answer equals the one built from protobuf objects). Why by
// hand: the generated serializer over one reused RemoteClient (percentile
// messages kept across rows, nothing allocated) took 80.5 us for 200
// clients and 409 us for 1,000, the rows written here 59 and 315 us
// (clients_answer_bench, 2026-12-08; that variant not kept).
//
// Threads: any; nothing shared.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "daemon/ingest/ingest_types.h"
#include "perld/v1/perld.pb.h"

namespace perld::service {

// Appends the serialized GetClientsResponse of `clients` (in order) to `out`.
void SerializeClientsAnswer(uint64_t run_id, std::span<const ingest::ClientView> clients,
                            int64_t breakdown_bytes, int64_t breakdown_limit_bytes,
                            std::string* out);

}  // namespace perld::service
