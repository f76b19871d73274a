// perlctl: the command line client of a perld daemon.
//
//   perlctl [--target HOST:PORT] [--json] COMMAND ...
//     runs [--state running|finished|failed] [--label KEY=VALUE]... [--wide]
//     show RUN [--kind response|service]
//     percentiles RUN [--p 50,99,99.9] [--scope total|latest] [--method sbk|nearest-rank|hdr]
//                 [--kind response|service]
//     history RUN [--kind response|service]
//     clients RUN [--p 50,99,99.9]
//     watch RUN [--from-start] [--kind response|service]
//     bench [perld bench options] [--name NAME] [--label KEY=VALUE]... [--wait]
//           [--slo EXPR [--abort-on-fail]]
//     stop RUN [--wait]
//     check RUN --slo EXPR [--junit FILE]
//     compare A B [--p LIST] [--fail-if TERMS]
//     export RUN [--format json|csv|hgrm|sbk-csv|hlog] [--out FILE] [--method M]
//     load [perld bench options] [--run NAME] [--mode raw|windows] [--distribution-out FILE]
//     import --format fio|k6|hlog FILE... --run NAME [--mode windows|raw] [--unit ns|us|ms]
//            [--metric NAME] [--tag NAME] [--run-unit U] [--distribution-out FILE]
//     show/history/watch/bench --wait take [--p LIST] [--sbk]
//
// RUN is a run id or a unique run name (a rate-controlled run's name shows
// its response view; --kind picks). Exit status: 0 on success; 1 on a
// server error (printed as "perlctl: <STATUS_NAME>: <message>") or, for
// `bench --wait`, when the run failed; 2 on a usage error.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/perlctl/cli_args.h"
#include "client/perlctl/compare.h"
#include "client/perlctl/distribution_export.h"
#include "client/perlctl/hlog_export.h"
#include "client/perlctl/import_command.h"
#include "client/perlctl/load_command.h"
#include "client/perlctl/run_output.h"
#include "client/perlctl/sbk_csv_export.h"
#include "client/perlctl/window_range.h"
#include "daemon/bench/bench_options.h"
#include "daemon/common/json_writer.h"
#include "daemon/common/slo.h"
#include "perld/v1/perld.grpc.pb.h"
#include "perld/version.h"

namespace perld::perlctl {
namespace {

constexpr char kDefaultTarget[] = "127.0.0.1:9717";

const char* kUsage =
    R"(usage: perlctl [--target HOST:PORT] [--json] [--timeout SECONDS] [security] COMMAND ...
  runs [--state running|finished|failed] [--label KEY=VALUE]... [--wide]
                                               runs with their results (records, seconds,
                                               rate, p50, p99, max); --wide: source, end
                                               time, parameters
  show RUN [--p LIST] [--sbk] [range]          a run, its latest window and its total (and
       [--kind response|service]               a range's exact figures); --kind: a rate-
                                               controlled run's response time (default for
                                               its name; an id names exactly that run) or
                                               service time
  percentiles RUN [--p 50,99,99.9] [--scope total|latest]
              [--windows A-B] [--from T] [--to T] [--warmup D]
              [--method sbk|nearest-rank|hdr] [--kind response|service]
                                               exact percentiles of any set; over a range
                                               of windows (T: RFC 3339 or an offset from
                                               the run's start, 30s, 2m; --warmup D drops
                                               the first D) from their stored distributions;
                                               --method: SBK's index rule (default),
                                               HdrHistogram Java's (nearest-rank) or C's
                                               (hdr) rank
  history RUN [--p LIST] [--sbk] [--kind K]    the run's retained windows
  clients RUN [--p 50,99,99.9]                 each remote client's share of the run
  watch RUN [--from-start] [--p LIST] [--sbk]  each window as it closes, then the total
        [--kind response|service]
  bench [perld bench options] [--name NAME] [--label KEY=VALUE]... [--wait [--p LIST] [--sbk]]
        [--slo EXPR [--abort-on-fail]]
                                               start an in-process PerlBench run; --slo:
                                               perld evaluates EXPR (as check) at every
                                               window and at the end (perlctl show);
                                               --abort-on-fail stops the run once a term
                                               fails for good (invalid=0, max<=X, ...);
                                               --wait then exits 1 unless the SLO passed
  stop RUN [--wait]                            stop a run (its total is kept)
  check RUN --slo EXPR [--junit FILE] [range]  an SLO gate on the run's exact total, e.g.
                                               --slo 'p99<=2ms,p99.9<=5ms,invalid=0,
                                               records>=1000000,rate>=50000' (a bare latency
                                               is in the run's unit); exit 0 when every
                                               term holds, 1 when one does not; --junit
                                               writes a JUnit XML report
  compare A B [--p LIST] [--fail-if TERMS] [range]
                                               two runs' exact totals side by side (B-A and
                                               %); --fail-if 'p99>+5%,max>+2ms,rate<-10%'
                                               exits 1 when B passes a limit
                                               [range]: --windows/--from/--to/--warmup as
                                               for percentiles (each run's own windows)
  export RUN [--format json|csv|hgrm|sbk-csv|hlog] [--out FILE] [range]
             [--method sbk|nearest-rank|hdr] [--kind response|service]
                                               an ended run's exact total distribution (or
                                               a range's, running runs too): [latency,
                                               count] pairs or HdrHistogram's percentile
                                               text (a row per distinct latency; with
                                               --method, HdrHistogram's ladder of levels,
                                               each value exact by that rule); sbk-csv: the ended run's retained
                                               windows and total in SBK's CSV layout, as
                                               csvDir writes them (no range); hlog: its
                                               retained windows as an HdrHistogram log
                                               (HistogramLogProcessor's input; exact below
                                               2^18 units, stderr says what is not)
  load [perld bench options] [--run NAME] [--mode raw|windows] [--distribution-out FILE]
       [--name CLIENT] [--label KEY=VALUE]... [--spool DIR [--spool-mode batched|synced]]
       [--join | --new] [--connect-timeout SECONDS] [--slo EXPR [--abort-on-fail]]
                                               generate load here, stream it to the daemon;
                                               without --spool it first waits up to
                                               --connect-timeout (5 s) for perld to open
                                               the run and exits 1 if it does not; --join:
                                               only a running run of NAME, --new: only a
                                               new one; --slo as for bench (the run it
                                               creates; joining needs the same or none)
  import --format fio|k6|hlog FILE... --run NAME [--mode windows|raw] [--unit ns|us|ms]
         [--metric NAME] [--tag NAME] [--run-unit ns|us|ms] [--distribution-out FILE]
         [--name CLIENT] [--label KEY=VALUE]...
         [--join | --new] [--connect-timeout SECONDS]
                                               stream fio latency logs (log_avg_msec=0;
                                               one run per direction: NAME-read, ...) or
                                               k6 JSON output (--metric, a trend of time,
                                               default http_req_duration) into perld, one
                                               record per I/O or sample, exactly in --unit
                                               (default ns; a value with more digits is
                                               rounded, halves up, and counted), or
                                               HdrHistogram interval logs (hlog: --unit is
                                               the log's; each count at its bucket's highest
                                               equivalent value; the run marked bucketed,
                                               exact false); files are
                                               checked whole first (exit 2, no run opened);
                                               import --help lists every option
Windows print as a few lines each: counts and rates, latency min/avg/max, then a
percentile ladder (--p 50,99,99.9 or p99 spelling: only those; 0 is the minimum, 100 the
maximum; `show --p` asks the daemon for any percentile exactly); --sbk prints SBK's
one-line form instead.
RUN is a run id or a unique run name. --target defaults to $PERLD_TARGET or 127.0.0.1:9717
(unix:PATH for a Unix socket). --json prints stable JSON (one object per line for watch).
Security (README "Security"): --token-file FILE (default $PERLD_TOKEN_FILE) sends its token
on every call; --tls, --ca-file PEM (the daemon's CA; implies --tls), --cert-file PEM and
--key-file PEM (a client certificate for mutual TLS). Token and key files must grant nothing
to others.
Exit status: 0 success; 1 server error (or, with bench --wait, a failed run or an SLO not
met); 2 usage error.
)";

int ServerError(const grpc::Status& status) {
  std::cerr << "perlctl: "
            << absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())) << ": "
            << status.error_message() << "\n";
  return 1;
}

// Command-line state shared by every command.
struct Cli {
  std::string target;
  client::ChannelSecurity security;
  bool json = false;
  double timeout_s = 10;
  bool timeout_given = false;
  std::string command;
  std::vector<std::string> args;  // the command's own arguments
  std::unique_ptr<v1::Query::Stub> query;
  std::unique_ptr<v1::Control::Stub> control;

  void Deadline(grpc::ClientContext* context) const {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  }
};

