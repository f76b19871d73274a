// The client library's own count of what it recorded (perld::LocalTotal) as
// `perlctl load --json` and `perlctl import --json` print it: the keys of a
// window's counters (README "JSON").
#pragma once

#include "daemon/common/json_writer.h"
#include "perld/client.h"

namespace perld::perlctl {

inline void WriteLocalTotal(const LocalTotal& t, json::JsonWriter* json) {
  json->Key("records").Int(t.records);
  json->Key("bytes").Int(t.bytes);
  json->Key("validLatencyRecords").Int(t.valid);
  json->Key("invalidLatencyRecords").Int(t.invalid);
  json->Key("lowerLatencyDiscardRecords").Int(t.lower_discard);
  json->Key("higherLatencyDiscardRecords").Int(t.higher_discard);
  json->Key("rejectedRecords").Int(t.rejected);
  json->Key("minLatency").Int(t.min_latency);
  json->Key("maxLatency").Int(t.max_latency);
  json->Key("totalLatency").Int(t.total_latency);
}

}  // namespace perld::perlctl
