#include "batchcast/core/check.h"

#include <cstdio>
#include <cstdlib>

namespace batchcast::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << file << ":" << line << ": check failed: " << condition << " ";
}

CheckFailure::~CheckFailure() {
  // The one place that writes to stderr directly: the logger may be the broken part.
  std::fprintf(stderr, "batchcast: %s\n", stream_.str().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace batchcast::internal