// The string a global option with a value sets ("--target", "--token-file",
// ...), or null for any other name.
std::string* GlobalValue(Cli* cli, const std::string& option) {
  if (option == "--target") return &cli->target;
  if (option == "--token-file") return &cli->security.token_file;
  if (option == "--ca-file") return &cli->security.ca_file;
  if (option == "--cert-file") return &cli->security.cert_file;
  if (option == "--key-file") return &cli->security.key_file;
  return nullptr;
}

std::map<std::string, std::string> TakeLabels(std::vector<std::string>* args) {
  std::map<std::string, std::string> labels;
  for (const std::string& kv : TakeValues(args, "label")) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError{"--label needs KEY=VALUE: " + kv};
    labels[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return labels;
}

// The single positional RUN argument of a command.
std::string TakeRun(std::vector<std::string>* args, const std::string& command) {
  if (args->empty()) throw UsageError{command + " needs RUN (an id or a unique name)"};
  std::string run = args->front();
  if (!run.empty() && run[0] == '-') throw UsageError{"unknown option '" + run + "'"};
  args->erase(args->begin());
  return run;
}

void NoMoreArgs(const std::vector<std::string>& args) {
  if (!args.empty()) throw UsageError{"unexpected argument '" + args.front() + "'"};
}

void PrintJson(const JsonWriter& json) { std::cout << json.str() << "\n" << std::flush; }

int Runs(Cli& cli) {
  v1::ListRunsRequest request;
  if (std::optional<std::string> state = TakeOne(&cli.args, "state")) {
    if (*state == "running") {
      request.set_state(v1::RUN_STATE_RUNNING);
    } else if (*state == "finished") {
      request.set_state(v1::RUN_STATE_FINISHED);
    } else if (*state == "failed") {
      request.set_state(v1::RUN_STATE_FAILED);
    } else {
      throw UsageError{"--state must be running, finished or failed"};
    }
  }
  for (const auto& [k, v] : TakeLabels(&cli.args)) (*request.mutable_labels())[k] = v;
  const bool wide = TakeFlag(&cli.args, "wide");
  NoMoreArgs(cli.args);
  request.set_with_totals(true);
  // Every page, in order: each response holds at most a page of runs.
  v1::ListRunsResponse response;
  for (;;) {
    grpc::ClientContext context;
    cli.Deadline(&context);
    v1::ListRunsResponse page;
    if (grpc::Status s = cli.query->ListRuns(&context, request, &page); !s.ok()) {
      return ServerError(s);
    }
    for (v1::RunInfo& run : *page.mutable_runs()) *response.add_runs() = std::move(run);
    for (v1::Window& total : *page.mutable_totals()) *response.add_totals() = std::move(total);
    // A token that does not move on would repeat the page: stop there.
    if (page.next_page_token().empty() || page.next_page_token() == request.page_token()) break;
    request.set_page_token(page.next_page_token());
  }
  if (cli.json) {
    JsonWriter json;
    json.BeginObject().Key("runs").BeginArray();
    for (int i = 0; i < response.runs_size(); ++i) {
      json.BeginObject();
      WriteRunJson(response.runs(i), json);
      // A daemon that predates totals in ListRuns sends none.
      if (i < response.totals_size() && response.totals(i).kind() == v1::Window::KIND_TOTAL) {
        json.Key("total");
        WriteWindowJson(response.totals(i), json);
      }
      json.EndObject();
    }
    json.EndArray().EndObject();
    PrintJson(json);
  } else {
    std::cout << RunsTable(response, wide);
  }
  return 0;
}

// --p 50,99,99.9 or p50,p99,p99.9; 0 is the minimum, 100 the maximum
// (none: the run's own percentiles).
std::vector<double> TakePercentList(Cli& cli) {
  std::vector<double> out;
  if (std::optional<std::string> list = TakeOne(&cli.args, "p")) {
    for (absl::string_view part : absl::StrSplit(*list, ',', absl::SkipWhitespace())) {
      part = absl::StripAsciiWhitespace(part);
      if (absl::StartsWithIgnoreCase(part, "p")) part.remove_prefix(1);
      double p = 0;
      if (!absl::SimpleAtod(part, &p)) {
        throw UsageError{"--p: '" + std::string(part) + "' is not a number"};
      }
      out.push_back(p);
    }
  }
  return out;
}

template <typename Request>
void TakePercents(Cli& cli, Request* request) {
  for (double p : TakePercentList(cli)) request->add_percentiles(p);
}

// --sbk (SBK's one-line window) and --p LIST (which percentiles to show).
WindowFormat TakeFormat(Cli& cli) {
  WindowFormat format;
  format.sbk = TakeFlag(&cli.args, "sbk");
  format.percents = TakePercentList(cli);
  return format;
}

// Replaces `window`'s percentiles by exactly `percents` of `scope` (show --p).
// `--method sbk|nearest-rank|hdr` (latency_percentiles.h), if given.
std::optional<PercentileMethod> TakeMethod(Cli& cli) {
  const std::optional<std::string> name = TakeOne(&cli.args, "method");
  if (!name) return std::nullopt;
  absl::StatusOr<PercentileMethod> method = ParsePercentileMethod(*name);
  if (!method.ok()) throw UsageError{"--" + std::string(method.status().message())};
  return *method;
}

// `--kind response|service` (issue 30), if given: which latency of a
// rate-controlled run's operations to show (default: response).
v1::LatencyKind TakeKind(Cli& cli) {
  const std::optional<std::string> kind = TakeOne(&cli.args, "kind");
  if (!kind) return v1::LATENCY_KIND_UNSPECIFIED;
  if (*kind == "response") return v1::LATENCY_KIND_RESPONSE;
  if (*kind == "service") return v1::LATENCY_KIND_SERVICE;
  throw UsageError{"--kind must be response or service"};
}

v1::PercentileMethod ToProto(PercentileMethod method) {
  switch (method) {
    case PercentileMethod::kSbk:
      return v1::PERCENTILE_METHOD_SBK;
    case PercentileMethod::kNearestRank:
      return v1::PERCENTILE_METHOD_NEAREST_RANK;
    case PercentileMethod::kHdr:
      return v1::PERCENTILE_METHOD_HDR;
  }
  return v1::PERCENTILE_METHOD_SBK;
}

grpc::Status AskPercentiles(Cli& cli, uint64_t run, v1::GetPercentilesRequest::Scope scope,
                            const std::vector<double>& percents, v1::Window* window) {
  v1::GetPercentilesRequest request;
  request.set_run(std::to_string(run));
  request.set_scope(scope);
  for (double p : percents) request.add_percentiles(p);
  grpc::ClientContext context;
  cli.Deadline(&context);
  v1::GetPercentilesResponse answer;
  if (grpc::Status s = cli.query->GetPercentiles(&context, request, &answer); !s.ok()) return s;
  *window->mutable_percentiles() = answer.percentiles();
  window->set_median_latency(answer.median_latency());
  return grpc::Status::OK;
}

// --windows, --from, --to, --warmup (window_range.h); nullopt when none given.
std::optional<WindowRangeOptions> TakeWindowRange(Cli& cli) {
  const auto usage = [](const absl::Status& s) { return UsageError{std::string(s.message())}; };
  std::optional<WindowRangeOptions> range;
  if (std::optional<std::string> numbers = TakeOne(&cli.args, "windows")) {
    absl::StatusOr<WindowRangeOptions> parsed = ParseWindowNumbers(*numbers);
    if (!parsed.ok()) throw usage(parsed.status());
    range = *parsed;
  }
  std::optional<std::string> from = TakeOne(&cli.args, "from");
  const std::optional<std::string> warmup = TakeOne(&cli.args, "warmup");
  if (from && warmup) throw UsageError{"--warmup D is --from D: give one of them"};
  if (warmup) {
    absl::StatusOr<int64_t> offset = ParseOffsetMs(*warmup);
    if (!offset.ok()) throw UsageError{absl::StrCat("--warmup: ", offset.status().message())};
    from = absl::StrCat(*offset, "ms");
  }
  for (auto [name, text] : {std::pair<const char*, std::optional<std::string>>{"from", from},
                            {"to", TakeOne(&cli.args, "to")}}) {
    if (!text) continue;
    absl::StatusOr<RangeTime> t = ParseRangeTime(*text);
    if (!t.ok()) throw UsageError{absl::StrCat("--", name, ": ", t.status().message())};
    if (!range) range = WindowRangeOptions{};
    (std::string_view(name) == "from" ? range->from : range->to) = *t;
  }
  return range;
}

// The range as the daemon takes it: offsets resolved against the run's start.
v1::WindowRange ToWindowRange(const WindowRangeOptions& r, int64_t run_start_unix_ms) {
  v1::WindowRange out;
  out.set_first_window(r.first_window);
  out.set_last_window(r.last_window);
  // A bound of 0 is open: an instant at the epoch is 1 ms after it.
  if (r.from) out.set_from_unix_ms(std::max<int64_t>(1, r.from->Resolve(run_start_unix_ms)));
  if (r.to) out.set_to_unix_ms(std::max<int64_t>(1, r.to->Resolve(run_start_unix_ms)));
  return out;
}

grpc::Status ResolveRange(Cli& cli, const std::string& run, const WindowRangeOptions& r,
                          v1::WindowRange* out) {
  int64_t start = 0;
  if (r.from || r.to) {  // offsets count from the run's start
    grpc::ClientContext context;
    cli.Deadline(&context);
    v1::GetRunRequest get;
    get.set_run(run);
    v1::GetRunResponse got;
    if (grpc::Status s = cli.query->GetRun(&context, get, &got); !s.ok()) return s;
    start = got.run().start_unix_ms();
  }
  *out = ToWindowRange(r, start);
  return grpc::Status::OK;
}

// A remote run's clients each time their records with their own clock: the
// run's clock line lists them, with how many clients use each, while the
// daemon keeps the run's client breakdown (running and recently ended runs).
void DescribeClientClocks(Cli& cli, v1::RunInfo* run) {
  if (run->source() != v1::RUN_SOURCE_INGEST && run->source() != v1::RUN_SOURCE_SBP) return;
  v1::GetClientsRequest request;
  // A response view's clients are its run's.
  request.set_run(std::to_string(run->service_run() != 0 ? run->service_run() : run->id()));
  grpc::ClientContext context;
  cli.Deadline(&context);
  v1::GetClientsResponse response;
  if (!cli.query->GetClients(&context, request, &response).ok() || response.clients().empty()) {
    return;  // the run's own line (its first client's clock) stands
  }
  std::vector<std::pair<std::string, int>> clocks;  // in the order clients joined
  for (const v1::RemoteClient& c : response.clients()) {
    const std::string clock = c.clock().empty() ? "not reported" : c.clock();
    auto it = std::find_if(clocks.begin(), clocks.end(),
                           [&](const auto& seen) { return seen.first == clock; });
    if (it == clocks.end()) {
      clocks.emplace_back(clock, 1);
    } else {
      ++it->second;
    }
  }
  std::string text = "the clients' own: ";
  for (size_t i = 0; i < clocks.size(); ++i) {
    absl::StrAppend(&text, i == 0 ? "" : "; ", clocks[i].first, " (", clocks[i].second,
                    clocks[i].second == 1 ? " client)" : " clients)");
  }
  run->set_clock(text);
  run->set_clock_resolution_ns(0);  // each clock above carries its own
}

int Show(Cli& cli) {
  v1::GetRunRequest request;
  WindowFormat format = TakeFormat(cli);
  request.set_run(TakeRun(&cli.args, "show"));
  request.set_kind(TakeKind(cli));
  const std::optional<WindowRangeOptions> range = TakeWindowRange(cli);
  NoMoreArgs(cli.args);
  grpc::ClientContext context;
  cli.Deadline(&context);
  v1::GetRunResponse response;
  if (grpc::Status s = cli.query->GetRun(&context, request, &response); !s.ok()) {
    return ServerError(s);
  }
  // --p: any percentile, exactly -- asked of the daemon, not filtered from
  // the run's set -- for the latest window and a total that has them.
  const std::pair<v1::GetPercentilesRequest::Scope, v1::Window*> asked[] = {
      {v1::GetPercentilesRequest::SCOPE_LATEST,
       response.has_latest() ? response.mutable_latest() : nullptr},
      {v1::GetPercentilesRequest::SCOPE_TOTAL,
       response.total().exact_total() ? response.mutable_total() : nullptr}};
  for (const auto& [scope, window] : asked) {
    if (format.percents.empty() || window == nullptr) continue;
    if (grpc::Status s = AskPercentiles(cli, response.run().id(), scope, format.percents, window);
        !s.ok()) {
      return ServerError(s);
    }
  }
  DescribeClientClocks(cli, response.mutable_run());
  // A range: its exact counters and percentiles after the total.
  v1::GetPercentilesResponse in_range;
  if (range) {
    v1::GetPercentilesRequest ask;
    ask.set_run(std::to_string(response.run().id()));
    for (double p : format.percents) ask.add_percentiles(p);
    *ask.mutable_range() = ToWindowRange(*range, response.run().start_unix_ms());
    grpc::ClientContext range_context;
    cli.Deadline(&range_context);
    if (grpc::Status s = cli.query->GetPercentiles(&range_context, ask, &in_range); !s.ok()) {
      return ServerError(s);
    }
  }
  if (cli.json) {
    JsonWriter json;
    json.BeginObject();
    WriteRunJson(response.run(), json);
    json.Key("latest");
    if (response.has_latest()) {
      WriteWindowJson(response.latest(), json);
    } else {
      json.Null();
    }
    json.Key("total");
    WriteWindowJson(response.total(), json);
    json.Key("windowsWithoutDistribution").Int(response.windows_without_distribution());
    json.Key("firstWindowWithoutDistribution").Int(response.first_window_without_distribution());
    if (range) {
      json.Key("range");
      WriteWindowJson(in_range.range(), json);
      json.Key("rangeLastWindow").Int(in_range.last_window());
    }
    json.EndObject();
    PrintJson(json);
  } else {
    std::cout << ShowText(response, format);
    if (range) {
      const std::string title =
          absl::StrCat("windows ", in_range.range().seq(), "-", in_range.last_window(), " (",
                       DescribeRange(*range), ")");
      std::cout << "  range:  "
                << WindowText(in_range.range(), response.run().latency().time_unit(), format, "  ",
                              title);
    }
  }
  return 0;
}

// Every value with its unit; SBK's "99.9th" spelled as --p takes it.
void PrintPercentileLadder(const v1::GetPercentilesResponse& response, const char* unit) {
  for (const v1::Percentile& p : response.percentiles()) {
    std::printf("  %9s  %s  (%lld records at exactly this latency)\n",
                absl::StrCat("p", ShortestDouble(p.percent())).c_str(),
                absl::StrCat(p.latency(), " ", unit).c_str(), static_cast<long long>(p.count()));
  }
}

int Percentiles(Cli& cli) {
  v1::GetPercentilesRequest request;
  request.set_run(TakeRun(&cli.args, "percentiles"));
  request.set_kind(TakeKind(cli));
  TakePercents(cli, &request);
  const std::optional<WindowRangeOptions> range = TakeWindowRange(cli);
  const PercentileMethod method = TakeMethod(cli).value_or(PercentileMethod::kSbk);
  request.set_method(ToProto(method));
  if (std::optional<std::string> scope = TakeOne(&cli.args, "scope")) {
    if (*scope == "total") {
      request.set_scope(v1::GetPercentilesRequest::SCOPE_TOTAL);
    } else if (*scope == "latest") {
      request.set_scope(v1::GetPercentilesRequest::SCOPE_LATEST);
    } else {
      throw UsageError{"--scope must be total or latest"};
    }
  }
  NoMoreArgs(cli.args);
  if (range) {
    if (request.scope() == v1::GetPercentilesRequest::SCOPE_LATEST) {
      throw UsageError{
          "--scope latest and a range (--windows/--from/--to/--warmup) exclude "
          "each other"};
    }
    if (grpc::Status s = ResolveRange(cli, request.run(), *range, request.mutable_range());
        !s.ok()) {
      return ServerError(s);
    }
  }
  grpc::ClientContext context;
  cli.Deadline(&context);
  v1::GetPercentilesResponse response;
  if (grpc::Status s = cli.query->GetPercentiles(&context, request, &response); !s.ok()) {
    return ServerError(s);
  }
  const bool latest = request.scope() == v1::GetPercentilesRequest::SCOPE_LATEST;
  if (cli.json) {
    JsonWriter json;
    json.BeginObject();
    json.Key("run").Uint(response.run_id());
    json.Key("kind").String(response.kind() == v1::LATENCY_KIND_RESPONSE ? "response" : "service");
    json.Key("scope").String(range ? "range" : latest ? "latest" : "total");
    json.Key("method").String(PercentileMethodName(method));
    if (range) {
      // The windows merged and their counters (records, min, max, avg, ...).
      json.Key("firstWindow").Int(response.range().seq());
      json.Key("lastWindow").Int(response.last_window());
      json.Key("windows").Int(response.windows());
      json.Key("range");
      WriteWindowJson(response.range(), json);
    }
    json.Key("final").Bool(response.final());
    json.Key("exact").Bool(response.exact());
    if (response.bucketed()) {  // percentiles of bucketed values: given, not exact
      json.Key("bucketed").Bool(true);
      json.Key("inexactReason").String(response.inexact_reason());
    }
    json.Key("validLatencyRecords").Int(response.valid_latency_records());
    json.Key("timeUnit").String(TimeUnitText(response.time_unit()));
    // No percentile (never one from part of the run) unless bucketed.
    if (!response.exact() && !response.bucketed()) {
      json.Key("medianLatency").Null();
      json.Key("percentiles").Null();
      json.Key("percentileCounts").Null();
      json.Key("inexactReason").String(response.inexact_reason());
      json.EndObject();
      PrintJson(json);
      return 1;
    }
    json.Key("medianLatency").Int(response.median_latency());
    json.Key("percentiles").BeginObject();
    for (const v1::Percentile& p : response.percentiles()) {
      json.Key(ShortestDouble(p.percent())).Int(p.latency());
    }
    json.EndObject();
    json.Key("percentileCounts").BeginObject();
    for (const v1::Percentile& p : response.percentiles()) {
      json.Key(ShortestDouble(p.percent())).Int(p.count());
    }
    json.EndObject().EndObject();
    PrintJson(json);
  } else if (range) {
    const v1::Window& w = response.range();
    std::printf("run %llu, windows %lld-%lld (%s; %s to %s, %.2f s): %lld records, %lld valid\n",
                static_cast<unsigned long long>(response.run_id()), static_cast<long long>(w.seq()),
                static_cast<long long>(response.last_window()), DescribeRange(*range).c_str(),
                UtcTime(w.start_unix_ms()).c_str(), UtcTime(w.end_unix_ms()).c_str(), w.seconds(),
                static_cast<long long>(w.records()),
                static_cast<long long>(response.valid_latency_records()));
    const char* unit = TimeUnitText(response.time_unit());
    std::printf("  latency: min %lld %s, avg %.1f %s, max %lld %s\n",
                static_cast<long long>(w.min_latency()), unit, w.avg_latency(), unit,
                static_cast<long long>(w.max_latency()), unit);
    if (method != PercentileMethod::kSbk) {
      std::printf("  percentiles by method %s\n", PercentileMethodName(method));
    }
    if (response.bucketed()) std::printf("  not exact: %s\n", response.inexact_reason().c_str());
    PrintPercentileLadder(response, unit);
  } else {
    std::printf("run %llu%s, %s%s, %lld valid latency records%s\n",
                static_cast<unsigned long long>(response.run_id()),
                response.kind() == v1::LATENCY_KIND_RESPONSE ? " (response time)" : "",
                latest ? "latest window" : "total", latest || response.final() ? "" : " (running)",
                static_cast<long long>(response.valid_latency_records()),
                method == PercentileMethod::kSbk
                    ? ""
                    : absl::StrCat(" (method ", PercentileMethodName(method), ")").c_str());
    if (!response.exact() && !response.bucketed()) {
      std::printf("  %s\n", response.inexact_reason().c_str());
      return 1;
    }
    if (response.bucketed()) std::printf("  not exact: %s\n", response.inexact_reason().c_str());
    const char* unit = TimeUnitText(response.time_unit());
    PrintPercentileLadder(response, unit);
  }
  return 0;
}

int Clients(Cli& cli) {
  v1::GetClientsRequest request;
  request.set_run(TakeRun(&cli.args, "clients"));
  TakePercents(cli, &request);
  NoMoreArgs(cli.args);
  grpc::ClientContext context;
  cli.Deadline(&context);
  v1::GetClientsResponse response;
  if (grpc::Status s = cli.query->GetClients(&context, request, &response); !s.ok()) {
    return ServerError(s);
  }
  if (cli.json) {
    JsonWriter json;
    json.BeginObject();
    json.Key("run").Uint(response.run_id());
    json.Key("breakdownBytes").Int(response.breakdown_bytes());
    json.Key("breakdownLimitBytes").Int(response.breakdown_limit_bytes());
    json.Key("clients").BeginArray();
    for (const v1::RemoteClient& c : response.clients()) {
      json.BeginObject();
      json.Key("clientId").String(c.client_id());
      json.Key("clientName").String(c.client_name());
      json.Key("clock").String(c.clock());
      json.Key("mode").String(c.mode());
      json.Key("state").String(c.state());
      json.Key("ackedSequence").Uint(c.acked_sequence());
      json.Key("duplicates").Uint(c.duplicates());
      json.Key("reports").Int(c.reports());
      json.Key("timestamps").Int(c.timestamps());
      json.Key("records").Int(c.records());
      json.Key("bytes").Int(c.bytes());
      json.Key("validLatencyRecords").Int(c.valid_latency_records());
      json.Key("invalidLatencyRecords").Int(c.invalid_latency_records());
      json.Key("lowerLatencyDiscardRecords").Int(c.lower_latency_discard_records());
      json.Key("higherLatencyDiscardRecords").Int(c.higher_latency_discard_records());
      json.Key("minLatency").Int(c.min_latency());
      json.Key("maxLatency").Int(c.max_latency());
      json.Key("totalLatency").Int(c.total_latency());
      json.Key("exact").Bool(c.exact());
      json.Key("lastReportUnixMs").Int(c.last_report_unix_ms());
      json.Key("percentiles").BeginObject();
      for (const v1::Percentile& p : c.percentiles()) {
        json.Key(ShortestDouble(p.percent())).Int(p.latency());
      }
      json.EndObject().EndObject();
    }
    json.EndArray().EndObject();
    PrintJson(json);
    return 0;
  }
  std::printf("run %llu: %d client(s); breakdown memory %lld of %lld bytes\n",
              static_cast<unsigned long long>(response.run_id()), response.clients_size(),
              static_cast<long long>(response.breakdown_bytes()),
              static_cast<long long>(response.breakdown_limit_bytes()));
  std::printf("%-24s %-16s %-7s %-9s %8s %12s  %s\n", "CLIENT", "NAME", "MODE", "STATE", "REPORTS",
              "RECORDS", "PERCENTILES");
  for (const v1::RemoteClient& c : response.clients()) {
    std::string percentiles;
    for (const v1::Percentile& p : c.percentiles()) {
      percentiles += ShortestDouble(p.percent()) + "th " + std::to_string(p.latency()) + "  ";
    }
    if (!c.exact()) {
      percentiles = c.mode() == "raw" ? "(raw client: records only)"
                                      : "(distribution over the breakdown budget: counters only)";
    }
    std::printf("%-24s %-16s %-7s %-9s %8lld %12lld  %s\n", c.client_id().c_str(),
                c.client_name().c_str(), c.mode().c_str(), c.state().c_str(),
                static_cast<long long>(c.reports()), static_cast<long long>(c.records()),
                percentiles.c_str());
    std::printf("  clock: %s\n", c.clock().empty() ? "not reported" : c.clock().c_str());
  }
  return 0;
}

int History(Cli& cli) {
  v1::GetWindowHistoryRequest request;
  const WindowFormat format = TakeFormat(cli);
  request.set_run(TakeRun(&cli.args, "history"));
  request.set_kind(TakeKind(cli));
  NoMoreArgs(cli.args);
  grpc::ClientContext context;
  cli.Deadline(&context);
  v1::GetWindowHistoryResponse response;
  if (grpc::Status s = cli.query->GetWindowHistory(&context, request, &response); !s.ok()) {
    return ServerError(s);
  }
  v1::TimeUnit unit = v1::TIME_UNIT_UNSPECIFIED;
  {
    grpc::ClientContext ctx;
    cli.Deadline(&ctx);
    v1::GetRunRequest get;
    get.set_run(std::to_string(response.run_id()));
    v1::GetRunResponse run;
    if (grpc::Status s = cli.query->GetRun(&ctx, get, &run); s.ok()) {
      unit = run.run().latency().time_unit();
    }
  }
  if (cli.json) {
    JsonWriter json;
    json.BeginObject().Key("run").Uint(response.run_id()).Key("windows").BeginArray();
    for (const v1::Window& w : response.windows()) WriteWindowJson(w, json);
    json.EndArray().EndObject();
    PrintJson(json);
  } else {
    for (const v1::Window& w : response.windows()) std::cout << WindowText(w, unit, format);
  }
  return 0;
}

// A bench run's goal, read back from its parameters (perld writes them in
// `perld bench` options); unknown for other runs.
RunGoal GoalOf(const v1::RunInfo& run) {
  if (run.source() != v1::RUN_SOURCE_BENCH) return {};
  const std::vector<std::string> args = absl::StrSplit(run.parameters(), ' ', absl::SkipEmpty());
  absl::StatusOr<bench::BenchOptions> o = bench::ParseBenchArgs(args);
  if (!o.ok()) return {};
  return RunGoal{o->records, o->seconds};
}

// GetRun of `run` (an id or a name) for `kind` (LatencyKind: a
// rate-controlled run's name shows its response view).
grpc::Status GetRunOfKind(Cli& cli, const std::string& run, v1::LatencyKind kind,
                          v1::GetRunResponse* out) {
  v1::GetRunRequest get;
  get.set_run(run);
  get.set_kind(kind);
  grpc::ClientContext context;
  cli.Deadline(&context);
  return cli.query->GetRun(&context, get, out);
}

// Streams a run's windows until its total; returns the final total. Human
// output follows each interval window of a bench run with its progress.
int Watch(Cli& cli, const std::string& run, bool from_start, const WindowFormat& format,
          v1::Window* total, v1::LatencyKind kind = v1::LATENCY_KIND_UNSPECIFIED) {
  v1::GetRunResponse info;
  if (grpc::Status s = GetRunOfKind(cli, run, kind, &info); !s.ok()) return ServerError(s);
  const v1::TimeUnit unit = info.run().latency().time_unit();
  const RunGoal goal = GoalOf(info.run());
  // Records so far: the running total as the watch starts (its windows are
  // not sent again), then each new interval window's.
  int64_t done = from_start ? 0 : info.total().records();
  v1::WatchRunRequest request;
  request.set_run(std::to_string(info.run().id()));
  request.set_from_start(from_start);
  grpc::ClientContext context;  // no deadline: a watch lasts as long as the run
  std::unique_ptr<grpc::ClientReader<v1::WatchRunResponse>> reader =
      cli.query->WatchRun(&context, request);
  v1::WatchRunResponse event;
  while (reader->Read(&event)) {
    if (event.skipped() > 0 && !cli.json) {
      std::cout << "(" << event.skipped() << " windows skipped: beyond the retained history)\n";
    }
    if (cli.json) {
      JsonWriter json;
      WriteWindowJson(event.window(), json, &info.run());
      PrintJson(json);
    } else {
      const v1::Window& w = event.window();
      std::string text = WindowText(w, unit, format);
      if (w.kind() == v1::Window::KIND_PERIODIC) {
        done += w.records();
        absl::StrAppend(
            &text,
            ProgressText(goal, done,
                         static_cast<double>(w.end_unix_ms() - info.run().start_unix_ms()) / 1e3));
      }
      std::cout << text << std::flush;
    }
    if (event.window().kind() == v1::Window::KIND_TOTAL && total != nullptr) {
      *total = event.window();
    }
  }
  if (grpc::Status s = reader->Finish(); !s.ok()) return ServerError(s);
  return 0;
}

int WatchCommand(Cli& cli) {
  const bool from_start = TakeFlag(&cli.args, "from-start");
  const WindowFormat format = TakeFormat(cli);
  const std::string run = TakeRun(&cli.args, "watch");
  const v1::LatencyKind kind = TakeKind(cli);
  NoMoreArgs(cli.args);
  return Watch(cli, run, from_start, format, nullptr, kind);
}

v1::TimeUnit ToProtoUnit(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kMs:
      return v1::TIME_UNIT_MS;
    case TimeUnit::kUs:
      return v1::TIME_UNIT_US;
    case TimeUnit::kNs:
      return v1::TIME_UNIT_NS;
  }
  return v1::TIME_UNIT_UNSPECIFIED;
}

