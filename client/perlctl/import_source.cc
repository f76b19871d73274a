#include "client/perlctl/import_source.h"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/perlctl/decimal_scale.h"
#include "client/perlctl/fio_log.h"
#include "client/perlctl/k6_json.h"
#include "daemon/common/errno_text.h"

namespace perld::perlctl {
namespace {

// "FILE:LINE: why", with the status's code kept (FailedPrecondition: a k6
// metric that is not a trend of time).
absl::Status At(const std::string& file, int64_t line, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(file, ":", line, ": ", s.message()));
}

absl::Status Prefixed(absl::string_view what, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(what, " ", s.message()));
}

absl::Status MulOverflow(int64_t a, int64_t b, int64_t* out, absl::string_view what) {
  if (__builtin_mul_overflow(a, b, out)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", a, " is too large for the unit"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadSamples(const ImportSource& src,
                         const std::function<bool(const ImportSample&)>& each,
                         std::vector<std::string>* k6_metrics) {
  // Unit shifts: fio writes ns, k6 ms.
  const int fio_shift = src.ns_per_unit == 1 ? 0 : src.ns_per_unit == 1000 ? -3 : -6;
  const int k6_shift = fio_shift + 6;
  const int64_t units_per_ms = 1'000'000 / src.ns_per_unit;
  std::string line;
  for (const std::string& file : src.files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      return absl::NotFoundError(absl::StrCat(file, ": cannot open: ", common::ErrnoText(errno)));
    }
    if (src.format == ImportFormat::kFio) {
      if (std::optional<std::string> problem = FioLogNameProblem(file)) {
        return absl::InvalidArgumentError(absl::StrCat(file, ": ", *problem));
      }
    }
    if (in.peek() == 0x1f) {
      char magic[2] = {};
      in.read(magic, 2);
      if (in.gcount() == 2 && static_cast<unsigned char>(magic[1]) == 0x8b) {
        return absl::InvalidArgumentError(
            absl::StrCat(file, ": gzip-compressed; decompress it first (zcat ", file, " > FILE)"));
      }
      in.clear();
      in.seekg(0);
    }
    K6MetricReader k6(src.metric);
    int64_t number = 0;
    while (std::getline(in, line)) {
      ++number;
      if (FioBlankLine(line)) continue;
      ImportSample sample;
      if (src.format == ImportFormat::kFio) {
        absl::StatusOr<FioLogEntry> e = ParseFioLogLine(line);
        if (!e.ok()) return At(file, number, e.status());
        absl::StatusOr<ScaledValue> latency = ScaleDecimal(e->latency, fio_shift);
        if (!latency.ok()) return At(file, number, Prefixed("latency", latency.status()));
        if (absl::Status s = MulOverflow(e->time_ms, units_per_ms, &sample.end, "time"); !s.ok()) {
          return At(file, number, s);
        }
        sample.stream = e->direction;
        sample.latency = latency->value;
        sample.rounded = latency->rounded;
        sample.bytes = static_cast<int32_t>(e->block_size);
      } else {
        absl::StatusOr<std::optional<K6Point>> point = k6.Line(line);
        if (!point.ok()) return At(file, number, point.status());
        if (!point->has_value()) continue;
        absl::StatusOr<ScaledValue> latency = ScaleDecimal((*point)->value, k6_shift);
        if (!latency.ok()) return At(file, number, Prefixed("the Point's value", latency.status()));
        sample.end = (*point)->unix_ns / src.ns_per_unit;
        sample.latency = latency->value;
        sample.rounded = latency->rounded;
      }
      if (!each(sample)) return absl::OkStatus();
    }
    if (k6_metrics != nullptr) {
      for (const std::string& m : k6.metrics_seen()) {
        if (std::find(k6_metrics->begin(), k6_metrics->end(), m) == k6_metrics->end()) {
          k6_metrics->push_back(m);
        }
      }
    }
    if (in.bad()) {
      return absl::DataLossError(absl::StrCat(file, ": read error: ", common::ErrnoText(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace perld::perlctl
