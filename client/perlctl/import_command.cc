#include "client/perlctl/import_command.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/perlctl/cli_args.h"
#include "client/perlctl/decimal_scale.h"
#include "client/perlctl/fio_log.h"
#include "client/perlctl/import_source.h"
#include "client/perlctl/local_total_json.h"
#include "daemon/common/json_writer.h"
#include "perld/client.h"

namespace perld::perlctl {

using json::JsonWriter;
namespace {

constexpr char kImportUsage[] =
    R"(usage: perlctl [--target HOST:PORT] [--json] [--timeout SECONDS] [security] import
         --format fio|k6|hlog FILE... --run NAME [--mode windows|raw] [--unit ns|us|ms]
         [--metric NAME] [--tag NAME] [--run-unit ns|us|ms] [--distribution-out FILE] [--name CLIENT] [--label KEY=VALUE]...
         [--join | --new] [--interval-ms N] [--min-latency N] [--max-latency N]
         [--connect-timeout SECONDS]
Streams the latencies of fio latency logs, a k6 JSON output or HdrHistogram interval logs
into perld, one record per I/O, sample or histogram count, through the ordinary ingest
path. Every file is checked whole first: a malformed line (FILE:LINE), a k6 metric that
is not a trend of time, an hlog histogram that does not decode, or no record at all exits
2 and opens no run. Exits 0 only when perld acknowledged every record.
  --format fio            fio logs of write_lat_log with log_avg_msec=0 (NAME_lat.N.log,
                          _clat, _slat; values in ns); each data direction goes to its own
                          run NAME-read, NAME-write, NAME-trim, NAME-sync (label direction)
  --format k6             `k6 run --out json=FILE` (uncompressed): the Points of --metric
                          (default http_req_duration; a trend of time, ms) into run NAME
  --format hlog           HdrHistogram interval logs (HistogramLogWriter, format 1.2/1.3)
                          into run NAME, merged: each count at its bucket's highest
                          equivalent value (what HdrHistogram reports), exact below
                          2^ceil(log2(2*10^digits)) with lowestDiscernibleValue 1, else
                          within 1/2^(bits) of the raw value; the run is marked bucketed
                          (exact false, the reason in show, percentiles still answered)
  --unit ns|us|ms         fio, k6: the run's unit (default ns); a value with more digits
                          than the unit keeps is rounded to the nearest unit, halves up, and
                          counted. hlog: the unit of the log's values (logs do not say;
                          default ns)
  --run-unit ns|us|ms     hlog: the run's unit (default --unit); each value converted
                          exactly, or refused (a bucket value not a whole number of it)
  --tag NAME              hlog: import the intervals tagged NAME (default: the untagged
                          ones, as HistogramLogProcessor without -tag)
  --mode windows|raw      windows (default): exact latency/count windows (hlog: a window
                          report per interval); raw: every record's timestamps (hlog: one
                          per bucket carrying its count). The same exact total either way
  --distribution-out F    what was sent, exactly: per run its counters and ascending
                          [latency, count] pairs (JSON)
  --name CLIENT           this client's name in the run(s) (default: the host name)
  --label KEY=VALUE       a label of the run(s) it creates (besides import and direction)
  --join | --new          only join running ingest runs / only create new ones
  --interval-ms N         the reporting interval of a run it creates (default 1000)
  --min-latency N         the latency range of a run it creates, in the unit (default 0 to
  --max-latency N         3 minutes); records outside it are counted, not in percentiles
  --connect-timeout S     how long to wait for perld to open the run(s) (default 5)
  --timeout S             (before import) how long to wait for the last acknowledgements
A record's end is the source's time (hlog: its interval's end) and its start end -
latency; perld puts records into the window in which they arrive, so the run's windows are
import time; its total is the point.
)";

