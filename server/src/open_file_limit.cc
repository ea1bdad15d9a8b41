#include "open_file_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "core/src/logging.h"

namespace batchcast {

void RaiseOpenFileLimit() {
  static std::once_flag once;
  std::call_once(once, [] {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
    const rlim_t before = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      BC_LOG_WARN("cannot raise the open-file limit from {} to {}: {}", before, limit.rlim_max,
                  std::strerror(errno));
      return;
    }
    BC_LOG_INFO("raised the open-file limit from {} to {}", before, limit.rlim_max);
  });
}

size_t OpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1024;
  return static_cast<size_t>(limit.rlim_cur);
}

}  // namespace batchcast
