// Small helpers shared by the benchmark programs (not library code).
//
// CpuSeconds(): the process's user + system CPU time (getrusage), to report
// cores used as CPU seconds per wall second. ReadAll(): a file's bytes, empty
// when it cannot be opened.
#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace batchcast::bench {

inline double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec +
         u.ru_stime.tv_usec * 1e-6;
}

inline std::vector<uint8_t> ReadAll(const std::string& path) {
  std::vector<uint8_t> out;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.insert(out.end(), buf, buf + n);
  std::fclose(f);
  return out;
}

}  // namespace batchcast::bench
