// The ingest service's counters in the Prometheus text format, appended to
// the daemon's /metrics: perld_ingest_streams_open (gauge) and
// perld_ingest_*_total counters, refusals labelled by reason
// (IngestStats::RefusalName). Pure; any thread.
#pragma once

#include <string>

#include "daemon/ingest/ingest_stats.h"

namespace perld::service {

std::string RenderIngestExposition(const ingest::IngestStats& stats);

}  // namespace perld::service
