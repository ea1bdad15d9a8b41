// ConsumerPosition's text form (client/include/batchcast/client/consumer.h):
// it round-trips, and what comes back changed, cut or from a newer format
// is refused naming why (docs/semantics.md, "Resume").
#include <gtest/gtest.h>

#include "batchcast/client/consumer.h"

namespace batchcast {
namespace {

ConsumerPosition Sample() {
  ConsumerPosition p;
  p.stream = "source=dataset;seed=0;fields=image:uint8[3,8,8] label:int64[]";
  p.epoch = 3;
  p.step = 17;
  p.epoch_start = 3000;
  p.next_seq = 3544;
  p.skipped = 2;
  p.batch_size = 32;
  p.world_size = 2;
  p.rank = 1;
  return p;
}

TEST(ConsumerPositionTest, TextRoundTrips) {
  const ConsumerPosition p = Sample();
  const std::string text = p.ToString();
  EXPECT_TRUE(text.starts_with("batchcast-position/1 epoch=3 step=17 ")) << text;
  EXPECT_NE(text.find(" check=" + p.Check() + " stream=source=dataset;"), std::string::npos)
      << text;
  Result<ConsumerPosition> back = ConsumerPosition::Parse(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, p);
}

TEST(ConsumerPositionTest, ChangedCutOrNewerTextIsRefused) {
  const std::string text = Sample().ToString();
  auto refused = [](const std::string& t, std::string_view why) {
    Result<ConsumerPosition> r = ConsumerPosition::Parse(t);
    ASSERT_FALSE(r.ok()) << t;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  };
  // One sample off: the check catches it.
  std::string off = text;
  off.replace(off.find("next_seq=3544"), 13, "next_seq=3545");
  refused(off, "corrupt");
  refused(text.substr(0, text.find(" rank=")), "no stream");
  std::string no_step = text;
  no_step.erase(no_step.find("step=17 "), 8);
  refused(no_step, "no step");
  std::string newer = text;
  newer.replace(0, std::string("batchcast-position/1").size(), "batchcast-position/2");
  refused(newer, "newer than this batchcast's");
  refused("hello", "does not start with");
  std::string bad_number = text;
  bad_number.replace(bad_number.find("epoch=3"), 7, "epoch=x");
  refused(bad_number, "no integer");
  EXPECT_NE(Sample().Check(), [] {
    ConsumerPosition p = Sample();
    p.rank = 0;
    return p.Check();
  }());
}

}  // namespace
}  // namespace batchcast
