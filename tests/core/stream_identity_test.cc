// StreamIdentity (core/src/stream_identity.h): its text form, and the
// comparison that names every component that differs (Note [Resume]).
#include "core/src/stream_identity.h"

#include <gtest/gtest.h>

namespace batchcast {
namespace {

StreamIdentity Sample() {
  StreamIdentity id;
  id.Add("source", "dataset");
  id.Add("seed", "0");
  id.Add("fields", "image:float32[3,224,224] label:int64[]");
  return id;
}

TEST(StreamIdentityTest, TextRoundTrips) {
  const StreamIdentity id = Sample();
  EXPECT_EQ(id.ToString(), "source=dataset;seed=0;fields=image:float32[3,224,224] label:int64[]");
  Result<StreamIdentity> back = StreamIdentity::Parse(id.ToString());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->components(), id.components());
  EXPECT_TRUE(id.CheckSaved(id.ToString()).ok());
}

TEST(StreamIdentityTest, CheckSavedNamesEveryDifferenceWithBothValues) {
  const StreamIdentity id = Sample();
  const Status s = id.CheckSaved("source=dataset;seed=7;shard=1/2");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("seed: saved 7, here 0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("fields: saved (none), here image:"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("shard: saved 1/2, here (none)"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("source"), std::string::npos) << s.message();
}

TEST(StreamIdentityTest, MalformedTextIsRefused) {
  for (const char* text : {"", "seed", "=1", "seed=1;seed=2", "seed=1;;x=2"}) {
    EXPECT_FALSE(StreamIdentity::Parse(text).ok()) << text;
    EXPECT_EQ(Sample().CheckSaved(text).code(), StatusCode::kInvalidArgument) << text;
  }
}

TEST(StreamIdentityTest, DigestsAreStable) {
  EXPECT_EQ(Hex64(Fnv1a64("")), "cbf29ce484222325");
  EXPECT_EQ(Hex64(Fnv1a64("a")), "af63dc4c8601ec8c");
  EXPECT_EQ(Fnv1a64("ab"), Fnv1a64("b", Fnv1a64("a")));
}

}  // namespace
}  // namespace batchcast
