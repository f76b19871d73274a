// The Prometheus remote write 1.0 wire format, encoded by hand: protobuf
// WriteRequest{repeated TimeSeries timeseries = 1}, TimeSeries{repeated Label
// labels = 1; repeated Sample samples = 2}, Label{string name = 1; string
// value = 2}, Sample{double value = 1; int64 timestamp = 2}
// (proto/prometheus/remote_write.proto, upstream's field numbers), then
// snappy's block format -- the body of a POST with Content-Encoding: snappy,
// Content-Type: application/x-protobuf, X-Prometheus-Remote-Write-Version:
// 0.1.0.
//
// Why by hand: a series' labels are encoded once per collection and shared
// by every queued sample of it (SampleQueue), and a request is a copy of
// those bytes plus 11 bytes of sample; the generated message would copy every
// label string per sample. The tests decode the output with the generated
// message from the .proto.
//
// Pure functions; any thread.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/remote_write/sample_queue.h"

namespace perld::remote_write {

using Label = std::pair<std::string, std::string>;  // name, value

// A series' labels as the bytes of TimeSeries field 1 (one Label message
// each), sorted by name as remote write requires; `labels` must include
// "__name__" and hold each name once.
std::string EncodeLabels(std::vector<Label> labels);

// The WriteRequest of `samples` (oldest first): one TimeSeries per distinct
// series, in the order of its first sample, with its samples in queue order
// (time order: a series' samples are queued as they were collected).
std::string EncodeWriteRequest(std::span<const QueuedSample> samples);

// snappy::Compress of `raw` (the block format, not the framed one).
std::string SnappyBlock(std::string_view raw);

}  // namespace perld::remote_write