int Bench(Cli& cli) {
  v1::StartBenchRequest request;
  if (std::optional<std::string> name = TakeOne(&cli.args, "name")) request.set_name(*name);
  for (const auto& [k, v] : TakeLabels(&cli.args)) (*request.mutable_labels())[k] = v;
  const bool wait = TakeFlag(&cli.args, "wait");
  const WindowFormat format = TakeFormat(cli);  // how --wait prints the windows
  if (std::optional<std::string> slo = TakeOne(&cli.args, "slo")) {
    if (absl::StatusOr<std::vector<SloTerm>> terms = ParseSlo(*slo); !terms.ok()) {
      throw UsageError{"bench: --slo: " + std::string(terms.status().message())};
    }
    request.mutable_slo()->set_expression(*slo);
  }
  request.mutable_slo()->set_abort_on_fail(TakeFlag(&cli.args, "abort-on-fail"));
  if (request.slo().abort_on_fail() && request.slo().expression().empty()) {
    throw UsageError{"bench: --abort-on-fail needs --slo EXPR"};
  }
  // Options of `perld bench` that belong to a local process, not a daemon run.
  static const std::set<std::string> kLocalOnly = {"csvfile", "context", "progress", "idleNS"};
  std::set<std::string> given;
  for (const std::string& a : cli.args) {
    if (a.size() > 1 && a[0] == '-') {
      std::string name = a.substr(a[1] == '-' ? 2 : 1);
      name = name.substr(0, name.find('='));
      if (kLocalOnly.count(name) > 0) {
        throw UsageError{"bench: -" + name +
                         " applies to a local `perld bench` only; query the daemon's run instead"};
      }
      given.insert(name);
    }
  }
  absl::StatusOr<bench::BenchOptions> parsed = bench::ParseBenchArgs(cli.args);
  if (!parsed.ok()) throw UsageError{"bench: " + std::string(parsed.status().message())};
  if (parsed->help) {
    std::cout << bench::BenchUsage();
    return 0;
  }
  const bench::BenchOptions& o = *parsed;
  v1::BenchOptions* out = request.mutable_options();
  out->set_writers(o.writers);
  out->set_readers(o.readers);
  out->set_size(o.size);
  out->set_records(o.records);
  out->set_seconds(o.seconds);
  out->set_throughput_mbps(o.throughput_mbps);
  // Unset options take the daemon's configuration (its timeUnit, range, ...).
  if (given.count("time")) out->set_time_unit(ToProtoUnit(o.time_unit));
  if (given.count("minlatency")) out->set_min_latency(*o.min_latency);
  if (given.count("maxlatency")) out->set_max_latency(*o.max_latency);
  if (given.count("mpscqueue")) out->set_mpscqueue(o.channels.queue == QueueKind::kMpsc);
  if (given.count("maxQs")) out->set_max_qs(o.channels.max_qs);
  if (given.count("qPerWorker")) out->set_q_per_worker(o.channels.q_per_worker);
  if (given.count("maxPendingPerWorker")) {
    out->set_max_pending_per_worker(static_cast<int64_t>(o.channels.max_pending_per_worker));
  }
  if (given.count("overflow")) {
    out->set_overflow(o.channels.overflow == OverflowPolicy::kBlock ? v1::OVERFLOW_BLOCK
                                                                    : v1::OVERFLOW_DROP);
  }
  if (given.count("interval")) out->set_reporting_interval_ms(o.interval_ms);
  if (given.count("clock")) {
    out->set_clock(o.clock == ClockSource::kTsc         ? v1::BENCH_CLOCK_TSC
                   : o.clock == ClockSource::kMonotonic ? v1::BENCH_CLOCK_MONOTONIC
                                                        : v1::BENCH_CLOCK_AUTO);
  }
  out->set_warmup_ms(o.warmup_ms);
  if (given.count("catchup")) {
    out->set_catchup(o.catchup == bench::Catchup::kSkip ? v1::BENCH_CATCHUP_SKIP
                                                        : v1::BENCH_CATCHUP_BURST);
  }
  if (given.count("lateUs")) out->set_late_us(o.late_us);

  grpc::ClientContext context;
  cli.Deadline(&context);
  v1::StartBenchResponse response;
  if (grpc::Status s = cli.control->StartBench(&context, request, &response); !s.ok()) {
    return ServerError(s);
  }
  if (!wait) {
    if (cli.json) {
      JsonWriter json;
      json.BeginObject();
      WriteRunJson(response.run(), json);
      json.EndObject();
      PrintJson(json);
    } else {
      std::cout << "run " << response.run_id() << " started\n";
    }
    return 0;
  }
  if (!cli.json) std::cout << "run " << response.run_id() << " started\n" << std::flush;
  v1::Window total;
  // A rate-controlled run's windows as response time (its default view);
  // the last JSON line and the verdict are the run's own.
  const v1::LatencyKind shown =
      response.run().response_run() != 0 ? v1::LATENCY_KIND_RESPONSE : v1::LATENCY_KIND_UNSPECIFIED;
  if (int rc = Watch(cli, std::to_string(response.run_id()), true, format, &total, shown);
      rc != 0) {
    return rc;
  }
  if (shown == v1::LATENCY_KIND_RESPONSE) {
    // The watched response view ends just before its run (the daemon closes
    // the view's total first): watch the run itself to its end too, so the
    // last line and the exit status are the ended run's. WatchRun of an
    // ended run sends its total and ends.
    grpc::ClientContext ctx;  // no deadline: it ends with the run
    v1::WatchRunRequest watch;
    watch.set_run(std::to_string(response.run_id()));
    std::unique_ptr<grpc::ClientReader<v1::WatchRunResponse>> reader =
        cli.query->WatchRun(&ctx, watch);
    v1::WatchRunResponse event;
    while (reader->Read(&event)) {
    }
    if (grpc::Status s = reader->Finish(); !s.ok()) return ServerError(s);
  }
  grpc::ClientContext ctx;
  cli.Deadline(&ctx);
  v1::GetRunRequest get;
  get.set_run(std::to_string(response.run_id()));
  v1::GetRunResponse run;
  if (grpc::Status s = cli.query->GetRun(&ctx, get, &run); !s.ok()) return ServerError(s);
  if (cli.json) {  // the last line: the run as it ended, with its total
    JsonWriter json;
    json.BeginObject();
    WriteRunJson(run.run(), json);
    json.Key("total");
    WriteWindowJson(run.total(), json);
    json.EndObject();
    PrintJson(json);
  }
  if (run.run().state() == v1::RUN_STATE_FAILED) {
    std::cerr << "perlctl: run " << run.run().id() << " failed: " << run.run().failure_reason()
              << "\n";
    return 1;
  }
  // A run started with --slo: its verdict on the final total decides the exit code.
  if (!run.run().slo().expression().empty()) {
    if (!cli.json) std::cout << SloText(run.run());
    if (run.run().slo_status().state() != v1::SloStatus::STATE_PASSED) {
      std::cerr << "perlctl: run " << run.run().id() << " did not meet its SLO '"
                << run.run().slo().expression() << "'\n";
      return 1;
    }
  }
  return 0;
}

