// `perlctl load`: a remote PerlBench load generator. Every `perld bench`
// option (workers, records/seconds/rate, size, time unit, range, pending
// bound, clock) plus --run NAME, --mode raw|windows, --distribution-out FILE
// (the client's own exact total as JSON: counters and the ascending
// [latency, count] pairs), --name CLIENT_NAME, --label KEY=VALUE and
// --spool DIR [--spool-mode batched|synced] (the durable client spool: a
// rerun on the same DIR after a crash replays what was not acknowledged). The
// workers record through a perld::Client; several processes can join one
// run. Exit 0 only when the daemon acknowledged every record; 1 otherwise.
//
// Threads: the calling thread plus one per worker.
#pragma once

#include <string>
#include <vector>

#include "client/lib/secure_channel.h"
#include "client/perlctl/cli_args.h"  // UsageError: thrown for a usage error

namespace perld::perlctl {

// `security`: perlctl's --tls/--ca-file/--cert-file/--key-file/--token-file.
int LoadCommand(const std::string& target, const client::ChannelSecurity& security,
                bool json_output, double timeout_s, std::vector<std::string> args);

}  // namespace perld::perlctl