// Every window mode report holds at most this many records (so at most this
// many latency/count pairs: far under ingest.maxPairsPerReport and
// limits.maxMessageBytes however fast the import records).
constexpr int64_t kMaxRecordsPerReport = int64_t{1} << 16;

// How long an interrupted import waits for perld's last acknowledgements.
constexpr std::chrono::milliseconds kInterruptGrace(1000);

std::optional<int64_t> TakeInt(std::vector<std::string>* args, const std::string& name, int64_t min,
                               int64_t max) {
  const std::optional<std::string> v = TakeOne(args, name);
  if (!v) return std::nullopt;
  int64_t n = 0;
  if (!absl::SimpleAtoi(*v, &n) || n < min || n > max) {
    throw UsageError{
        absl::StrCat("import: --", name, " must be an integer in [", min, ", ", max, "]")};
  }
  return n;
}

// One run fed by the import: its figures from the check pass, its client.
struct Stream {
  std::string run;
  std::string direction;  // fio only
  int64_t checked = 0;    // records found by the check pass
  int64_t rounded = 0;    // of them, values rounded to the unit
  int64_t sent = 0;       // records recorded by the send pass
  int64_t since_flush = 0;
  std::unique_ptr<Client> client;
  Recorder* recorder = nullptr;
  FlushResult closed;
  LocalTotal total;
  Counters counters;
};

}  // namespace

