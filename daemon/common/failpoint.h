// Failpoints: named crash points compiled into the product (etcd's gofail,
// reduced to the one action crash tests need), so a test can kill a process
// exactly between two steps of a protocol instead of at a random time.
//
//   PERLD_FAILPOINT=NAME[:N][,NAME[:N]...]
//
// makes the process kill itself with SIGKILL the N-th time (default: the
// first) execution reaches PERLD_FAILPOINT_HIT("NAME"), after one line on
// stderr naming the point. Nothing is flushed or cleaned up: the process
// dies as it would from `kill -9` at that instant.
//
// Off (the variable unset, as in every normal run): each point costs one
// load of a function-local static and a never-taken branch.
//
// The points (each a test in tests/integration/failpoint_test.py):
//   checkpoint-after-commit-before-ack  daemon: a checkpoint committed, its
//                                       durable acknowledgement not yet given
//   run-ended-before-remembered         daemon: a run ended, its final total
//                                       not yet handed to the state store
//   upstream-stored-before-send         daemon (tier edge): messages to the
//                                       parent committed, not yet sent
//   spool-after-append-before-send      client: a message appended to the
//                                       spool, not yet queued for sending
//
// Threads: any; the hit counters are atomic.
#pragma once

namespace perld::failpoint {

// True when PERLD_FAILPOINT was set at the first call.
bool Armed();
// Counts a hit of `name` and kills the process when it is armed for this hit.
void Hit(const char* name);

}  // namespace perld::failpoint

#define PERLD_FAILPOINT_HIT(name)                   \
  do {                                              \
    if (::perld::failpoint::Armed()) [[unlikely]] { \
      ::perld::failpoint::Hit(name);                \
    }                                               \
  } while (false)
