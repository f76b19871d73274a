// JsonColumns: the JSON text spellings of the state database's structured
// columns, so that `sqlite3 perld.db` users (and SQLite's json_* functions)
// can read them:
//
//   runs.labels        {"key":"value",...}          keys sorted (std::map order)
//   runs.percentiles   [5,10,...,99.99]             percents, ascending
//   *.percentiles      [[percent,value,count],...]  a snapshot's percentiles
//
// Doubles are written in their shortest round-trip form (std::to_chars) and
// read back bit-exactly; a non-finite double (never a valid percent) is
// written as null and reads back as NaN. Strings are written with JSON
// escapes for '"', '\' and control characters, every other byte as is.
//
// The readers accept any JSON of the right shape (whitespace, every string
// escape including \uXXXX surrogate pairs) and return InvalidArgument for
// anything else, naming what was expected; they never crash on bad input.
// Pure functions, any thread.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/latency_snapshot.h"

namespace perld::state {

std::string LabelsToJson(const std::map<std::string, std::string>& labels);
// Duplicate keys are an error.
absl::StatusOr<std::map<std::string, std::string>> LabelsFromJson(std::string_view json);

std::string PercentsToJson(std::span<const double> percents);
absl::StatusOr<std::vector<double>> PercentsFromJson(std::string_view json);

// Writes snapshot.percents/values/counts as triples, or `null` for a total
// without exact percentiles (LatencySnapshot::percentiles_exact false).
// REQUIRES: the three vectors have the same length (else InvalidArgument).
absl::StatusOr<std::string> PercentilesToJson(const LatencySnapshot& snapshot);
// Fills out->percents, values and counts from the triples, and fractions as
// percent / 100.0 (PercentileSet's definition; fractions are not stored);
// `null`: none, percentiles_exact false.
absl::Status PercentilesFromJson(std::string_view json, LatencySnapshot* out);

}  // namespace perld::state
