#include "shard_scan.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>

#include "scan_progress.h"
#include "shard_pattern.h"
#include "tar_archive.h"
#include "thread_pool.h"

namespace batchcast {
namespace {

// Splits a member name into key and lower-case extension (false: no dot in
// its file name, not a sample member).
bool SplitKey(const std::string& name, std::string* key, std::string* ext) {
  const size_t slash = name.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = name.find('.', base);
  if (dot == std::string::npos || dot == base) return false;
  *key = name.substr(0, dot);
  *ext = name.substr(dot + 1);
  std::transform(ext->begin(), ext->end(), ext->begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return true;
}

bool IsImageExt(const std::string& ext) {
  static const std::set<std::string> kExt = {"jpg", "jpeg", "png",  "ppm", "bmp",
                                             "pgm", "tif",  "tiff", "webp"};
  return kExt.count(ext) != 0;
}

// Label members in order of preference.
int LabelRank(const std::string& ext) {
  if (ext == "cls") return 0;
  if (ext == "json") return 1;
  if (ext == "txt") return 2;
  return -1;
}

// One sample being collected.
struct Group {
  std::string key;
  std::optional<ShardSample> image;  // set once the image member was seen
  int label_rank = 3;
  Result<int64_t> label = InvalidArgumentError("no label");
  std::string label_member;
};

// Scans shard `k` into `out`; returns its damage (OK when none).
Status ScanOne(const std::string& path, uint32_t k, const ShardImageCheck& check,
               std::vector<ShardSample>& out) {
  Result<TarReader> opened = TarReader::Open(path);
  if (!opened.ok()) return opened.status().WithContext(path);
  TarReader& tar = *opened;
  std::vector<uint8_t> bytes;
  std::optional<Group> group;
  auto finish = [&] {
    if (!group) return;
    ShardSample s;
    if (group->image) {
      s = std::move(*group->image);
    } else {
      s.name = path + ":" + group->key;
      s.shard = k;
      s.verdict = InvalidArgumentError("no image member (.jpg, .jpeg, ...) for key " + group->key);
    }
    if (s.verdict.ok() && group->label_rank == 3) {
      s.verdict = InvalidArgumentError(
          "no label member (.cls, .json with a \"label\" field, or "
          ".txt) for key " +
          group->key);
    } else if (s.verdict.ok() && !group->label.ok()) {
      s.verdict = InvalidArgumentError("bad label in " + group->label_member + ": " +
                                       group->label.status().message());
    } else if (s.verdict.ok()) {
      s.label = *group->label;
    }
    out.push_back(std::move(s));
    group.reset();
  };
  TarReader::Member m;
  for (uint64_t index = 0;; ++index) {
    Result<bool> more = tar.Next(&m);
    if (!more.ok()) {
      group.reset();  // the sample in progress is lost with the rest
      return more.status().WithContext(path + " at member " + std::to_string(index));
    }
    if (!*more) break;
    std::string key, ext;
    if (!m.regular || !SplitKey(m.name, &key, &ext)) continue;
    if (group && group->key != key) finish();
    if (!group) group.emplace().key = key;
    const bool image = IsImageExt(ext) && !group->image;
    const int rank = LabelRank(ext);
    if (!image && (rank < 0 || rank >= group->label_rank)) continue;
    const Status read = tar.ReadData(bytes);
    if (!read.ok()) {
      group.reset();
      return read.WithContext(path + " at member " + std::to_string(index) + " (" + m.name + ")");
    }
    if (image) {
      ShardSample& s = group->image.emplace();
      s.name = path + ":" + m.name;
      s.shard = k;
      s.member = index;
      s.verdict = check(s.name, bytes, &s.format, &s.info, &s.flag);
    } else {
      group->label_rank = rank;
      group->label = ParseShardLabel(ext, bytes);
      group->label_member = m.name;
    }
  }
  finish();
  return Status::Ok();
}

}  // namespace

Result<int64_t> ParseShardLabel(const std::string& ext, std::span<const uint8_t> bytes) {
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (ext == "json") {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return InvalidArgumentError("not a JSON object");
    const auto it = j.find("label");
    if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < 0) {
      return InvalidArgumentError("no non-negative integer \"label\" field");
    }
    return it->get<int64_t>();
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < 0) {
    return InvalidArgumentError("'" + std::string(text.substr(0, 32)) +
                                "' is not a non-negative integer");
  }
  return v;
}

Result<ShardScan> ScanShards(const std::string& data, int threads, const ShardImageCheck& check,
                             RetryingReader& io) {
  if (!BuiltWithTar()) return TarReader::Open(data).status();
  ShardScan scan;
  BATCHCAST_ASSIGN_OR_RETURN(scan.shards, ExpandShardPattern(data));
  const size_t n = scan.shards.size();
  std::vector<std::vector<ShardSample>> per_shard(n);
  std::vector<Status> damage(n);
  ScanProgress progress("scanning " + data, n);
  progress.set_unit("shards");
  {
    ThreadPool pool(std::max(1, std::min<int>(threads, static_cast<int>(n))));
    BATCHCAST_RETURN_IF_ERROR(pool.ParallelFor(static_cast<int64_t>(n), [&](int, int64_t i) {
      const size_t k = static_cast<size_t>(i);
      // Note [Read retries]: a shard that cannot be read now is scanned again.
      damage[k] = io.Retry(scan.shards[k], [&] {
        per_shard[k].clear();
        return ScanOne(scan.shards[k], static_cast<uint32_t>(k), check, per_shard[k]);
      });
      progress.Add();
    }));
  }
  for (size_t k = 0; k < n; ++k) {
    for (ShardSample& s : per_shard[k]) scan.samples.push_back(std::move(s));
    if (!damage[k].ok()) scan.damage.push_back(damage[k]);
  }
  return scan;
}

}  // namespace batchcast
