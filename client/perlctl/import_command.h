// `perlctl import --format fio|k6 FILE... --run NAME`: streams the latencies
// another tool recorded into perld through the ordinary Ingest path (a
// perld::Client per run: acknowledgements, checkpoints, tiers and exactness
// apply as to any client), one record per I/O or sample:
//
//   fio  latency logs written with log_avg_msec=0 (fio_log.h): each I/O is a
//        record of its latency (ns) and block size. Each data direction goes
//        to a run of its own, NAME-read, NAME-write, NAME-trim, NAME-sync
//        (label direction=...), so directions are never mixed into one
//        distribution.
//   k6   `k6 run --out json=FILE` (k6_json.h): each Point of --metric
//        (default http_req_duration), a trend of time, is a record into the
//        run NAME.
//
// --unit ns|us|ms (default ns) is the run's integer unit. A source value is
// converted from its decimal text exactly (decimal_scale.h); one with more
// digits than the unit keeps is rounded to the nearest unit, halves up, and
// counted (`rounded`). perld then holds exactly the integers the import
// derived: the command prints how many records it sent, and
// --distribution-out FILE writes their exact distribution, which equals the
// run's total when the import is the run's only client.
//
// Every file is read and checked whole before anything is sent: a malformed
// line (named FILE:LINE), a metric that is not a trend of time or a source
// without any record ends the command with exit 2 and no run is opened. The
// files are then read a second time to send them (memory stays bounded).
// Then, as `perlctl load` without --spool, the command waits up to
// --connect-timeout for perld to open every run and exits 1 if it does not.
// Exit 0 only when perld acknowledged every record of every run; 1
// otherwise, saying per run how many were acknowledged.
//
// --mode windows (default): the client's exact windows (latency/count pairs:
// far fewer bytes than timestamps; a window is closed at least every 65,536
// records so no report outgrows perld's message limits); --mode raw: every
// record's timestamps. Both give the same exact total. A record's end is the
// source's own time (fio: ms since the job started; k6: the Point's time) in
// the unit and its start end - latency; perld reads the latency only and
// puts a record into the periodic window in which it arrives, so an import's
// windows are import time, not the source's timeline (README "Import").
//
// Threads: the calling thread reads and records; one thread takes
// SIGINT/SIGTERM (which stop the import and report what was acknowledged).
#pragma once

#include <string>
#include <vector>

#include "client/lib/secure_channel.h"
#include "client/perlctl/cli_args.h"  // UsageError: thrown for a usage error

namespace perld::perlctl {

// `security`: perlctl's --tls/--ca-file/--cert-file/--key-file/--token-file;
// `timeout_s`: how long to wait for the last acknowledgements.
int ImportCommand(const std::string& target, const client::ChannelSecurity& security,
                  bool json_output, double timeout_s, std::vector<std::string> args);

}  // namespace perld::perlctl