// The facts SLO terms and compare read from a total or a range's window.
void SetCounterFacts(const v1::Window& w, SloFacts* facts) {
  facts->records = w.records();
  facts->valid = w.valid_latency_records();
  facts->invalid = w.invalid_latency_records();
  facts->min = w.min_latency();
  facts->max = w.max_latency();
  facts->avg = w.avg_latency();
  facts->rate = w.records_per_second();
}

// A run's exact total -- or, with `range`, the exact answer over those
// windows (a range that cannot be answered exactly is an error) -- as SLO
// terms and compare read it, with `percents` asked of the daemon (a total
// without them says why in no_percentiles).
grpc::Status FetchFacts(Cli& cli, const std::string& run, const std::vector<double>& percents,
                        const std::optional<WindowRangeOptions>& range, v1::GetRunResponse* view,
                        SloFacts* facts) {
  v1::GetRunRequest get;
  get.set_run(run);
  {
    grpc::ClientContext context;
    cli.Deadline(&context);
    if (grpc::Status s = cli.query->GetRun(&context, get, view); !s.ok()) return s;
  }
  const v1::TimeUnit unit = view->run().latency().time_unit();
  facts->unit_ns = NanosPerUnit(unit == v1::TIME_UNIT_MS   ? TimeUnit::kMs
                                : unit == v1::TIME_UNIT_US ? TimeUnit::kUs
                                                           : TimeUnit::kNs);
  facts->unit = TimeUnitText(view->run().latency().time_unit());
  SetCounterFacts(view->total(), facts);
  if (percents.empty() && !range) return grpc::Status::OK;
  v1::GetPercentilesRequest ask;
  ask.set_run(std::to_string(view->run().id()));
  for (double p : percents) ask.add_percentiles(p);
  if (range) *ask.mutable_range() = ToWindowRange(*range, view->run().start_unix_ms());
  grpc::ClientContext context;
  cli.Deadline(&context);
  v1::GetPercentilesResponse answer;
  grpc::Status asked = cli.query->GetPercentiles(&context, ask, &answer);
  if (range) {
    if (!asked.ok()) return asked;
    SetCounterFacts(answer.range(), facts);
    *view->mutable_total() = answer.range();  // what the caller shows as the total
  }
  if (percents.empty()) return grpc::Status::OK;
  if (grpc::Status s = asked; !s.ok()) {
    facts->no_percentiles = s.error_message();
  } else if (!answer.exact() && !answer.bucketed()) {
    facts->no_percentiles = answer.inexact_reason();
  } else if (answer.valid_latency_records() == 0) {
    facts->no_percentiles = "the run has no latency yet";
  } else {
    for (const v1::Percentile& p : answer.percentiles())
      facts->percentiles[p.percent()] = p.latency();
  }
  return grpc::Status::OK;
}

