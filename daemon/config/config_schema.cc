#include "daemon/config/config_schema.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <system_error>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/common/http_url.h"
#include "daemon/config/listen_address.h"

namespace perld::config::internal {
namespace {

using YAML::Node;

constexpr size_t kShownChars = 64;  // longest value quoted in a message
constexpr int64_t kTiB = int64_t{1} << 40;

// yaml-cpp tags: "?" for a plain scalar, "!" for a quoted one, the full tag
// when one is written explicitly (!!int 5).
bool IsPlainNumberTag(const Node& v) {
  const std::string& tag = v.Tag();
  return tag == "?" || tag == "tag:yaml.org,2002:int" || tag == "tag:yaml.org,2002:float";
}

ValueError Expected(absl::string_view what, const Node& v) {
  return ValueError{absl::StrCat("expected ", what, ", got ", Describe(v))};
}

// Decimal digits with an optional sign: the only integer spelling accepted
// (no 0x, no 1_000, no 1e3, no 1.0).
bool IsDecimalInteger(absl::string_view text) {
  if (!text.empty() && (text.front() == '+' || text.front() == '-')) text.remove_prefix(1);
  if (text.empty()) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::optional<ValueError> ReadInt(const Node& v, int64_t lo, int64_t hi, int64_t* out) {
  if (!v.IsScalar() || !IsPlainNumberTag(v) || !IsDecimalInteger(v.Scalar())) {
    return Expected("an integer", v);
  }
  absl::string_view text = v.Scalar();
  if (text.front() == '+') text.remove_prefix(1);
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < lo || n > hi) {
    // Out of int64 range reads as out of [lo, hi] too: the digits are shown as given.
    return ValueError{absl::StrCat(text, " is outside [", lo, ", ", hi, "]")};
  }
  *out = n;
  return std::nullopt;
}

std::optional<ValueError> ReadDouble(const Node& v, double* out) {
  if (!v.IsScalar() || !IsPlainNumberTag(v)) return Expected("a number", v);
  absl::string_view text = v.Scalar();
  if (text.size() > 1 && text.front() == '+' && text[1] != '-') text.remove_prefix(1);
  double d = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(d)) {
    return Expected("a number", v);
  }
  *out = d;
  return std::nullopt;
}

// Shortest text that reads back as exactly `d` ("5", "99.99").
std::string DoubleText(double d) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);
  return ec == std::errc() ? std::string(buf, end) : absl::StrCat(d);
}

std::optional<ValueError> ReadString(const Node& v, std::string* out) {
  if (!v.IsScalar()) return Expected("a string", v);
  if (v.Scalar().find('\0') != std::string::npos) return ValueError{"contains a NUL character"};
  *out = v.Scalar();
  return std::nullopt;
}

