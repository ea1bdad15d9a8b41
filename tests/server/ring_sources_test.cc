// Unit tests of RingSourcesAgree (server/src/ring_sources.h): a server with a
// ring per GPU starts only when every ring's scan of the dataset lists the
// same samples.
#include "server/src/ring_sources.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "batchcast/sources/synthetic_source.h"

namespace batchcast {
namespace {

// A synthetic source whose listing digest and sample groups are given.
class Listed : public SyntheticSource {
 public:
  Listed(uint64_t count, uint64_t digest, std::vector<uint64_t> groups = {})
      : SyntheticSource(count, 4), digest_(digest), groups_(std::move(groups)) {}
  uint64_t listing_digest() const override { return digest_; }
  std::vector<uint64_t> sample_groups() const override { return groups_; }

 private:
  uint64_t digest_;
  std::vector<uint64_t> groups_;
};

std::vector<std::unique_ptr<Source>> Rings(std::unique_ptr<Source> a, std::unique_ptr<Source> b) {
  std::vector<std::unique_ptr<Source>> sources;
  sources.push_back(std::move(a));
  sources.push_back(std::move(b));
  sources.push_back(std::make_unique<Listed>(10, 7));
  return sources;
}

// The message of RingSourcesAgree for `sources` ("" when they agree).
std::string Refusal(const std::vector<std::unique_ptr<Source>>& sources) {
  const Status s = RingSourcesAgree(sources);
  if (s.ok()) return "";
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  return s.message();
}

TEST(RingSources, OneDatasetOnEveryRingStarts) {
  EXPECT_EQ(Refusal(Rings(std::make_unique<Listed>(10, 7), std::make_unique<Listed>(10, 7))), "");
  std::vector<std::unique_ptr<Source>> one;
  one.push_back(std::make_unique<Listed>(3, 1));
  EXPECT_EQ(Refusal(one), "");
}

TEST(RingSources, AScanThatSawAnotherListingIsRefusedNamingTheRing) {
  std::string m = Refusal(Rings(std::make_unique<Listed>(10, 7), std::make_unique<Listed>(9, 7)));
  EXPECT_NE(m.find("ring 1's scan of the dataset differs from ring 0's (9 samples, ring 0 10)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("start the server again"), std::string::npos) << m;
  m = Refusal(Rings(std::make_unique<Listed>(10, 7), std::make_unique<Listed>(10, 8)));
  EXPECT_NE(m.find("ring 1's scan"), std::string::npos) << m;
  EXPECT_NE(m.find("other files or labels"), std::string::npos) << m;
  m = Refusal(Rings(std::make_unique<Listed>(10, 7, std::vector<uint64_t>{5, 5}),
                    std::make_unique<Listed>(10, 7, std::vector<uint64_t>{5, 5})));
  EXPECT_NE(m.find("ring 2's scan"), std::string::npos) << m;
  EXPECT_NE(m.find("other shards"), std::string::npos) << m;
  m = Refusal(Rings(std::make_unique<Listed>(10, 7), std::make_unique<SyntheticSource>(10, 8)));
  EXPECT_NE(m.find("other fields"), std::string::npos) << m;
}

}  // namespace
}  // namespace batchcast
