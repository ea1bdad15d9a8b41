#include "shard_pattern.h"

#include <glob.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <string_view>

namespace batchcast {
namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxNames = 10'000'000;

bool EndsWithTar(std::string_view s) { return s.size() > 4 && s.substr(s.size() - 4) == ".tar"; }

// The .tar files directly inside `dir`, sorted.
std::vector<std::string> TarFilesIn(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::error_code sec;
    if (EndsWithTar(it->path().filename().string()) && fs::is_regular_file(it->status(sec))) {
      out.push_back(it->path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> Split(const std::string& s, std::string_view sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t at = s.find(sep, pos);
    out.push_back(s.substr(pos, at == std::string::npos ? std::string::npos : at - pos));
    if (at == std::string::npos) return out;
    pos = at + sep.size();
  }
}

Result<uint64_t> Bound(std::string_view text, const std::string& pattern) {
  uint64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) {
    return InvalidArgumentError("shard pattern " + pattern + ": '" + std::string(text) +
                                "' is not a non-negative integer");
  }
  return v;
}

// The alternatives of one brace body: "000..012" or "a,b,c".
Result<std::vector<std::string>> Alternatives(std::string_view body, const std::string& pattern) {
  const size_t dots = body.find("..");
  if (dots == std::string_view::npos) {
    std::vector<std::string> out = Split(std::string(body), ",");
    if (body.empty()) return InvalidArgumentError("shard pattern " + pattern + ": empty braces");
    return out;
  }
  const std::string_view lo_text = body.substr(0, dots), hi_text = body.substr(dots + 2);
  BATCHCAST_ASSIGN_OR_RETURN(const uint64_t lo, Bound(lo_text, pattern));
  BATCHCAST_ASSIGN_OR_RETURN(const uint64_t hi, Bound(hi_text, pattern));
  if (hi < lo) {
    return InvalidArgumentError("shard pattern " + pattern + ": range {" + std::string(body) +
                                "} runs backwards");
  }
  if (hi - lo >= kMaxNames) {
    return InvalidArgumentError("shard pattern " + pattern + ": range {" + std::string(body) +
                                "} is too large");
  }
  const size_t width = lo_text.size() > 1 && lo_text[0] == '0' ? lo_text.size() : 0;
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(hi - lo + 1));
  for (uint64_t v = lo; v <= hi; ++v) {
    std::string s = std::to_string(v);
    if (s.size() < width) s.insert(0, width - s.size(), '0');
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

bool IsShardData(const std::string& data) {
  if (data.find("::") != std::string::npos || EndsWithTar(data)) return true;
  std::error_code ec;
  return fs::is_directory(data, ec) && !TarFilesIn(data).empty();
}

Result<std::vector<std::string>> ExpandBraces(const std::string& pattern) {
  std::vector<std::string> names = {""};
  size_t pos = 0;
  while (pos < pattern.size()) {
    const size_t open = pattern.find_first_of("{}", pos);
    const std::string literal = pattern.substr(pos, open == std::string::npos ? open : open - pos);
    for (std::string& n : names) n += literal;
    if (open == std::string::npos) break;
    const size_t close = pattern.find_first_of("{}", open + 1);
    if (pattern[open] == '}' || close == std::string::npos || pattern[close] == '{') {
      return InvalidArgumentError("shard pattern " + pattern + ": unbalanced braces");
    }
    BATCHCAST_ASSIGN_OR_RETURN(
        const std::vector<std::string> alts,
        Alternatives(std::string_view(pattern).substr(open + 1, close - open - 1), pattern));
    if (names.size() * alts.size() > kMaxNames) {
      return InvalidArgumentError("shard pattern " + pattern + " names more than 10000000 files");
    }
    std::vector<std::string> next;
    next.reserve(names.size() * alts.size());
    for (const std::string& n : names) {
      for (const std::string& a : alts) next.push_back(n + a);
    }
    names = std::move(next);
    pos = close + 1;
  }
  return names;
}

Result<std::vector<std::string>> ExpandShardPattern(const std::string& data) {
  std::vector<std::string> shards;
  for (const std::string& item : Split(data, "::")) {
    if (item.empty()) return InvalidArgumentError("shard list " + data + " has an empty entry");
    std::error_code ec;
    if (fs::is_directory(item, ec)) {
      std::vector<std::string> found = TarFilesIn(item);
      if (found.empty()) return InvalidArgumentError("directory " + item + " holds no .tar files");
      shards.insert(shards.end(), found.begin(), found.end());
      continue;
    }
    BATCHCAST_ASSIGN_OR_RETURN(std::vector<std::string> names, ExpandBraces(item));
    for (std::string& name : names) {
      if (name.find_first_of("*?[") != std::string::npos) {
        glob_t g{};
        const int rc = glob(name.c_str(), 0, nullptr, &g);
        std::vector<std::string> found(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
        globfree(&g);
        found.erase(std::remove_if(found.begin(), found.end(),
                                   [](const std::string& f) { return !EndsWithTar(f); }),
                    found.end());
        if (found.empty()) return InvalidArgumentError("no .tar file matches " + name);
        std::sort(found.begin(), found.end());
        shards.insert(shards.end(), found.begin(), found.end());
      } else if (!EndsWithTar(name)) {
        return InvalidArgumentError("shard " + name + " is not a .tar file");
      } else {
        shards.push_back(std::move(name));
      }
    }
  }
  size_t missing = 0;
  const std::string* first = nullptr;
  for (const std::string& s : shards) {
    std::error_code ec;
    if (!fs::exists(s, ec)) {
      if (missing++ == 0) first = &s;
    }
  }
  if (missing > 0) {
    return NotFoundError(std::to_string(missing) + " of the " + std::to_string(shards.size()) +
                         " shards of " + data + " do not exist (the first: " + *first + ")");
  }
  return shards;
}

}  // namespace batchcast
