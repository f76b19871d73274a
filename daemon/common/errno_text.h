// ErrnoText: the text of an errno value ("Connection refused"), for log
// lines and messages that are not an absl::Status (a Status from an errno
// is absl::ErrnoToStatus, which words it the same way).
//
// Threads: any (strerror_r, never strerror's shared buffer).
#pragma once

#include <string>

namespace perld::common {

std::string ErrnoText(int err);

}  // namespace perld::common