// YAML double-quoted scalar: every byte survives the round trip.
std::string Quoted(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

// Each Access is a generic lambda `[](auto& c) -> auto& { return c.field; }`
// so one accessor serves both the const (render) and mutable (parse) side.

template <class Access>
ConfigKey IntKey(std::string name, ReloadRule rule, int64_t lo, int64_t hi, Access access) {
  ConfigKey key{std::move(name), rule, nullptr, nullptr, nullptr};
  key.parse = [lo, hi, access](const Node& v, DaemonConfig* c) -> std::optional<ValueError> {
    int64_t n = 0;
    if (auto error = ReadInt(v, lo, hi, &n)) return error;
    using T = std::remove_cvref_t<decltype(access(*c))>;
    access(*c) = static_cast<T>(n);
    return std::nullopt;
  };
  key.render = [access](const DaemonConfig& c) { return absl::StrCat(access(c)); };
  key.copy = [access](const DaemonConfig& from, DaemonConfig* to) { access(*to) = access(from); };
  return key;
}

// `names`: spelling -> value; the first spelling of a value is the one rendered.
template <class E, class Access>
ConfigKey EnumKey(std::string name, ReloadRule rule, std::vector<std::pair<std::string, E>> names,
                  Access access) {
  ConfigKey key{std::move(name), rule, nullptr, nullptr, nullptr};
  key.parse = [names, access](const Node& v, DaemonConfig* c) -> std::optional<ValueError> {
    if (v.IsScalar()) {
      for (const auto& [spelling, value] : names) {
        if (v.Scalar() == spelling) {
          access(*c) = value;
          return std::nullopt;
        }
      }
    }
    std::vector<std::string> spellings;
    spellings.reserve(names.size());
    for (const auto& entry : names) spellings.push_back(entry.first);
    return Expected(absl::StrCat("one of ", absl::StrJoin(spellings, ", ")), v);
  };
  key.render = [names, access](const DaemonConfig& c) {
    for (const auto& [spelling, value] : names) {
      if (access(c) == value) return spelling;
    }
    return std::string("?");
  };
  key.copy = [access](const DaemonConfig& from, DaemonConfig* to) { access(*to) = access(from); };
  return key;
}

template <class Access>
ConfigKey StringKey(std::string name, ReloadRule rule, Access access) {
  ConfigKey key{std::move(name), rule, nullptr, nullptr, nullptr};
  key.parse = [access](const Node& v, DaemonConfig* c) -> std::optional<ValueError> {
    return ReadString(v, &access(*c));
  };
  key.render = [access](const DaemonConfig& c) { return Quoted(access(c)); };
  key.copy = [access](const DaemonConfig& from, DaemonConfig* to) { access(*to) = access(from); };
  return key;
}

template <class Access>
ConfigKey BoolKey(std::string name, ReloadRule rule, Access access) {
  ConfigKey key{std::move(name), rule, nullptr, nullptr, nullptr};
  key.parse = [access](const Node& v, DaemonConfig* c) -> std::optional<ValueError> {
    if (v.IsScalar() && IsPlainNumberTag(v) && (v.Scalar() == "true" || v.Scalar() == "false")) {
      access(*c) = v.Scalar() == "true";
      return std::nullopt;
    }
    return Expected("true or false", v);
  };
  key.render = [access](const DaemonConfig& c) {
    return std::string(access(c) ? "true" : "false");
  };
  key.copy = [access](const DaemonConfig& from, DaemonConfig* to) { access(*to) = access(from); };
  return key;
}

template <class Access>
ConfigKey ListenKey(std::string name, Access access) {
  ConfigKey key = StringKey(std::move(name), ReloadRule::kRestart, access);
  key.parse = [access](const Node& v, DaemonConfig* c) -> std::optional<ValueError> {
    std::string text;
    if (auto error = ReadString(v, &text)) return error;
    if (absl::StatusOr<ListenAddress> address = ParseListenAddress(text); !address.ok()) {
      return ValueError{std::string(address.status().message())};
    }
    access(*c) = std::move(text);
    return std::nullopt;
  };
  return key;
}

// An http(s) URL ("" allowed: off), checked by common::ParseHttpUrl.
template <class Access>
ConfigKey UrlKey(std::string name, ReloadRule rule, Access access) {
  ConfigKey key = StringKey(std::move(name), rule, access);
  key.parse = [access](const Node& v, DaemonConfig* c) -> std::optional<ValueError> {
    std::string text;
    if (auto error = ReadString(v, &text)) return error;
    if (!text.empty()) {
      if (absl::StatusOr<common::HttpUrl> url = common::ParseHttpUrl(text); !url.ok()) {
        return ValueError{
            absl::StrCat("malformed URL \"", Shown(text), "\": ", url.status().message())};
      }
    }
    access(*c) = std::move(text);
    return std::nullopt;
  };
  return key;
}

ConfigKey PercentilesKey() {
  ConfigKey key{"percentiles", ReloadRule::kLive, nullptr, nullptr, nullptr};
  key.parse = [](const Node& v, DaemonConfig* c) -> std::optional<ValueError> {
    if (!v.IsSequence()) return Expected("a sequence of percents, e.g. [50, 99, 99.9]", v);
    std::vector<double> percents;
    for (const Node& item : v) {
      double p = 0;
      std::optional<ValueError> error = ReadDouble(item, &p);
      if (!error && !(p > 0.0 && p <= 100.0)) {
        error = ValueError{absl::StrCat(DoubleText(p), " is outside (0, 100]")};
      }
      if (!error && std::find(percents.begin(), percents.end(), p) != percents.end()) {
        error = ValueError{absl::StrCat(DoubleText(p), " is listed twice")};
      }
      if (error) {
        error->line = LineOf(item.Mark().line);
        return error;
      }
      percents.push_back(p);
    }
    c->latency.percentiles = std::move(percents);
    return std::nullopt;
  };
  key.render = [](const DaemonConfig& c) {
    std::vector<std::string> items;
    for (double p : c.latency.percentiles) items.push_back(DoubleText(p));
    return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
  };
  key.copy = [](const DaemonConfig& from, DaemonConfig* to) {
    to->latency.percentiles = from.latency.percentiles;
  };
  return key;
}

std::vector<ConfigKey> BuildKeys() {
  constexpr ReloadRule kLive = ReloadRule::kLive;
  constexpr ReloadRule kRestart = ReloadRule::kRestart;
  constexpr int64_t kMaxLatency = (int64_t{1} << 62) - 1;  // LatencyConfig: < 2^62
  std::vector<ConfigKey> keys;
  // Listeners, files, daemon behaviour.
  keys.push_back(ListenKey(
      "grpcListen", [](auto& c) -> auto& { return c.grpc_listen; }));
  keys.push_back(ListenKey(
      "httpListen", [](auto& c) -> auto& { return c.http_listen; }));
  keys.push_back(StringKey(
      "grpcUnix", kRestart, [](auto& c) -> auto& { return c.grpc_unix; }));
  keys.push_back(StringKey(
      "stateDir", kRestart, [](auto& c) -> auto& { return c.state_dir; }));
  keys.push_back(EnumKey<log::Level>(
      "logLevel", kLive,
      {{"debug", log::Level::kDebug},
       {"info", log::Level::kInfo},
       {"warning", log::Level::kWarning},
       {"error", log::Level::kError}},
      [](auto& c) -> auto& { return c.log_level; }));
  keys.push_back(IntKey(
      "drainTimeoutMs", kLive, 0, 3'600'000, [](auto& c) -> auto& { return c.drain_timeout_ms; }));
  keys.push_back(StringKey(
      "csvDir", kLive, [](auto& c) -> auto& { return c.csv_dir; }));
  // Run defaults (SBK PerL properties): SIGHUP applies them to new runs.
  keys.push_back(IntKey(
      "reportingIntervalMs", kLive, 10, 86'400'000,
      [](auto& c) -> auto& { return c.reporting_interval_ms; }));
  keys.push_back(EnumKey<TimeUnit>(
      "timeUnit", kLive,
      {{"ms", TimeUnit::kMs}, {"us", TimeUnit::kUs}, {"ns", TimeUnit::kNs}, {"mcs", TimeUnit::kUs}},
      [](auto& c) -> auto& { return c.latency.time_unit; }));
  keys.push_back(IntKey(
      "minLatency", kLive, 0, kMaxLatency, [](auto& c) -> auto& { return c.latency.min_latency; }));
  keys.push_back(IntKey(
      "maxLatency", kLive, 0, kMaxLatency, [](auto& c) -> auto& { return c.latency.max_latency; }));
  keys.push_back(PercentilesKey());
  keys.push_back(IntKey(
      "maxArraySizeMB", kLive, 1, kTiB,
      [](auto& c) -> auto& { return c.latency.max_array_size_mb; }));
  keys.push_back(IntKey(
      "maxHashMapSizeMB", kLive, 1, kTiB,
      [](auto& c) -> auto& { return c.latency.max_hash_map_size_mb; }));
  keys.push_back(IntKey(
      "totalMaxHashMapSizeMB", kLive, 1, kTiB,
      [](auto& c) -> auto& { return c.latency.total_max_hash_map_size_mb; }));
  keys.push_back(IntKey(
      "exactLatencyPageBits", kLive, 1, 16,
      [](auto& c) -> auto& { return c.latency.exact_latency_page_bits; }));
  keys.push_back(IntKey(
      "exactLatencySparsePageEntries", kLive, 1, (1 << 16) - 1,
      [](auto& c) -> auto& { return c.latency.exact_latency_sparse_page_entries; }));
  keys.push_back(IntKey(
      "exactLatencyMaxMemoryMB", kLive, 1, kTiB,
      [](auto& c) -> auto& { return c.latency.exact_latency_max_memory_mb; }));
  keys.push_back(IntKey(
      "exactTotalLatencyMaxMemoryMB", kLive, 1, kTiB,
      [](auto& c) -> auto& { return c.latency.exact_total_latency_max_memory_mb; }));
  keys.push_back(IntKey(
      "maxQs", kLive, 0, 4096, [](auto& c) -> auto& { return c.channels.max_qs; }));
  keys.push_back(IntKey(
      "qPerWorker", kLive, 0, 4096, [](auto& c) -> auto& { return c.channels.q_per_worker; }));
  keys.push_back(IntKey(
      "maxPendingPerWorker", kLive, 2, int64_t{1} << 32,
      [](auto& c) -> auto& { return c.channels.max_pending_per_worker; }));
  keys.push_back(EnumKey<OverflowPolicy>(
      "overflow", kLive, {{"block", OverflowPolicy::kBlock}, {"drop", OverflowPolicy::kDrop}},
      [](auto& c) -> auto& { return c.channels.overflow; }));
  keys.push_back(EnumKey<QueueKind>(
      "queue", kLive, {{"mpsc", QueueKind::kMpsc}, {"library", QueueKind::kLibrary}},
      [](auto& c) -> auto& { return c.channels.queue; }));
  // The daemon's one recorder thread takes idleNS when it starts.
  keys.push_back(IntKey(
      "idleNS", kRestart, 1, 1'000'000'000, [](auto& c) -> auto& { return c.idle_ns; }));
  keys.push_back(IntKey(
      "mallocTrimIntervalMs", kLive, 0, 86'400'000,
      [](auto& c) -> auto& { return c.malloc_trim_interval_ms; }));
  keys.push_back(IntKey(
      "benchWorkerYieldUs", kLive, 0, 1'000'000,
      [](auto& c) -> auto& { return c.bench_worker_yield_us; }));
  keys.push_back(EnumKey<ClockSource>(
      "clock", kLive,
      {{"auto", ClockSource::kAuto},
       {"tsc", ClockSource::kTsc},
       {"monotonic", ClockSource::kMonotonic}},
      [](auto& c) -> auto& { return c.clock; }));
  // retention:
  keys.push_back(IntKey(
      "retention.maxFinishedRuns", kLive, 1, 1'000'000,
      [](auto& c) -> auto& { return c.retention.max_finished_runs; }));
  keys.push_back(IntKey(
      "retention.maxWindowsPerRun", kLive, 1, 100'000'000,
      [](auto& c) -> auto& { return c.retention.max_windows_per_run; }));
  keys.push_back(IntKey(
      "retention.maxBytes", kLive, int64_t{1} << 20, kTiB,
      [](auto& c) -> auto& { return c.retention.max_bytes; }));
  keys.push_back(IntKey(
      "retention.maxWindowDistributionBytesPerRun", kLive, 0, kTiB,
      [](auto& c) -> auto& { return c.retention.max_window_distribution_bytes_per_run; }));
  keys.push_back(IntKey(
      "retention.maxTotalSegmentBytesPerRun", kLive, 0, kTiB,
      [](auto& c) -> auto& { return c.retention.max_total_segment_bytes_per_run; }));
  // limits:
  keys.push_back(IntKey(
      "limits.maxRunningRuns", kLive, 1, 4096,
      [](auto& c) -> auto& { return c.limits.max_running_runs; }));
  keys.push_back(IntKey(
      "limits.maxBenchWorkers", kLive, 1, 4096,
      [](auto& c) -> auto& { return c.limits.max_bench_workers; }));
  keys.push_back(IntKey(
      "limits.maxBenchPayloadBytes", kLive, 1, INT32_MAX,
      [](auto& c) -> auto& { return c.limits.max_bench_payload_bytes; }));
  // The gRPC server takes its receive limit when it is built.
  keys.push_back(IntKey(
      "limits.maxMessageBytes", kRestart, 4096, INT32_MAX,
      [](auto& c) -> auto& { return c.limits.max_message_bytes; }));
  keys.push_back(IntKey(
      "limits.maxWatchers", kLive, 1, 65536,
      [](auto& c) -> auto& { return c.limits.max_watchers; }));
  keys.push_back(IntKey(
      "limits.maxLabels", kLive, 0, 4096, [](auto& c) -> auto& { return c.limits.max_labels; }));
  keys.push_back(IntKey(
      "limits.maxLabelKeyBytes", kLive, 1, 65536,
      [](auto& c) -> auto& { return c.limits.max_label_key_bytes; }));
  keys.push_back(IntKey(
      "limits.maxLabelValueBytes", kLive, 0, 1 << 20,
      [](auto& c) -> auto& { return c.limits.max_label_value_bytes; }));
  keys.push_back(IntKey(
      "limits.maxNameBytes", kLive, 1, 65536,
      [](auto& c) -> auto& { return c.limits.max_name_bytes; }));
  keys.push_back(IntKey(
      "limits.maxPercentiles", kLive, 1, 100'000,
      [](auto& c) -> auto& { return c.limits.max_percentiles; }));
  keys.push_back(IntKey(
      "limits.maxMemoryBytes", kLive, 0, int64_t{1} << 50,
      [](auto& c) -> auto& { return c.limits.max_memory_bytes; }));
  // grpc: the server takes them when it is built.
  keys.push_back(IntKey(
      "grpc.maxConcurrentStreams", kRestart, 1, INT32_MAX,
      [](auto& c) -> auto& { return c.grpc.max_concurrent_streams; }));
  keys.push_back(IntKey(
      "grpc.keepaliveMinPingIntervalMs", kRestart, 0, 86'400'000,
      [](auto& c) -> auto& { return c.grpc.keepalive_min_ping_interval_ms; }));
  keys.push_back(IntKey(
      "grpc.keepaliveMaxPingStrikes", kRestart, 0, 1000,
      [](auto& c) -> auto& { return c.grpc.keepalive_max_ping_strikes; }));
  keys.push_back(IntKey(
      "grpc.maxConnectionAgeMs", kRestart, 0, INT32_MAX,
      [](auto& c) -> auto& { return c.grpc.max_connection_age_ms; }));
  keys.push_back(IntKey(
      "grpc.maxConnectionAgeGraceMs", kRestart, 0, INT32_MAX,
      [](auto& c) -> auto& { return c.grpc.max_connection_age_grace_ms; }));
  keys.push_back(IntKey(
      "grpc.maxThreads", kRestart, 0, 1'000'000,
      [](auto& c) -> auto& { return c.grpc.max_threads; }));
  // ingest:
  keys.push_back(IntKey(
      "ingest.workers", kRestart, 0, 256, [](auto& c) -> auto& { return c.ingest.workers; }));
  keys.push_back(IntKey(
      "ingest.maxBatchLength", kLive, 1, 1 << 24,
      [](auto& c) -> auto& { return c.ingest.max_batch_length; }));
  keys.push_back(IntKey(
      "ingest.maxPairsPerReport", kLive, 1, 1 << 28,
      [](auto& c) -> auto& { return c.ingest.max_pairs_per_report; }));
  keys.push_back(IntKey(
      "ingest.maxClientsPerRun", kLive, 1, 4096,
      [](auto& c) -> auto& { return c.ingest.max_clients_per_run; }));
  keys.push_back(IntKey(
      "ingest.maxStreams", kLive, 1, 65536, [](auto& c) -> auto& { return c.ingest.max_streams; }));
  keys.push_back(IntKey(
      "ingest.maxClientMemoryBytes", kLive, int64_t{1} << 20, kTiB,
      [](auto& c) -> auto& { return c.ingest.max_client_memory_bytes; }));
  keys.push_back(IntKey(
      "ingest.maxMemoryBytes", kLive, int64_t{1} << 20, kTiB,
      [](auto& c) -> auto& { return c.ingest.max_memory_bytes; }));
  keys.push_back(IntKey(
      "ingest.clientTimeoutMs", kLive, 0, 86'400'000,
      [](auto& c) -> auto& { return c.ingest.client_timeout_ms; }));
  keys.push_back(IntKey(
      "ingest.clientBreakdownMaxMemoryMB", kLive, 0, 1 << 20,
      [](auto& c) -> auto& { return c.ingest.client_breakdown_max_memory_mb; }));
  keys.push_back(BoolKey(
      "ingest.checkpoints", kLive, [](auto& c) -> auto& { return c.ingest.checkpoints; }));
  // prometheus:
  keys.push_back(EnumKey<MetricNames>(
      "prometheus.names", kLive,
      {{"perld", MetricNames::kPerld}, {"sbk", MetricNames::kSbk}, {"both", MetricNames::kBoth}},
      [](auto& c) -> auto& { return c.prometheus.names; }));
  keys.push_back(IntKey(
      "prometheus.maxRuns", kLive, 1, 100'000,
      [](auto& c) -> auto& { return c.prometheus.max_runs; }));
  keys.push_back(IntKey(
      "prometheus.finishedRunSeconds", kLive, 0, int64_t{365} * 86'400,
      [](auto& c) -> auto& { return c.prometheus.finished_run_seconds; }));
  // http: the HTTP listener's bounds, taken when it starts.
  keys.push_back(IntKey(
      "http.maxConnections", kRestart, 1, 65536,
      [](auto& c) -> auto& { return c.http.max_connections; }));
  keys.push_back(IntKey(
      "http.handlerThreads", kRestart, 1, 64,
      [](auto& c) -> auto& { return c.http.handler_threads; }));
  keys.push_back(IntKey(
      "http.maxQueuedRequests", kRestart, 1, 65536,
      [](auto& c) -> auto& { return c.http.max_queued_requests; }));
  keys.push_back(IntKey(
      "http.headerTimeoutMs", kRestart, 50, 1000,
      [](auto& c) -> auto& { return c.http.header_timeout_ms; }));
  // sbp:
  keys.push_back(StringKey(
      "sbp.storageName", kLive, [](auto& c) -> auto& { return c.sbp.storage_name; }));
  keys.push_back(EnumKey<SbpAction>(
      "sbp.action", kLive,
      {{"Writing", SbpAction::kWriting},
       {"Reading", SbpAction::kReading},
       {"Write_Reading", SbpAction::kWriteReading},
       {"Write_OnlyReading", SbpAction::kWriteOnlyReading},
       {"Read_Writing", SbpAction::kReadWriting},
       {"Read_OnlyWriting", SbpAction::kReadOnlyWriting}},
      [](auto& c) -> auto& { return c.sbp.action; }));
  keys.push_back(IntKey(
      "sbp.maxConnections", kLive, 1, 1'000'000,
      [](auto& c) -> auto& { return c.sbp.max_connections; }));
  keys.push_back(IntKey(
      "sbp.maxRecordSizeMB", kLive, 1, 1024,
      [](auto& c) -> auto& { return c.sbp.max_record_size_mb; }));
  // upstream:
  keys.push_back(StringKey(
      "upstream.target", kRestart, [](auto& c) -> auto& { return c.upstream.target; }));
  keys.push_back(StringKey(
      "upstream.nodeId", kRestart, [](auto& c) -> auto& { return c.upstream.node_id; }));
  keys.push_back(IntKey(
      "upstream.maxPairsPerReport", kRestart, 1, 1 << 24,
      [](auto& c) -> auto& { return c.upstream.max_pairs_per_report; }));
  keys.push_back(IntKey(
      "upstream.maxQueuedWindows", kRestart, 1, 10'000'000,
      [](auto& c) -> auto& { return c.upstream.max_queued_windows; }));
  keys.push_back(IntKey(
      "upstream.closeTimeoutMs", kRestart, 0, 86'400'000,
      [](auto& c) -> auto& { return c.upstream.close_timeout_ms; }));
  keys.push_back(BoolKey(
      "upstream.tls", kRestart, [](auto& c) -> auto& { return c.upstream.tls; }));
  keys.push_back(StringKey(
      "upstream.caFile", kRestart, [](auto& c) -> auto& { return c.upstream.ca_file; }));
  keys.push_back(StringKey(
      "upstream.certFile", kRestart, [](auto& c) -> auto& { return c.upstream.cert_file; }));
  keys.push_back(StringKey(
      "upstream.keyFile", kRestart, [](auto& c) -> auto& { return c.upstream.key_file; }));
  keys.push_back(StringKey(
      "upstream.tokenFile", kRestart, [](auto& c) -> auto& { return c.upstream.token_file; }));
  // auth:
  keys.push_back(StringKey(
      "auth.ingestTokenFile", kRestart, [](auto& c) -> auto& { return c.auth.ingest_token_file; }));
  keys.push_back(StringKey(
      "auth.queryTokenFile", kRestart, [](auto& c) -> auto& { return c.auth.query_token_file; }));
  keys.push_back(BoolKey(
      "auth.metricsOpen", kRestart, [](auto& c) -> auto& { return c.auth.metrics_open; }));
  keys.push_back(BoolKey(
      "auth.sbpOpen", kRestart, [](auto& c) -> auto& { return c.auth.sbp_open; }));
  // tls:
  keys.push_back(StringKey(
      "tls.certFile", kRestart, [](auto& c) -> auto& { return c.tls.cert_file; }));
  keys.push_back(StringKey(
      "tls.keyFile", kRestart, [](auto& c) -> auto& { return c.tls.key_file; }));
  keys.push_back(StringKey(
      "tls.clientCaFile", kRestart, [](auto& c) -> auto& { return c.tls.client_ca_file; }));
  // remoteWrite: Prometheus remote write (remote_write/remote_writer.h).
  keys.push_back(UrlKey(
      "remoteWrite.url", kLive, [](auto& c) -> auto& { return c.remote_write.url; }));
  keys.push_back(IntKey(
      "remoteWrite.intervalMs", kLive, 100, 3'600'000,
      [](auto& c) -> auto& { return c.remote_write.interval_ms; }));
  keys.push_back(StringKey(
      "remoteWrite.bearerTokenFile", kLive,
      [](auto& c) -> auto& { return c.remote_write.bearer_token_file; }));
  keys.push_back(StringKey(
      "remoteWrite.basicAuth.username", kLive,
      [](auto& c) -> auto& { return c.remote_write.basic_auth_username; }));
  keys.push_back(StringKey(
      "remoteWrite.basicAuth.passwordFile", kLive,
      [](auto& c) -> auto& { return c.remote_write.basic_auth_password_file; }));
  keys.push_back(StringKey(
      "remoteWrite.tls.caFile", kLive,
      [](auto& c) -> auto& { return c.remote_write.tls_ca_file; }));
  keys.push_back(StringKey(
      "remoteWrite.tls.certFile", kLive,
      [](auto& c) -> auto& { return c.remote_write.tls_cert_file; }));
  keys.push_back(StringKey(
      "remoteWrite.tls.keyFile", kLive,
      [](auto& c) -> auto& { return c.remote_write.tls_key_file; }));
  keys.push_back(IntKey(
      "remoteWrite.maxQueuedSamples", kRestart, 1, 100'000'000,
      [](auto& c) -> auto& { return c.remote_write.max_queued_samples; }));
  keys.push_back(IntKey(
      "remoteWrite.maxSamplesPerRequest", kLive, 1, 1'000'000,
      [](auto& c) -> auto& { return c.remote_write.max_samples_per_request; }));
  keys.push_back(IntKey(
      "remoteWrite.timeoutMs", kLive, 100, 600'000,
      [](auto& c) -> auto& { return c.remote_write.timeout_ms; }));
  return keys;
}

}  // namespace

std::string Shown(absl::string_view text) {
  if (text.size() <= kShownChars) return absl::CHexEscape(text);
  return absl::StrCat(absl::CHexEscape(text.substr(0, kShownChars)), "...");
}

std::string Describe(const Node& v) {
  switch (v.Type()) {
    case YAML::NodeType::Null:
      return "an empty value";
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      if (!IsPlainNumberTag(v)) return absl::StrCat("the string \"", Shown(v.Scalar()), "\"");
      return absl::StrCat("'", Shown(v.Scalar()), "'");
    case YAML::NodeType::Undefined:
      break;
  }
  return "an undefined value";
}

const std::vector<ConfigKey>& ConfigKeys() {
  static const std::vector<ConfigKey>* const keys = new std::vector<ConfigKey>(BuildKeys());
  return *keys;
}

const ConfigKey* FindConfigKey(absl::string_view name) {
  for (const ConfigKey& key : ConfigKeys()) {
    if (key.name == name) return &key;
  }
  return nullptr;
}

const std::vector<std::string>& SectionNames() {
  static const std::vector<std::string>* const names = new std::vector<std::string>(
      {"retention", "limits", "grpc", "ingest", "prometheus", "http", "sbp", "upstream", "auth",
       "tls", "remoteWrite", "remoteWrite.basicAuth", "remoteWrite.tls"});
  return *names;
}

bool IsSection(absl::string_view name) {
  const std::vector<std::string>& names = SectionNames();
  return std::find(names.begin(), names.end(), name) != names.end();
}

int LineOf(int mark_line) { return mark_line < 0 ? 1 : mark_line + 1; }

}  // namespace perld::config::internal
