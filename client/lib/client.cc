// perld::Client: the local pipeline (channels -> one recorder thread -> the
// client's exact windows and the wire encoder) and the IngestSender.
#include "perld/client.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/lib/client_internal.h"
#include "client/lib/ingest_sender.h"
#include "client/lib/secure_channel.h"
#include "client/lib/spool.h"
#include "client/lib/wire_encoder.h"
#include "daemon/common/mutex.h"
#include "daemon/core/clock.h"
#include "daemon/core/periodic_and_total_windows.h"
#include "daemon/core/recorder_thread.h"
#include "daemon/core/response_times.h"
#include "daemon/core/timestamp_channels.h"

namespace perld {
namespace {

TimeUnit ToCore(LatencyUnit unit) {
  switch (unit) {
    case LatencyUnit::kMs:
      return TimeUnit::kMs;
    case LatencyUnit::kUs:
      return TimeUnit::kUs;
    case LatencyUnit::kNs:
      break;
  }
  return TimeUnit::kNs;
}

v1::TimeUnit ToProto(LatencyUnit unit) {
  switch (unit) {
    case LatencyUnit::kMs:
      return v1::TIME_UNIT_MS;
    case LatencyUnit::kUs:
      return v1::TIME_UNIT_US;
    case LatencyUnit::kNs:
      break;
  }
  return v1::TIME_UNIT_NS;
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Longest a raw timestamp waits in a partial message before it is sent.
constexpr int64_t kRawFlushNs = 5'000'000;
// Pairs per window report before the daemon said its limit (its default
// ingest.maxPairsPerReport).
constexpr int64_t kDefaultMaxPairs = int64_t{1} << 20;

// A rate-controlled client's response view (ClientOptions::target_rate):
// its local windows (end - intended start) and the schedule not yet sent.
struct LocalResponse {
  PeriodicAndTotalWindows windows;
  int64_t late_threshold = 0;                     // in the client's unit
  const std::atomic<int64_t>* skipped = nullptr;  // slots dropped (client::SkippedSlots)
  int64_t skipped_sent = 0;
  LagTally lags;  // windows mode: the operations since the last response window
};

// The recorder-thread side: windows, encoder, and what goes to the sender.
class LocalSink final : public TimeStampSink {
 public:
  LocalSink(PeriodicAndTotalWindows windows, TimeUnit unit, IngestMode mode, int64_t interval_ns,
            int batch_length, client::IngestSender* sender,
            std::optional<LocalResponse> response = std::nullopt)
      : windows_(std::move(windows)),
        ns_per_unit_(NanosPerUnit(unit)),
        mode_(mode),
        interval_ns_(interval_ns),
        batch_length_(batch_length),
        sender_(sender),
        encoder_(response.has_value()),
        response_(std::move(response)) {
    const int64_t now = MonotonicNanos();
    next_close_ns_ = now + interval_ns_;
    window_start_ms_ = UnixMs();
    last_send_ns_ = now;
  }

  // A rate-controlled client's producers are all paced: Accept serves a
  // closed-loop client only (or an operation recorded without its slot,
  // timed from its actual start).
  void Accept(const TimeStamp* batch, size_t n) override { Take(batch, nullptr, n); }
  void AcceptPaced(const TimeStamp* batch, const int64_t* intended, size_t n) override {
    Take(batch, intended, n);
  }

  void Tick(int64_t now_ns) override {
    last_tick_ns_ = now_ns;
    if (now_ns >= next_close_ns_) {
      CloseWindow(now_ns);
      next_close_ns_ += interval_ns_;
      if (next_close_ns_ <= now_ns) next_close_ns_ = now_ns + interval_ns_;
    }
    if (mode_ == IngestMode::kRaw && encoder_.size() > 0 && now_ns - last_send_ns_ >= kRawFlushNs) {
      SendBatch();
    }
    const uint64_t asked = flush_requests_.load(std::memory_order_acquire);
    if (asked != flush_served_.load(std::memory_order_relaxed)) {
      // Everything a Record call that returned before the request published,
      // open batches included (a kAll pass reads their published prefix).
      while (channels_->Drain(*this, PollMode::kAll) > 0) {
      }
      if (mode_ == IngestMode::kRaw) {
        if (encoder_.size() > 0) SendBatch();
      } else {
        CloseWindow(now_ns);
      }
      flush_sequence_.store(sender_->next_sequence() - 1, std::memory_order_relaxed);
      flush_served_.store(asked, std::memory_order_release);
    }
  }

  // After the recorder thread stopped: sends what is left, closes the
  // total (and the response view's).
  void Finish(LocalTotal* total, LocalTotal* response_total) {
    const int64_t now = MonotonicNanos();
    if (mode_ == IngestMode::kRaw) {
      if (encoder_.size() > 0 || SkippedUnsent() > 0) SendBatch();
    } else if (windows_.periodic().counters().records > 0 ||
               windows_.periodic().counters().rejected > 0 || SkippedUnsent() > 0) {
      CloseWindow(now);
    }
    WindowReport report;
    windows_.CloseTotal(now / ns_per_unit_, &report);
    FillTotal(report, total);
    if (response_) {
      WindowReport view;
      response_->windows.CloseTotal(now / ns_per_unit_, &view);
      FillTotal(view, response_total);
    }
  }

  static void FillTotal(const WindowReport& report, LocalTotal* total) {
    const LatencySnapshot& s = report.snapshot;
    total->records = s.records;
    total->bytes = s.bytes;
    total->valid = s.valid;
    total->invalid = s.invalid;
    total->lower_discard = s.lower_discard;
    total->higher_discard = s.higher_discard;
    total->rejected = s.rejected;
    total->min_latency = s.min_latency;
    total->max_latency = s.max_latency;
    total->total_latency = s.total_latency;
    total->latency_counts.clear();
    total->latency_counts.reserve(report.distribution.size());
    for (const LatencyBucket& b : report.distribution) {
      total->latency_counts.emplace_back(b.latency, b.count);
    }
  }

  // Before the recorder starts: the channels this sink drains.
  void set_channels(TimeStampChannels* channels) { channels_ = channels; }

  // Any thread: asks the recorder to send what it holds; returns the request.
  uint64_t RequestFlush() { return flush_requests_.fetch_add(1, std::memory_order_acq_rel) + 1; }
  bool FlushServed(uint64_t request) const {
    return flush_served_.load(std::memory_order_acquire) >= request;
  }
  uint64_t flush_sequence() const { return flush_sequence_.load(std::memory_order_relaxed); }
  int64_t records() const { return records_.load(std::memory_order_relaxed); }

 private:
  size_t BatchCap() const {
    const int64_t server = sender_->max_batch_length();
    return static_cast<size_t>(server > 0 ? std::min<int64_t>(server, batch_length_)
                                          : batch_length_);
  }

  // Service time into the windows (and the raw encoder); with `intended`
  // (paced) response time into the response view and, in windows mode, the
  // schedule's counts (raw mode: the daemon counts them from the lags).
  void Take(const TimeStamp* batch, const int64_t* intended, size_t n) {
    const int64_t now = last_tick_ns_ / ns_per_unit_;
    if (response_) {
      // Both views, closing together. Raw mode sends the lags; the daemon
      // tallies them.
      RecordBothViews(windows_, response_->windows, batch, intended, n, now,
                      response_->late_threshold,
                      mode_ == IngestMode::kWindows ? &response_->lags : nullptr);
    } else {
      windows_.RecordBatch(batch, n, now);
    }
    int64_t records = 0;
    for (size_t i = 0; i < n; ++i) records += batch[i].records > 0 ? batch[i].records : 0;
    records_.fetch_add(records, std::memory_order_relaxed);
    if (mode_ == IngestMode::kRaw) {
      const size_t cap = BatchCap();
      for (size_t i = 0; i < n; ++i) {
        encoder_.Add(batch[i], intended != nullptr ? batch[i].start - intended[i] : 0);
        if (encoder_.size() >= cap) SendBatch();
      }
    }
    if (windows_.HasPendingReports() || (response_ && response_->windows.HasPendingReports()))
        [[unlikely]] {
      SendPending();
    }
  }

  // Slots the workers dropped that no message carries yet.
  int64_t SkippedUnsent() const {
    if (!response_ || response_->skipped == nullptr) return 0;
    return response_->skipped->load(std::memory_order_relaxed) - response_->skipped_sent;
  }
  int64_t TakeSkipped() {
    const int64_t n = SkippedUnsent();
    if (response_) response_->skipped_sent += n;
    return n;
  }

  void SendBatch() {
    v1::IngestRequest request;
    encoder_.Take(sender_->next_sequence(), request.mutable_batch(), TakeSkipped());
    sender_->Enqueue(std::move(request));
    last_send_ns_ = last_tick_ns_;
  }

  void CloseWindow(int64_t now_ns) {
    WindowReport report;
    windows_.CloseWindow(now_ns / ns_per_unit_, &report);
    WindowReport view;
    if (response_) response_->windows.CloseWindow(now_ns / ns_per_unit_, &view);
    if (mode_ == IngestMode::kWindows) {
      const int64_t end_ms = UnixMs();
      SendWindow(report, false, end_ms);
      if (response_) SendWindow(view, true, end_ms);
      window_start_ms_ = end_ms;
    }
    SendPending();
  }

  // Early (IsFull) closes: periodic ones are windows of their own.
  void SendPending() {
    const int64_t end_ms = UnixMs();
    for (bool response : {false, true}) {
      if (response && !response_) break;
      PeriodicAndTotalWindows& windows = response ? response_->windows : windows_;
      if (!windows.HasPendingReports()) continue;
      for (WindowReport& report : windows.TakePendingReports()) {
        if (mode_ == IngestMode::kWindows && report.scope == WindowReport::Scope::kPeriodic) {
          SendWindow(report, response, end_ms);
        }
      }
    }
  }

  // A window as reports of at most the daemon's maxPairsPerReport pairs (a
  // response window's distribution is often much wider than its service
  // window's: every start lag adds); a response window's last part carries
  // the schedule counted since the last one.
  void SendWindow(const WindowReport& report, bool response, int64_t end_ms) {
    const bool skipped = response && SkippedUnsent() > 0;
    if (report.snapshot.records == 0 && report.snapshot.rejected == 0 && !skipped) return;
    const int64_t server = sender_->max_pairs_per_report();
    std::vector<v1::WindowReport> parts = client::EncodeWindowParts(
        report.snapshot, report.distribution, server > 0 ? server : kDefaultMaxPairs,
        sender_->next_sequence(), window_start_ms_, end_ms);
    for (size_t i = 0; i < parts.size(); ++i) {
      v1::IngestRequest request;
      v1::WindowReport* out = request.mutable_window();
      out->Swap(&parts[i]);
      if (response) {
        out->set_response(true);
        if (i + 1 == parts.size()) {
          const LagTally lags = std::exchange(response_->lags, {});
          v1::Schedule* s = out->mutable_schedule();
          s->set_operations(lags.operations);
          s->set_late(lags.late);
          s->set_skipped(TakeSkipped());
          s->set_max_lag(lags.max_lag);
          s->set_min_lag(lags.min_lag);
          s->set_total_lag(lags.total_lag);
        }
      }
      sender_->Enqueue(std::move(request));
    }
  }

  PeriodicAndTotalWindows windows_;
  const int64_t ns_per_unit_;
  const IngestMode mode_;
  const int64_t interval_ns_;
  const int batch_length_;
  client::IngestSender* const sender_;
  TimeStampChannels* channels_ = nullptr;
  client::BatchEncoder encoder_;
  std::optional<LocalResponse> response_;  // rate-controlled clients
  int64_t next_close_ns_ = 0;
  int64_t last_tick_ns_ = MonotonicNanos();
  int64_t last_send_ns_ = 0;
  int64_t window_start_ms_ = 0;
  std::atomic<int64_t> records_{0};
  std::atomic<uint64_t> flush_requests_{0};
  std::atomic<uint64_t> flush_served_{0};
  std::atomic<uint64_t> flush_sequence_{0};
};

}  // namespace

struct Client::Impl {
  ClientOptions options;
  std::unique_ptr<client::IngestSender> sender;
  std::unique_ptr<TimeStampChannels> channels;
  std::unique_ptr<LocalSink> sink;
  std::unique_ptr<RecorderThread> recorder;
  Mutex mu;
  std::vector<std::unique_ptr<Recorder>> recorders ABSL_GUARDED_BY(mu);
  bool closed ABSL_GUARDED_BY(mu) = false;
  LocalTotal total ABSL_GUARDED_BY(mu);           // filled by Close
  LocalTotal response_total ABSL_GUARDED_BY(mu);  // filled by Close (rate-controlled)
  std::atomic<int64_t> skipped{0};                // client::SkippedSlots
};

bool Recorder::Record(int64_t start, int64_t end, int32_t records, int32_t bytes) {
  auto* producer = static_cast<TimeStampProducer*>(producer_);
  if (producer->paced()) [[unlikely]] {
    return producer->SendPaced(start, start, end, records, bytes);
  }
  return producer->Send(start, end, records, bytes);
}

bool Recorder::Record(int64_t intended_start, int64_t start, int64_t end, int32_t records,
                      int32_t bytes) {
  auto* producer = static_cast<TimeStampProducer*>(producer_);
  if (!producer->paced()) [[unlikely]] {  // a closed-loop client: service time only
    return producer->Send(start, end, records, bytes);
  }
  return producer->SendPaced(std::min(intended_start, start), start, end, records, bytes);
}

std::atomic<int64_t>& client::SkippedSlots(Client* client) {
  return client::RecorderAccess::impl(client)->skipped;
}

TimeStampProducer& client::ProducerOf(Recorder* recorder) {
  return *static_cast<TimeStampProducer*>(client::RecorderAccess::producer(recorder));
}

std::string client::ShortenText(std::string text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  constexpr std::string_view kEllipsis = "...";
  size_t keep = max_bytes > kEllipsis.size() ? max_bytes - kEllipsis.size() : 0;
  // Not inside a UTF-8 sequence: back up over continuation bytes (10xxxxxx).
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  text.resize(keep);
  if (max_bytes >= kEllipsis.size()) text += kEllipsis;
  return text;
}

namespace {

// The spool of `o`. A spool holding unacknowledged messages belongs to the
// client that wrote them: its IngestOpen (kept as the spool's meta) must
// name the same run, mode and unit, and its client id is taken over so the
// daemon recognises the replay. An empty spool records `open`.
absl::StatusOr<std::unique_ptr<client::Spool>> OpenSpool(const ClientOptions& o,
                                                         v1::IngestOpen* open,
                                                         std::string* client_id) {
  client::Spool::Options so;
  so.dir = o.spool_dir;
  so.mode = o.spool_synced ? client::SpoolMode::kSynced : client::SpoolMode::kBatched;
  so.batch_appends = o.spool_batch_appends;
  so.batch_ms = o.spool_batch_ms;
  so.max_bytes = o.spool_max_bytes;
  so.segment_bytes = std::clamp<int64_t>(o.spool_max_bytes / 4, 4096, int64_t{64} << 20);
  absl::StatusOr<std::unique_ptr<client::Spool>> spool = client::Spool::Open(so);
  if (!spool.ok()) return spool.status();
  if ((*spool)->last_key() == 0) {
    if (absl::Status s = (*spool)->SetMeta(open->SerializeAsString()); !s.ok()) return s;
    return spool;
  }
  v1::IngestOpen stored;
  if (!stored.ParseFromString((*spool)->meta()) || stored.client_id().empty()) {
    return absl::DataLossError(absl::StrCat("spool ", o.spool_dir,
                                            ": unacknowledged messages without a readable meta "
                                            "file; move the directory away to start over"));
  }
  if (stored.run_name() != open->run_name() || stored.mode() != open->mode() ||
      stored.time_unit() != open->time_unit() ||
      (!o.client_id.empty() && o.client_id != stored.client_id())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "spool ", o.spool_dir, " holds unacknowledged messages of run '", stored.run_name(),
        "' (client '", stored.client_id(),
        "'): resume it with the same run, mode and time unit, or move the directory away"));
  }
  open->set_client_id(stored.client_id());
  open->set_run_id(stored.run_id());  // the run its messages belong to (0: not opened yet)
  *client_id = stored.client_id();
  return spool;
}

}  // namespace

