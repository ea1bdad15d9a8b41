#include "core/src/file_mode.h"

#include <cstdio>

namespace batchcast {

std::string FileModeText(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace batchcast
