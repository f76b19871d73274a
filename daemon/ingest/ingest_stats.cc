#include "daemon/ingest/ingest_stats.h"

namespace perld::ingest {

const char* IngestStats::RefusalName(Refusal r) {
  switch (r) {
    case Refusal::kMalformed:
      return "malformed";
    case Refusal::kSequenceGap:
      return "sequence_gap";
    case Refusal::kMismatch:
      return "mismatch";
    case Refusal::kUnknownRun:
      return "unknown_run";
    case Refusal::kMessageSize:
      return "message_size";
    case Refusal::kBatchLength:
      return "batch_length";
    case Refusal::kPairs:
      return "pairs_per_report";
    case Refusal::kRuns:
      return "runs";
    case Refusal::kClientsPerRun:
      return "clients_per_run";
    case Refusal::kStreams:
      return "streams";
    case Refusal::kClientMemory:
      return "client_memory";
    case Refusal::kMemory:
      return "memory";
    case Refusal::kSuperseded:
      return "superseded";
    case Refusal::kShutdown:
      return "shutdown";
    case Refusal::kRunEnded:
      return "run_ended";
    case Refusal::kDataLoss:
      return "data_loss";
    case Refusal::kInputLimit:
      return "input_limit";
    case Refusal::kRunExists:
      return "run_exists";
    case Refusal::kCount:
      break;
  }
  return "unknown";
}

}  // namespace perld::ingest