std::unique_ptr<Client> Client::Create(const ClientOptions& o, std::string* error) {
  auto fail = [&](const std::string& why) -> std::unique_ptr<Client> {
    if (error != nullptr) *error = why;
    return nullptr;
  };
  // The daemon caps names (limits.maxNameBytes) and says so; only empty is refused here.
  if (o.run.empty()) return fail("run: a name is needed");
  if (o.target.empty()) return fail("target: empty");
  if (o.reporting_interval_ms < 10) return fail("reporting_interval_ms: must be >= 10");
  if (o.max_recorders < 1 || o.max_recorders > 4096) return fail("max_recorders: 1..4096");
  if (o.batch_length < 1) return fail("batch_length: must be >= 1");
  if (o.max_unacked_messages < 1) return fail("max_unacked_messages: must be >= 1");
  if (o.max_undurable_bytes < 1) return fail("max_undurable_bytes: must be >= 1");
  if (!(o.target_rate >= 0) || !std::isfinite(o.target_rate)) {
    return fail("target_rate: must be a finite rate >= 0");
  }
  if (o.late_threshold_ns < 0) return fail("late_threshold_ns: must be >= 0");
  LatencyConfig latency = LatencyConfig::ForUnit(ToCore(o.time_unit));
  if (o.min_latency) latency.min_latency = *o.min_latency;
  if (o.max_latency) latency.max_latency = *o.max_latency;
  if (!o.percentiles.empty()) latency.percentiles = o.percentiles;
  if (absl::Status s = latency.Normalize(); !s.ok()) return fail(std::string(s.message()));
  const int64_t ns_per_unit = NanosPerUnit(latency.time_unit);
  absl::StatusOr<PeriodicAndTotalWindows> windows =
      PeriodicAndTotalWindows::Create(latency, MonotonicNanos() / ns_per_unit);
  if (!windows.ok()) return fail(std::string(windows.status().message()));

  ChannelOptions channel_options;
  channel_options.q_per_worker = 1;
  channel_options.overflow = OverflowPolicy::kBlock;
  channel_options.max_pending_per_worker = static_cast<size_t>(o.max_pending_per_recorder);
  absl::StatusOr<std::unique_ptr<TimeStampChannels>> channels =
      TimeStampChannels::Create(channel_options, o.max_recorders);
  if (!channels.ok()) return fail(std::string(channels.status().message()));

  auto impl = std::make_unique<Impl>();
  impl->options = o;
  if (impl->options.client_id.empty()) {
    std::random_device random;
    impl->options.client_id =
        absl::StrCat(HostName(), "/", getpid(), "/", absl::Hex(random(), absl::kZeroPad8));
  }
  if (impl->options.client_name.empty()) impl->options.client_name = HostName();

  v1::IngestOpen open;
  open.set_run_name(o.run);
  open.set_must_exist(o.must_exist);
  open.set_must_create(o.must_create);
  open.mutable_labels()->insert(o.labels.begin(), o.labels.end());
  open.set_time_unit(ToProto(o.time_unit));
  open.set_min_latency(latency.min_latency);
  open.set_max_latency(latency.max_latency);
  for (double p : latency.percentiles) open.add_percentiles(p);
  open.set_reporting_interval_ms(o.reporting_interval_ms);
  open.set_client_id(impl->options.client_id);
  open.set_client_name(impl->options.client_name);
  open.set_clock(client::ShortenText(o.clock, client::kMaxClockBytes));
  open.set_clock_resolution_ns(o.clock_resolution_ns);
  open.set_bucketed_reason(o.bucketed_reason);
  open.set_target_rate(o.target_rate);
  open.set_late_threshold_ns(o.late_threshold_ns);
  if (!o.slo.empty()) {
    open.mutable_slo()->set_expression(o.slo);
    open.mutable_slo()->set_abort_on_fail(o.slo_abort_on_fail);
  }
  open.set_mode(o.mode == IngestMode::kRaw ? v1::IngestOpen::MODE_RAW
                                           : v1::IngestOpen::MODE_WINDOWS);
  std::unique_ptr<client::Spool> spool;
  if (!o.spool_dir.empty()) {
    absl::StatusOr<std::unique_ptr<client::Spool>> opened =
        OpenSpool(o, &open, &impl->options.client_id);
    if (!opened.ok()) return fail(std::string(opened.status().message()));
    spool = std::move(*opened);
  }
  client::ChannelSecurity security;
  security.tls = o.tls;
  security.ca_file = o.ca_file;
  security.cert_file = o.cert_file;
  security.key_file = o.key_file;
  security.token_file = o.token_file;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = client::OpenChannel(o.target, security);
  if (!channel.ok()) return fail(std::string(channel.status().message()));
  impl->sender = std::make_unique<client::IngestSender>(std::move(*channel), std::move(open),
                                                        o.max_unacked_messages,
                                                        o.max_undurable_bytes, std::move(spool));
  impl->channels = std::move(*channels);
  std::optional<LocalResponse> response;
  if (o.target_rate > 0) {
    absl::StatusOr<PeriodicAndTotalWindows> view =
        PeriodicAndTotalWindows::Create(latency, MonotonicNanos() / ns_per_unit);
    if (!view.ok()) return fail(std::string(view.status().message()));
    const int64_t late_ns = o.late_threshold_ns > 0 ? o.late_threshold_ns : 1'000'000;
    response.emplace(LocalResponse{.windows = *std::move(view),
                                   .late_threshold = late_ns / ns_per_unit,
                                   .skipped = &impl->skipped,
                                   .skipped_sent = 0,
                                   .lags = {}});
  }
  impl->sink = std::make_unique<LocalSink>(std::move(*windows), latency.time_unit, o.mode,
                                           o.reporting_interval_ms * 1'000'000, o.batch_length,
                                           impl->sender.get(), std::move(response));
  impl->sink->set_channels(impl->channels.get());
  RecorderOptions recorder_options;
  recorder_options.tick_ns = 1'000'000;
  impl->recorder = std::make_unique<RecorderThread>(*impl->channels, *impl->sink, recorder_options);
  impl->recorder->Start();
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() {
  bool closed = false;
  {
    MutexLock lock(impl_->mu);
    closed = impl_->closed;
  }
  if (!closed) Close(std::chrono::milliseconds(0));
}

Recorder* Client::NewRecorder() {
  MutexLock lock(impl_->mu);
  const int index = static_cast<int>(impl_->recorders.size());
  if (impl_->closed || index >= impl_->channels->workers()) return nullptr;
  TimeStampProducer& producer = impl_->channels->producer(index);
  // Before its first send: the caller hands the recorder to its thread.
  if (impl_->options.target_rate > 0) producer.set_paced();
  impl_->recorders.push_back(std::unique_ptr<Recorder>(new Recorder(&producer)));
  return impl_->recorders.back().get();
}

FlushResult Client::Flush(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const uint64_t request = impl_->sink->RequestFlush();
  while (!impl_->sink->FlushServed(request)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      FlushResult r;
      r.error = "timed out";
      return r;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return impl_->sender->WaitAcked(impl_->sink->flush_sequence(),
                                  std::max(left, std::chrono::milliseconds(0)));
}

FlushResult Client::Close(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  impl_->sender->GiveUpAt(deadline);
  {
    MutexLock lock(impl_->mu);
    if (!impl_->closed) {
      impl_->closed = true;
      // Every Record call has returned (the caller's promise): the recorder
      // drains everything, then the sink is ours.
      impl_->recorder->StopAndDrain();
      impl_->sink->Finish(&impl_->total, &impl_->response_total);
    }
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return impl_->sender->Close(std::max(left, std::chrono::milliseconds(0)));
}

void Client::Abandon(std::chrono::milliseconds grace) {
  impl_->sender->GiveUpAt(std::chrono::steady_clock::now() + grace);
}

std::string Client::FinalError() const { return impl_->sender->FinalError(); }

Counters Client::counters() const {
  Counters c;
  impl_->sender->FillCounters(&c);
  c.records = impl_->sink->records();
  return c;
}

LocalTotal Client::Total() const {
  MutexLock lock(impl_->mu);
  return impl_->total;
}

LocalTotal Client::ResponseTotal() const {
  MutexLock lock(impl_->mu);
  return impl_->response_total;
}

}  // namespace perld