// `check RUN --slo EXPR [--junit FILE]`: the run's exact total against
// each term (slo.h); exit 0 when every term holds, 1 when one does not (or
// cannot be measured), 2 for a malformed expression.
int Check(Cli& cli) {
  const std::string run = TakeRun(&cli.args, "check");
  const std::optional<std::string> expression = TakeOne(&cli.args, "slo");
  const std::optional<std::string> junit = TakeOne(&cli.args, "junit");
  const std::optional<WindowRangeOptions> range = TakeWindowRange(cli);
  NoMoreArgs(cli.args);
  if (!expression) throw UsageError{"check: --slo EXPR is required (e.g. --slo 'p99<=2ms')"};
  absl::StatusOr<std::vector<SloTerm>> terms = ParseSlo(*expression);
  if (!terms.ok()) throw UsageError{"check: --slo: " + std::string(terms.status().message())};

  std::vector<double> percents;
  for (const SloTerm& t : *terms) {
    if (t.metric == SloTerm::Metric::kPercentile) percents.push_back(t.percent);
  }
  std::sort(percents.begin(), percents.end());  // p99<=2ms,p99>=1ms asks p99 once
  percents.erase(std::unique(percents.begin(), percents.end()), percents.end());
  v1::GetRunResponse view;
  SloFacts facts;
  if (grpc::Status s = FetchFacts(cli, run, percents, range, &view, &facts); !s.ok()) {
    return ServerError(s);
  }
  const std::vector<SloVerdict> verdicts = EvaluateSlo(*terms, facts);
  bool held = true;
  for (const SloVerdict& v : verdicts) held = held && v.held;
  const std::string name = view.run().name();
  if (cli.json) {
    JsonWriter json;
    json.BeginObject();
    json.Key("runId").Uint(view.run().id());
    json.Key("runName").String(name);
    json.Key("state").String(StateText(view.run().state()));
    json.Key("passed").Bool(held);
    json.Key("timeUnit").String(facts.unit);
    json.Key("terms").BeginArray();
    for (const SloVerdict& v : verdicts) {
      json.BeginObject();
      json.Key("term").String(v.term->text);
      json.Key("passed").Bool(v.held);
      json.Key("measured");
      if (v.measured) {
        json.Double(*v.measured);
      } else {
        json.Null();
      }
      json.Key("threshold").Double(v.threshold);
      json.Key("text").String(v.line);
      json.EndObject();
    }
    json.EndArray().EndObject();
    PrintJson(json);
  } else {
    std::cout << "run " << view.run().id() << " '" << name << "' (" << StateText(view.run().state())
              << "): " << (held ? "every term holds" : "FAILED") << "\n";
    for (const SloVerdict& v : verdicts) std::cout << "  " << v.line << "\n";
  }
  if (junit) {
    std::ofstream out(*junit);
    out << SloJunit(name, verdicts);
    if (!out.good()) {
      std::cerr << "perlctl: check: cannot write " << *junit << "\n";
      return 1;
    }
  }
  return held ? 0 : 1;
}

