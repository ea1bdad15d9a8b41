#include "ring_sources.h"

#include <string>

#include "batchcast/core/check.h"

namespace batchcast {

Status RingSourcesAgree(std::span<const std::unique_ptr<Source>> sources) {
  BATCHCAST_CHECK(!sources.empty());
  const Source& first = *sources.front();
  for (size_t i = 1; i < sources.size(); ++i) {
    const Source& s = *sources[i];
    std::string what;
    if (s.size() != first.size()) {
      what = std::to_string(s.size()) + " samples, ring 0 " + std::to_string(first.size());
    } else if (s.fields() != first.fields()) {
      what = "other fields";
    } else if (s.sample_groups() != first.sample_groups()) {
      what = "other shards";
    } else if (s.listing_digest() != first.listing_digest()) {
      what = "other files or labels";
    } else {
      continue;
    }
    return UnavailableError("ring " + std::to_string(i) +
                            "'s scan of the dataset differs from ring 0's (" + what +
                            "): the dataset changed while the server started, or a file could "
                            "not be read by one scan; start the server again");
  }
  return Status::Ok();
}

}  // namespace batchcast