int ImportCommand(const std::string& target, const client::ChannelSecurity& security,
                  bool json_output, double timeout_s, std::vector<std::string> args) {
  if (TakeFlag(&args, "help")) {
    std::cout << kImportUsage;
    return 0;
  }
  ImportSource src;
  const std::optional<std::string> format = TakeOne(&args, "format");
  if (!format) throw UsageError{"import: --format fio|k6|hlog is needed"};
  if (*format == "fio") {
    src.format = ImportFormat::kFio;
  } else if (*format == "k6") {
    src.format = ImportFormat::kK6;
  } else if (*format == "hlog") {
    src.format = ImportFormat::kHlog;
  } else {
    throw UsageError{"import: --format must be fio, k6 or hlog"};
  }
  const bool hlog = src.format == ImportFormat::kHlog;
  const std::optional<std::string> run = TakeOne(&args, "run");
  if (!run || run->empty()) throw UsageError{"import: --run NAME is needed"};
  const std::string mode_name = TakeOne(&args, "mode").value_or("windows");
  if (mode_name != "raw" && mode_name != "windows") {
    throw UsageError{"import: --mode must be windows or raw"};
  }
  const auto ns_of_unit = [](const std::string& name, const char* option) -> int64_t {
    if (name == "ns") return 1;
    if (name == "us") return 1000;
    if (name == "ms") return 1'000'000;
    throw UsageError{absl::StrCat("import: --", option, " must be ns, us or ms")};
  };
  // fio, k6: --unit is the run's. hlog: --unit is the log's, --run-unit the run's.
  const std::string log_unit_name = TakeOne(&args, "unit").value_or("ns");
  const std::optional<std::string> run_unit = TakeOne(&args, "run-unit");
  if (run_unit && !hlog) throw UsageError{"import: --run-unit is for --format hlog"};
  const std::string unit_name = run_unit.value_or(log_unit_name);
  src.hlog_ns_per_value = ns_of_unit(log_unit_name, "unit");
  src.ns_per_unit = ns_of_unit(unit_name, run_unit ? "run-unit" : "unit");
  const LatencyUnit client_unit = src.ns_per_unit == 1      ? LatencyUnit::kNs
                                  : src.ns_per_unit == 1000 ? LatencyUnit::kUs
                                                            : LatencyUnit::kMs;
  src.hlog_tag = TakeOne(&args, "tag");
  if (src.hlog_tag && !hlog) throw UsageError{"import: --tag is for --format hlog"};
  if (src.hlog_tag && src.hlog_tag->empty()) throw UsageError{"import: --tag needs a NAME"};
  const std::optional<std::string> metric = TakeOne(&args, "metric");
  if (metric && src.format != ImportFormat::kK6) {
    throw UsageError{"import: --metric is for --format k6"};
  }
  src.metric = metric.value_or("http_req_duration");
  const std::optional<std::string> distribution_out = TakeOne(&args, "distribution-out");
  const std::optional<std::string> client_name = TakeOne(&args, "name");
  const bool join_only = TakeFlag(&args, "join");
  const bool new_only = TakeFlag(&args, "new");
  if (join_only && new_only) throw UsageError{"import: --join and --new exclude each other"};
  const int64_t interval_ms = TakeInt(&args, "interval-ms", 10, 86'400'000).value_or(1000);
  const std::optional<int64_t> min_latency = TakeInt(&args, "min-latency", 0, kMaxScaledValue - 1);
  const std::optional<int64_t> max_latency = TakeInt(&args, "max-latency", 0, kMaxScaledValue - 1);
  double connect_timeout_s = 5;
  if (const std::optional<std::string> v = TakeOne(&args, "connect-timeout")) {
    if (!absl::SimpleAtod(*v, &connect_timeout_s) || !(connect_timeout_s > 0) ||
        connect_timeout_s > 86'400) {
      throw UsageError{"import: --connect-timeout must be seconds in (0, 86400]"};
    }
  }
  std::map<std::string, std::string> labels;
  for (const std::string& kv : TakeValues(&args, "label")) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError{"--label needs KEY=VALUE"};
    labels[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const std::string& a : args) {
    if (a.size() > 1 && a[0] == '-') throw UsageError{"import: unknown option '" + a + "'"};
    src.files.push_back(a);
  }
  if (src.files.empty()) throw UsageError{"import: no FILE to import"};

  // The check pass: every line of every file, before anything is sent.
  std::array<Stream, kFioDirections> streams;
  std::vector<std::string> k6_metrics;
  HlogFacts hlog_facts;
  bool too_many = false;
  absl::Status checked = ReadSamples(
      src,
      [&](const ImportSample& s) {
        Stream& stream = streams[static_cast<size_t>(s.stream)];
        if (__builtin_add_overflow(stream.checked, s.records, &stream.checked)) {
          too_many = true;
          return false;
        }
        stream.rounded += s.rounded ? 1 : 0;
        return true;
      },
      &k6_metrics, &hlog_facts);
  if (checked.ok() && too_many) {
    checked = absl::InvalidArgumentError(
        absl::StrCat(absl::StrJoin(src.files, ", "), ": over 2^63 - 1 records in all"));
  }
  if (!checked.ok()) {
    std::cerr << "perlctl: import: " << checked.message()
              << "\nperlctl: import: nothing was sent (no run opened)\n";
    return 2;
  }
  std::vector<Stream*> active;
  for (size_t d = 0; d < streams.size(); ++d) {
    Stream& s = streams[d];
    if (s.checked == 0) continue;
    if (src.format == ImportFormat::kFio) {
      s.direction = FioDirectionName(static_cast<int>(d));
      s.run = *run + "-" + s.direction;
    } else {
      s.run = *run;
    }
    active.push_back(&s);
  }
  if (active.empty()) {
    const auto tag_text = [](const std::string& t) { return t.empty() ? "untagged" : "Tag=" + t; };
    std::vector<std::string> tags;
    for (const std::string& t : hlog_facts.tags_seen) tags.push_back(tag_text(t));
    std::cerr << "perlctl: import: "
              << (src.format == ImportFormat::kFio
                      ? std::string("no I/O line in ") + absl::StrJoin(src.files, ", ")
                  : hlog ? absl::StrCat("no count in the ", hlog_facts.intervals, " ",
                                        tag_text(src.hlog_tag.value_or("")), " interval(s) of ",
                                        absl::StrJoin(src.files, ", "), " (intervals seen: ",
                                        tags.empty() ? "none" : absl::StrJoin(tags, ", "), ")")
                         : absl::StrCat(
                               "no Point of metric '", src.metric, "' in ",
                               absl::StrJoin(src.files, ", "), " (metrics declared: ",
                               k6_metrics.empty() ? "none" : absl::StrJoin(k6_metrics, ", "), ")"))
              << "; nothing was sent (no run opened)\n";
    return 2;
  }

  // hlog: why the run is bucketed (IngestOpen.bucketed_reason, at most
  // limits.maxNameBytes = 256 bytes by default).
  std::string bucketed_reason;
  if (hlog) {
    std::vector<std::string> names;
    for (const std::string& f : src.files) names.push_back(f.substr(f.rfind('/') + 1));
    const std::string precision =
        hlog_facts.exact_below == 0
            ? absl::StrCat("within 1/2^", hlog_facts.relative_bits,
                           " of the raw ones above the lowest bucket; lowestDiscernibleValue > 1")
        : hlog_facts.exact_below == INT64_MAX
            ? std::string("no count")
            : absl::StrCat("within 1/2^", hlog_facts.relative_bits,
                           " of the raw ones; exact below ", hlog_facts.exact_below, " ",
                           log_unit_name);
    const auto reason = [&](const std::string& what) {
      return absl::StrCat("imported from ", what,
                          ": values are HdrHistogram's highest equivalent values (", precision,
                          ")");
    };
    bucketed_reason = reason(absl::StrCat("HdrHistogram log", names.size() > 1 ? "s " : " ",
                                          absl::StrJoin(names, ", ")));
    if (bucketed_reason.size() > 250) {
      bucketed_reason = reason(absl::StrCat(names.size(), " HdrHistogram logs"));
    }
  }

  // SIGINT/SIGTERM are taken by the watcher thread (blocked before any
  // client thread starts, so every thread inherits the mask).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  for (Stream* s : active) {
    ClientOptions options;
    options.target = target;
    options.tls = security.tls;
    options.ca_file = security.ca_file;
    options.cert_file = security.cert_file;
    options.key_file = security.key_file;
    options.token_file = security.token_file;
    options.run = s->run;
    options.must_exist = join_only;
    options.must_create = new_only;
    options.labels = labels;
    options.labels.emplace("import", *format);
    if (!s->direction.empty()) options.labels["direction"] = s->direction;
    options.mode = mode_name == "raw" ? IngestMode::kRaw : IngestMode::kWindows;
    options.time_unit = client_unit;
    options.min_latency = min_latency;
    options.max_latency = max_latency;
    options.reporting_interval_ms = interval_ms;
    if (client_name) options.client_name = *client_name;
    options.clock = src.format == ImportFormat::kFio ? "fio log time (ms since the job started)"
                    : hlog ? "hlog interval ends (StartTimestamp + BaseTime + Interval_Length)"
                           : "k6 Point time (UNIX, RFC 3339)";
    options.clock_resolution_ns = src.format == ImportFormat::kK6 ? 1 : 1'000'000;
    options.bucketed_reason = bucketed_reason;
    options.max_recorders = 1;
    std::string error;
    s->client = Client::Create(options, &error);
    if (s->client == nullptr) {
      std::cerr << "perlctl: import: " << error << "\n";
      for (Stream* o : active) {
        if (o->client != nullptr) o->client->Abandon();
      }
      return 1;
    }
    s->recorder = s->client->NewRecorder();
  }

  // Fail fast: every run opened before any record is sent.
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(connect_timeout_s));
  for (;;) {
    // The first run not opened yet, and why.
    const Stream* waiting = nullptr;
    std::string refused;
    std::string last_error;
    for (const Stream* s : active) {
      const Counters c = s->client->counters();
      if (c.opened) continue;
      const std::string final_error = s->client->FinalError();
      if (waiting == nullptr || (refused.empty() && !final_error.empty())) {
        waiting = s;
        refused = final_error;
        last_error = c.last_stream_error;
      }
    }
    if (waiting == nullptr) break;
    const std::string& refused_run = waiting->run;
    const bool late = std::chrono::steady_clock::now() >= give_up;
    const timespec tick{0, 20'000'000};
    const int sig = refused.empty() && !late ? sigtimedwait(&signals, nullptr, &tick) : 0;
    if (refused.empty() && !late && sig <= 0) continue;
    if (!refused.empty()) {
      std::cerr << "perlctl: import: perld at " << target << " refused run '" << refused_run
                << "': " << refused << "\n";
    } else if (late) {
      std::cerr << "perlctl: import: perld at " << target << " did not open run '" << refused_run
                << "' within " << connect_timeout_s << " s (--connect-timeout)"
                << (last_error.empty() ? "" : ": " + last_error)
                << ". Start perld or check --target\n";
    } else {
      std::cerr << "perlctl: import: interrupted by signal " << sig
                << " before perld opened the runs\n";
    }
    std::vector<std::string> opened;
    for (Stream* s : active) {
      if (s->client->counters().opened) opened.push_back("'" + s->run + "'");
      s->client->Abandon();
    }
    std::cerr << "perlctl: import: nothing was sent"
              << (opened.empty() ? "" : "; opened without records: " + absl::StrJoin(opened, ", "))
              << "\n";
    return 1;
  }
  for (Stream* s : active) {
    const Counters c = s->client->counters();
    std::cerr << "perlctl: import: " << (c.run_created ? "created" : "joined") << " run "
              << c.run_id << " '" << s->run << "' at " << target << "\n";
  }

  std::atomic<bool> done{false};
  std::atomic<bool> stop{false};
  std::atomic<int> interrupted{0};
  std::atomic<bool> stalled{false};
  std::thread watcher([&] {
    const timespec tick{0, 50'000'000};
    const auto patience = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(timeout_s));
    std::vector<uint64_t> acked(active.size(), 0);
    auto progressed_at = std::chrono::steady_clock::now();
    while (!done.load(std::memory_order_relaxed)) {
      const int sig = sigtimedwait(&signals, nullptr, &tick);
      if (sig > 0) {
        interrupted.store(sig, std::memory_order_relaxed);
        stop.store(true, std::memory_order_relaxed);
        for (Stream* s : active) s->client->Abandon(kInterruptGrace);
      }
      // A final error (perld refused a run's messages for good): nothing
      // more can be acknowledged, so stop reading.
      for (Stream* s : active) {
        if (!s->client->FinalError().empty()) stop.store(true, std::memory_order_relaxed);
      }
      // perld away (or stuck) for --timeout with messages unacknowledged:
      // give up on it, as an interrupted import, instead of blocking for good.
      bool waiting = false;
      bool progressed = false;
      for (size_t i = 0; i < active.size(); ++i) {
        const Counters c = active[i]->client->counters();
        progressed = progressed || c.acked_sequence != acked[i];
        waiting = waiting || c.messages > c.acked_sequence;
        acked[i] = c.acked_sequence;
      }
      const auto now = std::chrono::steady_clock::now();
      if (progressed || !waiting) {
        progressed_at = now;
      } else if (now - progressed_at > patience && !stalled.load(std::memory_order_relaxed)) {
        stalled.store(true, std::memory_order_relaxed);
        stop.store(true, std::memory_order_relaxed);
        for (Stream* s : active) s->client->Abandon();
      }
    }
  });

  // The send pass.
  const auto t0 = std::chrono::steady_clock::now();
  std::string send_error;
  const bool windows_mode = mode_name == "windows";
  const absl::Status sent = ReadSamples(src, [&](const ImportSample& sample) {
    if (stop.load(std::memory_order_relaxed)) return false;
    Stream& s = streams[static_cast<size_t>(sample.stream)];
    if (s.recorder == nullptr || s.checked - s.sent < sample.records) {
      send_error = "the files changed since they were checked (more records now)";
      return false;
    }
    // A count over 2^31 - 1 (hlog) in several records' timestamps.
    for (int64_t left = sample.records; left > 0;) {
      const auto n = static_cast<int32_t>(std::min<int64_t>(left, INT32_MAX));
      s.recorder->Record(sample.end - sample.latency, sample.end, n, sample.bytes);
      left -= n;
      ++s.since_flush;
    }
    s.sent += sample.records;
    // Windows mode: a report per hlog interval, and at most
    // kMaxRecordsPerReport Record calls (latency/count pairs) in one.
    if (windows_mode && (s.since_flush >= kMaxRecordsPerReport || sample.interval_end)) {
      s.since_flush = 0;
      // Closes the window and waits for its acknowledgement, in short steps
      // so a signal is taken at once (an empty window sends nothing).
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
      for (;;) {
        const FlushResult f = s.client->Flush(std::chrono::milliseconds(200));
        if (f.acked || stop.load(std::memory_order_relaxed)) break;
        if (f.error != "timed out" || std::chrono::steady_clock::now() >= until) {
          send_error = "perld did not acknowledge a window: " + f.error;
          return false;
        }
      }
    }
    return true;
  });
  if (!sent.ok()) {
    send_error = absl::StrCat(sent.message(), " (the file changed since it was checked)");
  }
  bool all_sent = send_error.empty() && !stop.load();
  for (Stream* s : active) all_sent = all_sent && s->sent == s->checked;
  if (send_error.empty() && !stop.load() && !all_sent) {
    send_error = "the files changed since they were checked (fewer records now)";
  }
  if (!send_error.empty()) stop.store(true);
  for (Stream* s : active) {
    s->closed = s->client->Close(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  }
  done.store(true, std::memory_order_relaxed);
  watcher.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool all_acked = all_sent;
  for (Stream* s : active) {
    s->total = s->client->Total();
    s->counters = s->client->counters();
    all_acked = all_acked && s->closed.acked && s->total.records == s->checked &&
                s->counters.acked_records == s->checked;
  }

  int exit_code = all_acked ? 0 : 1;
  if (distribution_out) {
    JsonWriter d;
    d.BeginObject();
    d.Key("format").String(*format);
    d.Key("unit").String(unit_name);
    d.Key("runs").BeginArray();
    for (const Stream* s : active) {
      d.BeginObject();
      d.Key("run").String(s->run);
      if (!s->direction.empty()) d.Key("direction").String(s->direction);
      WriteLocalTotal(s->total, &d);
      d.Key("roundedRecords").Int(s->rounded);
      d.Key("latencies").BeginArray();
      for (const auto& [latency, count] : s->total.latency_counts) {
        d.BeginArray().Int(latency).Int(count).EndArray();
      }
      d.EndArray().EndObject();
    }
    d.EndArray().EndObject();
    std::ofstream out(*distribution_out);
    out << d.str() << "\n";
    if (!out.good()) {
      std::cerr << "perlctl: import: cannot write " << *distribution_out << "\n";
      exit_code = 1;
    }
  }
  // The source's own unit, for the rounding sentence.
  const char* source_unit = src.format == ImportFormat::kFio ? "fio's ns" : "k6's ms";
  if (hlog && !json_output) {
    std::cerr << "perlctl: import: " << hlog_facts.intervals << " interval(s)"
              << (hlog_facts.other_tag_lines > 0
                      ? absl::StrCat(" (", hlog_facts.other_tag_lines,
                                     " of other tags skipped: --tag NAME selects them)")
                      : "")
              << "; the run is bucketed: " << bucketed_reason << "\n";
  }
  if (json_output) {
    JsonWriter j;
    j.BeginObject();
    j.Key("format").String(*format);
    j.Key("files").BeginArray();
    for (const std::string& f : src.files) j.String(f);
    j.EndArray();
    if (src.format == ImportFormat::kK6) j.Key("metric").String(src.metric);
    if (hlog) {
      j.Key("logUnit").String(log_unit_name);
      j.Key("tag").String(src.hlog_tag.value_or(""));
      j.Key("intervals").Int(hlog_facts.intervals);
      j.Key("otherTagIntervals").Int(hlog_facts.other_tag_lines);
      j.Key("bucketedReason").String(bucketed_reason);
    }
    j.Key("mode").String(mode_name);
    j.Key("unit").String(unit_name);
    j.Key("seconds").Double(seconds);
    j.Key("runs").BeginArray();
    for (const Stream* s : active) {
      j.BeginObject();
      j.Key("run").String(s->run);
      if (!s->direction.empty()) j.Key("direction").String(s->direction);
      j.Key("runId").Uint(s->counters.run_id);
      j.Key("runCreated").Bool(s->counters.run_created);
      j.Key("checkedRecords").Int(s->checked);
      j.Key("sentRecords").Int(s->sent);
      j.Key("roundedRecords").Int(s->rounded);
      WriteLocalTotal(s->total, &j);
      j.Key("acked").Bool(s->closed.acked);
      j.Key("ackedRecords").Int(s->counters.acked_records);
      j.Key("unsentRecords").Int(s->counters.unsent_records);
      j.Key("messages").Uint(s->counters.messages);
      j.Key("reconnects").Uint(s->counters.reconnects);
      j.Key("error").String(s->closed.error);
      j.EndObject();
    }
    j.EndArray();
    j.Key("interrupted").Bool(interrupted.load() != 0);
    j.Key("gaveUp").Bool(stalled.load());
    j.Key("error").String(send_error);
    j.EndObject();
    std::cout << j.str() << "\n";
  } else {
    for (const Stream* s : active) {
      std::cout << "perlctl import: run '" << s->run << "' (id " << s->counters.run_id << "), "
                << mode_name << ", " << unit_name << ": " << s->total.records << " records ("
                << s->total.valid << " valid";
      if (s->total.lower_discard + s->total.higher_discard > 0) {
        std::cout << ", " << s->total.lower_discard + s->total.higher_discard
                  << " outside the latency range";
      }
      std::cout << "), ";
      if (hlog) {
        std::cout << "HdrHistogram's bucket values, bucketed";
      } else if (s->rounded == 0) {
        std::cout << "every value exact in " << unit_name;
      } else {
        std::cout << s->rounded << " of them rounded from " << source_unit << " to the nearest "
                  << unit_name << " (halves up)";
      }
      std::cout << "; " << s->counters.acked_records << " acknowledged in " << s->counters.messages
                << " messages";
      if (s->counters.unsent_records > 0) {
        std::cout << ", " << s->counters.unsent_records << " never sent";
      }
      std::cout << "\n";
    }
  }

  const std::string files =
      src.files.size() == 1 ? src.files.front() : absl::StrCat(src.files.size(), " files");
  if (exit_code == 0) return 0;
  if (interrupted.load() != 0) {
    std::cerr << "perlctl: import: interrupted by signal " << interrupted.load() << "\n";
  } else if (stalled.load()) {
    std::cerr << "perlctl: import: perld acknowledged nothing for " << timeout_s
              << " s (--timeout); gave up\n";
  } else if (!send_error.empty()) {
    std::cerr << "perlctl: import: " << send_error << "\n";
  }
  for (const Stream* s : active) {
    if (s->closed.acked && s->counters.acked_records == s->checked) continue;
    std::cerr << "perlctl: import: run '" << s->run << "': " << s->counters.acked_records << " of "
              << s->checked << " records of " << files << " acknowledged"
              << (s->closed.error.empty() ? "" : " (" + s->closed.error + ")") << "\n";
  }
  return 1;
}

}  // namespace perld::perlctl