// `compare A B [--p LIST] [--fail-if TERMS]` (compare.h): two runs' exact
// totals side by side; exit 1 when a --fail-if term fails.
int Compare(Cli& cli) {
  std::vector<double> percents = TakePercentList(cli);
  const std::optional<std::string> fail_if = TakeOne(&cli.args, "fail-if");
  // The same range of each run (offsets from each run's own start).
  const std::optional<WindowRangeOptions> range = TakeWindowRange(cli);
  if (cli.args.size() != 2 || cli.args[0].rfind("--", 0) == 0 || cli.args[1].rfind("--", 0) == 0) {
    throw UsageError{"compare needs two runs: compare A B [--p LIST] [--fail-if TERMS]"};
  }
  const std::string run_a = cli.args[0];
  const std::string run_b = cli.args[1];
  cli.args.clear();
  std::vector<RegressionTerm> terms;
  if (fail_if) {
    absl::StatusOr<std::vector<RegressionTerm>> parsed = ParseFailIf(*fail_if);
    if (!parsed.ok()) throw UsageError{std::string(parsed.status().message())};
    terms = *std::move(parsed);
  }
  if (percents.empty()) percents = {50, 90, 99, 99.9, 99.99};
  std::vector<double> asked = percents;  // and those the gate names
  for (const RegressionTerm& t : terms) {
    if (t.metric == SloTerm::Metric::kPercentile) asked.push_back(t.percent);
  }
  std::sort(asked.begin(), asked.end());  // the daemon refuses a percent asked twice
  asked.erase(std::unique(asked.begin(), asked.end()), asked.end());
  v1::GetRunResponse view_a, view_b;
  SloFacts a, b;
  if (grpc::Status s = FetchFacts(cli, run_a, asked, range, &view_a, &a); !s.ok()) {
    return ServerError(s);
  }
  if (grpc::Status s = FetchFacts(cli, run_b, asked, range, &view_b, &b); !s.ok()) {
    return ServerError(s);
  }
  ToCommonUnit(&a, &b);
  const std::vector<CompareRow> rows = CompareRows(a, b, percents);
  const std::vector<RegressionVerdict> verdicts = EvaluateFailIf(terms, a, b);
  bool failed = false;
  for (const RegressionVerdict& v : verdicts) failed = failed || v.failed;
  const auto describe = [](const v1::GetRunResponse& v) {
    return absl::StrCat("run ", v.run().id(), " '", v.run().name(), "' (", StateWithReason(v.run()),
                        ")");
  };
  if (cli.json) {
    JsonWriter json;
    json.BeginObject();
    for (const auto& [key, view] : {std::pair{"a", &view_a}, std::pair{"b", &view_b}}) {
      json.Key(key).BeginObject();
      json.Key("runId").Uint(view->run().id());
      json.Key("runName").String(view->run().name());
      json.Key("state").String(StateText(view->run().state()));
      json.EndObject();
    }
    json.Key("timeUnit").String(b.unit);
    json.Key("rows").BeginArray();
    for (const CompareRow& r : rows) {
      json.BeginObject().Key("metric").String(r.metric);
      for (const auto& [key, value] :
           {std::pair{"a", r.a}, std::pair{"b", r.b}, std::pair{"delta", r.delta()},
            std::pair{"relativePercent", r.relative()}}) {
        json.Key(key);
        if (!value) {
          json.Null();
        } else if (*value == std::floor(*value) && std::fabs(*value) < 9e15) {
          json.Int(static_cast<int64_t>(*value));  // counts and latencies: exact integers
        } else {
          json.Double(*value);
        }
      }
      json.EndObject();
    }
    json.EndArray();
    json.Key("passed").Bool(!failed);
    json.Key("failIf").BeginArray();
    for (const RegressionVerdict& v : verdicts) {
      json.BeginObject();
      json.Key("term").String(v.term->text);
      json.Key("failed").Bool(v.failed);
      json.Key("text").String(v.line);
      json.EndObject();
    }
    json.EndArray().EndObject();
    PrintJson(json);
  } else {
    std::cout << "A: " << describe(view_a) << "\nB: " << describe(view_b) << "\n"
              << CompareTable(rows, b.unit);
    if (!a.no_percentiles.empty())
      std::cout << "A has no percentiles: " << a.no_percentiles << "\n";
    if (!b.no_percentiles.empty())
      std::cout << "B has no percentiles: " << b.no_percentiles << "\n";
    for (const RegressionVerdict& v : verdicts) std::cout << v.line << "\n";
    if (!terms.empty())
      std::cout << (failed ? "regression: B fails the gate\n" : "B passes the gate\n");
  }
  return failed ? 1 : 0;
}

