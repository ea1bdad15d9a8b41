#include "eoi_probe.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "dataset_files.h"

namespace batchcast {

bool EndsWithEoi(std::span<const uint8_t> bytes) {
  if (bytes.size() < 4) return false;
  const std::span<const uint8_t> tail = bytes.last(std::min<size_t>(bytes.size(), 32));
  for (size_t i = 0; i + 1 < tail.size(); ++i) {
    if (tail[i] == 0xFF && tail[i + 1] == 0xD9) return true;
  }
  return false;
}

bool EndsWithEoi(const std::string& path, std::span<const uint8_t> bytes, bool whole) {
  if (whole) return EndsWithEoi(bytes);
  Result<int> opened = OpenRegularFile(path);
  if (!opened.ok()) return false;
  const int fd = *opened;
  struct stat st {};
  bool found = false;
  if (fstat(fd, &st) == 0 && st.st_size >= 4) {
    uint8_t tail[32];
    const off_t n = std::min<off_t>(st.st_size, 32);
    if (pread(fd, tail, static_cast<size_t>(n), st.st_size - n) == n) {
      found = EndsWithEoi(std::span<const uint8_t>(tail, static_cast<size_t>(n)));
    }
  }
  close(fd);
  return found;
}

}  // namespace batchcast
