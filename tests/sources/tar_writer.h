// Test helper: writes ustar archives (members in the given order), truncated
// ones too, so the shard tests need no tar tool.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace batchcast::testing {

using TarMembers = std::vector<std::pair<std::string, std::vector<uint8_t>>>;

inline std::vector<uint8_t> Text(const std::string& s) { return {s.begin(), s.end()}; }

// The bytes of a ustar archive of `members` (regular files, mode 0644).
inline std::vector<uint8_t> TarBytes(const TarMembers& members) {
  std::vector<uint8_t> out;
  for (const auto& [name, data] : members) {
    uint8_t h[512] = {};
    std::snprintf(reinterpret_cast<char*>(h), 100, "%s", name.c_str());
    std::snprintf(reinterpret_cast<char*>(h + 100), 8, "%07o", 0644);
    std::snprintf(reinterpret_cast<char*>(h + 108), 8, "%07o", 0);
    std::snprintf(reinterpret_cast<char*>(h + 116), 8, "%07o", 0);
    std::snprintf(reinterpret_cast<char*>(h + 124), 12, "%011llo",
                  static_cast<unsigned long long>(data.size()));
    std::snprintf(reinterpret_cast<char*>(h + 136), 12, "%011o", 0);
    h[156] = '0';
    std::memcpy(h + 257, "ustar", 6);
    std::memcpy(h + 263, "00", 2);
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (uint8_t b : h) sum += b;
    std::snprintf(reinterpret_cast<char*>(h + 148), 8, "%06o", sum);
    out.insert(out.end(), h, h + 512);
    out.insert(out.end(), data.begin(), data.end());
    out.resize((out.size() + 511) / 512 * 512, 0);
  }
  out.resize(out.size() + 1024, 0);
  return out;
}

inline void WriteTar(const std::string& path, const TarMembers& members, size_t cut_at = 0) {
  std::vector<uint8_t> bytes = TarBytes(members);
  if (cut_at > 0) bytes.resize(cut_at);
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace batchcast::testing