// Export's text to stdout, or to --out FILE.
int WriteExport(const std::string& text, const std::optional<std::string>& out_path) {
  if (!out_path) {
    std::cout << text;
    return 0;
  }
  std::ofstream out(*out_path);
  out << text;
  if (!out.good()) {
    std::cerr << "perlctl: export: cannot write " << *out_path << "\n";
    return 1;
  }
  return 0;
}

// A run as GetRun answers it and its retained windows (GetWindowHistory).
grpc::Status FetchRunAndHistory(Cli& cli, const std::string& run, v1::GetRunResponse* view,
                                v1::GetWindowHistoryResponse* history) {
  v1::GetRunRequest get;
  get.set_run(run);
  {
    grpc::ClientContext context;
    cli.Deadline(&context);
    if (grpc::Status s = cli.query->GetRun(&context, get, view); !s.ok()) return s;
  }
  v1::GetWindowHistoryRequest request;
  request.set_run(std::to_string(view->run().id()));
  grpc::ClientContext context;
  cli.Deadline(&context);
  return cli.query->GetWindowHistory(&context, request, history);
}

// `export RUN --format sbk-csv`: an ended run's retained windows and final
// total in SBK's CSV layout, the rows csvDir writes (sbk_csv_export.h). A
// running run is refused (its total is not final: csvDir writes the file as
// it runs); windows retention dropped are named on stderr and the retained
// ones exported.
int ExportSbkCsv(Cli& cli, const std::string& run, std::string* text) {
  v1::GetRunResponse view;
  v1::GetWindowHistoryResponse history;
  if (grpc::Status s = FetchRunAndHistory(cli, run, &view, &history); !s.ok()) {
    return ServerError(s);
  }
  const std::string id = std::to_string(view.run().id());
  if (view.run().state() == v1::RUN_STATE_RUNNING || !view.total().final()) {
    std::cerr << "perlctl: export: run " << id
              << " is still running: --format sbk-csv needs its final total; export it once it "
                 "ended (a csvDir set before a run writes its file as it runs)\n";
    return 1;
  }
  // The daemon gives every window the run's percentiles; one without them
  // (none known) is written with empty cells and named below.
  const std::vector<v1::Window> windows(history.windows().begin(), history.windows().end());
  const SbkCsvFile file = SbkCsv(view, windows);
  if (file.dropped > 0) {
    std::cerr << "perlctl: export: run " << id << ": the daemon no longer holds its oldest "
              << file.dropped << " window(s) (retention.maxWindowsPerRun): exporting the "
              << file.regular_rows + file.segment_rows
              << " it retains and the total, numbered as csvDir numbers them\n";
  }
  if (!file.without_percentiles.empty()) {
    std::cerr << "perlctl: export: run " << id << ": no percentiles for "
              << absl::StrJoin(file.without_percentiles, ", ") << ": their cells are empty\n";
  }
  *text = file.text;
  return 0;
}

// `export RUN --format hlog`: the run's retained periodic windows as an
// HdrHistogram interval log (hlog_export.h), a line per window from its
// exact distribution (GetDistribution over the one-window range; a window
// without valid latencies is an empty histogram). A window whose
// distribution the daemon does not store (FAILED_PRECONDITION) has no line
// and is named on stderr and in the log; so are windows retention dropped,
// a running run (its closed windows are exported) and the records outside
// HdrHistogram's exact range.
int ExportHlog(Cli& cli, const std::string& run, std::string* text) {
  v1::GetRunResponse view;
  v1::GetWindowHistoryResponse history;
  if (grpc::Status s = FetchRunAndHistory(cli, run, &view, &history); !s.ok()) {
    return ServerError(s);
  }
  const std::string id = std::to_string(view.run().id());
  std::vector<v1::Window> windows;
  for (const v1::Window& w : history.windows()) {
    if (w.kind() == v1::Window::KIND_PERIODIC) windows.push_back(w);
  }
  std::sort(windows.begin(), windows.end(),
            [](const v1::Window& a, const v1::Window& b) { return a.seq() < b.seq(); });
  HlogRun hlog_run;
  hlog_run.id = view.run().id();
  hlog_run.name = view.run().name();
  hlog_run.unit = TimeUnitText(view.run().latency().time_unit());
  hlog_run.start_unix_ms = view.run().start_unix_ms();
  hlog_run.running = view.run().state() == v1::RUN_STATE_RUNNING;
  hlog_run.dropped_windows = windows.empty() ? view.latest().seq() : windows.front().seq() - 1;
  for (const v1::Window& w : windows) {
    hlog_run.highest_trackable_value = std::max(hlog_run.highest_trackable_value, w.max_latency());
  }
  HistogramLog log(hlog_run);
  std::vector<std::pair<int64_t, int64_t>> buckets;
  for (const v1::Window& w : windows) {
    buckets.clear();
    bool stored = true;
    v1::GetDistributionRequest request;
    request.set_run(id);
    request.mutable_range()->set_first_window(w.seq());
    request.mutable_range()->set_last_window(w.seq());
    while (w.valid_latency_records() > 0) {
      grpc::ClientContext context;
      cli.Deadline(&context);
      v1::GetDistributionResponse page;
      if (grpc::Status s = cli.query->GetDistribution(&context, request, &page); !s.ok()) {
        if (s.error_code() != grpc::StatusCode::FAILED_PRECONDITION) return ServerError(s);
        std::cerr << "perlctl: export: run " << id << ": window " << w.seq()
                  << " is not in the log: " << s.error_message() << "\n";
        stored = false;
        break;
      }
      for (int i = 0; i < page.latency_size() && i < page.count_size(); ++i) {
        buckets.emplace_back(page.latency(i), page.count(i));
      }
      // A token that does not move on would repeat the page: stop there.
      if (page.next_page_token().empty() || page.next_page_token() == request.page_token()) break;
      request.set_page_token(page.next_page_token());
    }
    if (!stored) {
      log.Skip(w.seq());
      continue;
    }
    log.Add({.seq = w.seq(),
             .start_unix_ms = w.start_unix_ms(),
             .end_unix_ms = w.end_unix_ms(),
             .warmup = w.warmup(),
             .ascending = buckets});
  }
  if (hlog_run.dropped_windows > 0) {
    std::cerr << "perlctl: export: run " << id << ": the daemon no longer holds its oldest "
              << hlog_run.dropped_windows
              << " window(s) (retention.maxWindowsPerRun): exporting the " << windows.size()
              << " it retains\n";
  }
  if (hlog_run.running) {
    std::cerr << "perlctl: export: run " << id << " is still running: exporting the "
              << log.windows() << " window(s) closed so far\n";
  }
  if (log.inexact_records() > 0) {
    std::cerr << "perlctl: export: run " << id << ": " << log.ExactnessNote() << "\n";
  }
  *text = log.Text();
  return 0;
}

