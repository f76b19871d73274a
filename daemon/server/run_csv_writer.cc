#include "daemon/server/run_csv_writer.h"

#include <ctime>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/common/mutex.h"

namespace perld::server {

void RunCsvWriter::OnRunStarted(const runs::RunInfo& info) {
  const std::string dir = config_.Get()->csv_dir;
  if (dir.empty()) return;
  auto file = std::make_unique<File>();
  bench::ReportContext& ctx = file->context;
  ctx.action = info.spec.writers > 0 && info.spec.readers > 0 ? "Write_Reading"
               : info.spec.readers > 0                        ? "Reading"
                                                              : "Writing";
  ctx.unit = info.spec.latency.time_unit;
  ctx.writers = info.spec.writers;
  ctx.readers = info.spec.readers;
  ctx.percentiles = info.spec.latency.percentiles;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  file->path = absl::StrCat(dir, "/run-", info.id, ".csv");
  file->out.open(file->path, std::ios::trunc);
  if (!file->out) {
    log::Error("csvDir: cannot write ", file->path, ": run ", info.id, " has no CSV");
    return;
  }
  file->out << bench::CsvHeader(ctx) << "\n";
  MutexLock lock(mu_);
  files_[info.id] = std::move(file);
}

void RunCsvWriter::Row(runs::RunId id, const runs::WindowRecord& w, bool total) {
  MutexLock lock(mu_);
  auto it = files_.find(id);
  if (it == files_.end()) return;
  File& f = *it->second;
  const bench::ReportRow row = bench::MakeReportRow(w.snapshot, w.seconds, w.RateSeconds());
  f.out << bench::CsvRow(f.context, row, ++f.rows, total,
                         static_cast<std::time_t>(w.end_unix_ms / 1000))
        << "\n";
}

void RunCsvWriter::OnWindow(const runs::RunInfo& info, const runs::WindowRecord& window) {
  Row(info.id, window, window.kind != runs::WindowRecord::Kind::kPeriodic);
}

void RunCsvWriter::OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord& total) {
  Row(info.id, total, true);
  MutexLock lock(mu_);
  auto it = files_.find(info.id);
  if (it == files_.end()) return;
  it->second->out.flush();
  if (!it->second->out) log::Error("csvDir: error writing ", it->second->path);
  files_.erase(it);
}

}  // namespace perld::server
