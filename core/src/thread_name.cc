#include "core/src/thread_name.h"

#include <pthread.h>

#include <string>

namespace batchcast {

void SetThreadName(std::string_view name) {
  constexpr size_t kMax = 15;  // TASK_COMM_LEN (16) less the terminating NUL
  const std::string cut(name.substr(0, kMax));
  (void)pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace batchcast