// `export RUN [--format json|csv|hgrm|sbk-csv|hlog] [--out FILE]`: an ended
// run's exact total distribution (distribution_export.h), read page by page;
// or, sbk-csv, its windows and total as SBK's CSV file (ExportSbkCsv); or,
// hlog, its windows as an HdrHistogram log (ExportHlog).
int Export(Cli& cli) {
  std::string run = TakeRun(&cli.args, "export");
  const v1::LatencyKind kind = TakeKind(cli);
  const std::string format = TakeOne(&cli.args, "format").value_or("json");
  const std::optional<std::string> out_path = TakeOne(&cli.args, "out");
  if (std::optional<std::string> scope = TakeOne(&cli.args, "scope"); scope && *scope != "total") {
    throw UsageError{"export: --scope " + *scope +
                     ": the run's total, or a range (--windows/--from/--to/--warmup)"};
  }
  const std::optional<WindowRangeOptions> range = TakeWindowRange(cli);
  const std::optional<PercentileMethod> method = TakeMethod(cli);
  NoMoreArgs(cli.args);
  if (method && format != "hgrm") {
    throw UsageError{"export: --method applies to --format hgrm (its percentile ladder)"};
  }
  // The run holding the kind asked for, by id from here on.
  {
    v1::GetRunResponse got;
    if (grpc::Status s = GetRunOfKind(cli, run, kind, &got); !s.ok()) return ServerError(s);
    run = std::to_string(got.run().id());
  }
  if (format == "sbk-csv") {
    if (range) {
      throw UsageError{
          "export: --format sbk-csv writes every retained window and the total: "
          "no range (--windows/--from/--to/--warmup)"};
    }
    std::string text;
    if (const int rc = ExportSbkCsv(cli, run, &text); rc != 0) return rc;
    return WriteExport(text, out_path);
  }
  if (format == "hlog") {
    if (range) {
      throw UsageError{
          "export: --format hlog writes every retained window: "
          "no range (--windows/--from/--to/--warmup)"};
    }
    std::string text;
    if (const int rc = ExportHlog(cli, run, &text); rc != 0) return rc;
    return WriteExport(text, out_path);
  }
  if (format != "json" && format != "csv" && format != "hgrm") {
    throw UsageError{"export: --format must be json, csv, hgrm, sbk-csv or hlog"};
  }
  ExportedDistribution d;
  v1::GetDistributionRequest request;
  request.set_run(run);
  if (range) {
    if (grpc::Status s = ResolveRange(cli, run, *range, request.mutable_range()); !s.ok()) {
      return ServerError(s);
    }
  }
  for (;;) {
    grpc::ClientContext context;
    cli.Deadline(&context);
    v1::GetDistributionResponse page;
    if (grpc::Status s = cli.query->GetDistribution(&context, request, &page); !s.ok()) {
      return ServerError(s);
    }
    if (request.page_token().empty()) {
      request.set_run(std::to_string(page.run_id()));  // the same run on every page
      d.run_id = page.run_id();
      d.unit = TimeUnitText(page.time_unit());
      d.total = page.total();
      if (range) {
        d.first_window = page.total().seq();
        d.last_window = page.last_window();
      }
    }
    for (int i = 0; i < page.latency_size() && i < page.count_size(); ++i) {
      d.buckets.emplace_back(page.latency(i), page.count(i));
    }
    // A token that does not move on would repeat the page: stop there.
    if (page.next_page_token().empty() || page.next_page_token() == request.page_token()) break;
    request.set_page_token(page.next_page_token());
  }
  {
    v1::GetRunRequest get;
    get.set_run(std::to_string(d.run_id));
    v1::GetRunResponse view;
    grpc::ClientContext context;
    cli.Deadline(&context);
    if (grpc::Status s = cli.query->GetRun(&context, get, &view); !s.ok()) return ServerError(s);
    d.run_name = view.run().name();
  }
  const std::string text = format == "json"  ? DistributionJson(d)
                           : format == "csv" ? DistributionCsv(d)
                           : method          ? DistributionHgrmLadder(d, *method)
                                             : DistributionHgrm(d);
  return WriteExport(text, out_path);
}

int Stop(Cli& cli) {
  v1::StopRunRequest request;
  request.set_wait(TakeFlag(&cli.args, "wait"));
  request.set_run(TakeRun(&cli.args, "stop"));
  NoMoreArgs(cli.args);
  grpc::ClientContext context;
  if (!request.wait()) cli.Deadline(&context);
  v1::StopRunResponse response;
  if (grpc::Status s = cli.control->StopRun(&context, request, &response); !s.ok()) {
    return ServerError(s);
  }
  if (cli.json) {
    JsonWriter json;
    json.BeginObject();
    WriteRunJson(response.run(), json);
    json.EndObject();
    PrintJson(json);
  } else {
    std::cout << "run " << response.run().id() << " " << StateWithReason(response.run())
              << (response.run().failure_reason().empty()
                      ? ""
                      : " (" + response.run().failure_reason() + ")")
              << "\n";
  }
  return 0;
}

int Main(std::vector<std::string> args) {
  Cli cli;
  const char* env_target =
      std::getenv("PERLD_TARGET");  // NOLINT(concurrency-mt-unsafe): before any thread
  cli.target = env_target != nullptr && *env_target != '\0' ? env_target : kDefaultTarget;
  const char* env_token =
      std::getenv("PERLD_TOKEN_FILE");  // NOLINT(concurrency-mt-unsafe): before any thread
  if (env_token != nullptr) cli.security.token_file = env_token;
  // Global options come before the command.
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--version") {
      std::cout << "perlctl " << PERLD_VERSION << "\n";
      return 0;
    }
    if (a == "--json") {
      cli.json = true;
    } else if (a == "--tls") {
      cli.security.tls = true;
    } else if (a == "--timeout") {
      if (i + 1 >= args.size()) throw UsageError{a + " needs a value"};
      if (!absl::SimpleAtod(args[++i], &cli.timeout_s) || cli.timeout_s <= 0) {
        throw UsageError{"--timeout needs a positive number of seconds"};
      }
      cli.timeout_given = true;
    } else if (std::string* value = GlobalValue(&cli, a); value != nullptr) {
      if (i + 1 >= args.size()) throw UsageError{a + " needs a value"};
      *value = args[++i];
    } else if (const size_t eq = a.find('=');
               eq != std::string::npos && GlobalValue(&cli, a.substr(0, eq)) != nullptr) {
      *GlobalValue(&cli, a.substr(0, eq)) = a.substr(eq + 1);
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError{"unknown option '" + a + "'"};
    } else {
      break;
    }
  }
  if (i >= args.size()) throw UsageError{"no command"};
  cli.command = args[i];
  cli.args.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  // --json, --target and the security options are accepted after the command too.
  if (TakeFlag(&cli.args, "json")) cli.json = true;
  if (TakeFlag(&cli.args, "tls")) cli.security.tls = true;
  for (const char* name : {"target", "token-file", "ca-file", "cert-file", "key-file"}) {
    if (std::optional<std::string> v = TakeOne(&cli.args, name)) {
      *GlobalValue(&cli, std::string("--") + name) = *v;
    }
  }
  if (cli.target.empty()) throw UsageError{"--target is empty"};

  if (cli.command == "import") {
    return ImportCommand(cli.target, cli.security, cli.json,
                         cli.timeout_given ? cli.timeout_s : 120.0, cli.args);
  }
  if (cli.command == "load") {
    return LoadCommand(cli.target, cli.security, cli.json,
                       cli.timeout_given ? cli.timeout_s : 120.0, cli.args);
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> opened =
      client::OpenChannel(cli.target, cli.security);
  if (!opened.ok()) {
    std::cerr << "perlctl: " << opened.status().message() << "\n";
    return 1;
  }
  std::shared_ptr<grpc::Channel> channel = std::move(*opened);
  cli.query = v1::Query::NewStub(channel);
  cli.control = v1::Control::NewStub(channel);
  if (cli.command == "runs") return Runs(cli);
  if (cli.command == "show") return Show(cli);
  if (cli.command == "percentiles") return Percentiles(cli);
  if (cli.command == "clients") return Clients(cli);
  if (cli.command == "history") return History(cli);
  if (cli.command == "watch") return WatchCommand(cli);
  if (cli.command == "bench") return Bench(cli);
  if (cli.command == "stop") return Stop(cli);
  if (cli.command == "check") return Check(cli);
  if (cli.command == "compare") return Compare(cli);
  if (cli.command == "export") return Export(cli);
  throw UsageError{"unknown command '" + cli.command + "'"};
}

}  // namespace
}  // namespace perld::perlctl

int main(int argc, char** argv) {
  try {
    return perld::perlctl::Main(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const perld::perlctl::UsageError& e) {
    std::cerr << "perlctl: " << e.message << "\n\n" << perld::perlctl::kUsage;
    return 2;
  }
}
