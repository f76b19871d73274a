#include "daemon/common/errno_text.h"

#include <string.h>

namespace perld::common {

std::string ErrnoText(int err) {
  char buf[128];
  // The GNU form (_GNU_SOURCE, as g++ and clang++ define it): returns the
  // text, in `buf` or a static string.
  return strerror_r(err, buf, sizeof(buf));
}

}  // namespace perld::common
