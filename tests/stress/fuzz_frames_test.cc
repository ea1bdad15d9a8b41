// The protocol decoder under the hostile peer's frames, in-process (fast, and
// under AddressSanitizer/UBSan in CI): no frame crashes it, and whatever it
// accepts survives a round trip through the encoder unchanged.
#include "fuzz_frames.h"

#include <gtest/gtest.h>

#include <span>

namespace batchcast::stress {
namespace {

Result<proto::Message> DecodeString(const std::string& s) {
  return proto::Decode(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

TEST(FrameFuzzer, DecoderSurvivesEveryKindAndRoundTripsWhatItAccepts) {
  FrameFuzzer fz(12345);
  uint64_t accepted[static_cast<int>(FrameFuzzer::Kind::kCount)] = {};
  uint64_t total[static_cast<int>(FrameFuzzer::Kind::kCount)] = {};
  for (int i = 0; i < 100000; ++i) {
    FrameFuzzer::Kind kind;
    const std::string frame = fz.Any(&kind);
    ++total[static_cast<int>(kind)];
    Result<proto::Message> m = DecodeString(frame);
    if (!m.ok()) {
      EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << m.status().ToString();
      continue;
    }
    ++accepted[static_cast<int>(kind)];
    Result<proto::Message> again = DecodeString(proto::Encode(*m));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_TRUE(*again == *m) << FrameFuzzer::KindName(kind);
  }
  // The generator reaches the decoder's bodies: valid frames mostly decode,
  // and some mutated ones do too.
  EXPECT_GT(accepted[static_cast<int>(FrameFuzzer::Kind::kValid)],
            total[static_cast<int>(FrameFuzzer::Kind::kValid)] / 2);
  EXPECT_GT(accepted[static_cast<int>(FrameFuzzer::Kind::kMutated)], 0u);
  EXPECT_EQ(accepted[static_cast<int>(FrameFuzzer::Kind::kTruncated)], 0u)
      << "a truncated message must never decode";
}

TEST(FrameFuzzer, IsDeterministicForASeed) {
  FrameFuzzer a(7), b(7);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a.Any(), b.Any());
}

}  // namespace
}  // namespace batchcast::stress
