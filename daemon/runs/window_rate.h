// WindowRate: the seconds a periodic window's rates divide by
// (WindowRecord::rate_seconds).
//
// A window recorded at the daemon (local writers, raw clients' timestamps)
// covers the daemon's interval, and its rate is records / seconds. A window
// that merged remote clients' exact windows (ingest windows mode, a child
// perld) holds records the clients recorded over their own windows, which
// need not line up with the daemon's: a client's window merged into the
// run's short last window, or two windows of one client merged into one
// interval, would make records / seconds a spike or a dip that never
// happened (a 0.05 s window once showed 191 M records/s). The rule:
//
//   rate = (records without a client span) / seconds
//        + sum over clients c of  records_c / span_c
//
// records_c are the records of client c's windows merged into this window,
// span_c runs from the earliest start to the latest end of those windows on
// the client's own clock (so clock offsets between hosts do not matter).
// Windows without times (SBK clients send none; start 0, or end <= start)
// count as records without a span. rate_seconds = records / rate (seconds
// when the window has no records), so every reader keeps dividing by one
// number: records/s and MB/s in perlctl, CSV, /metrics and the live page.
//
// Threads: the recorder thread (one per RunRecorder).
#pragma once

#include <cstdint>
#include <vector>

namespace perld::runs {

class WindowRate {
 public:
  // A remote window of `records` merged into the window being filled.
  // `client` < 0 or no span: its records have no span of their own.
  void Add(int32_t client, int64_t records, int64_t start_unix_ms, int64_t end_unix_ms);
  // The rate seconds of the window that closed with `records` records over
  // `seconds` of the daemon's clock; starts the next window.
  double TakeRateSeconds(int64_t records, double seconds);

 private:
  struct Span {
    int64_t records = 0;
    int64_t start_ms = 0;
    int64_t end_ms = 0;
  };
  std::vector<Span> spans_;       // per client index; records == 0: not in this window
  std::vector<int32_t> clients_;  // the indexes with records in this window
  int64_t spanned_records_ = 0;
};

}  // namespace perld::runs
