// Resume on a device ring (docs/semantics.md, "Resume"): a consumer that
// leaves at step k of an epoch while another reads on, and a new consumer
// started from its position(), together read exactly the batches of the
// uninterrupted run, byte for byte (device batches copied to the host), the
// catch-up served from the resume lane's device slots. A server restarted
// with the same options continues there too. Skipped without a usable GPU.
#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "../e2e/ring_device.h"
#include "batchcast/client/consumer.h"
#include "batchcast/cuda/runtime.h"

namespace batchcast {
namespace {

using namespace std::chrono_literals;
using testing::HostBytes;
using testing::Stats;
using testing::UniqueName;

// One batch as the test compares it: the consumer epoch, the indices and
// every byte of both fields (copied from the device).
struct Seen {
  uint32_t epoch = 0;
  std::vector<int64_t> indices;
  std::vector<uint8_t> image, label;
  bool operator==(const Seen&) const = default;
};

class GpuResume : public ::testing::Test {
 protected:
  void SetUp() override { BC_REQUIRE_GPU(); }

  // Reads `batches` batches of `c` (markers skipped); false on an error.
  bool Read(Consumer* c, int batches, std::vector<Seen>* out,
            std::chrono::milliseconds pause = 0ms) {
    for (int i = 0; i < batches;) {
      auto b = c->Next();
      if (!b.ok()) {
        ADD_FAILURE() << b.status().ToString();
        return false;
      }
      if (b->end_of_epoch()) continue;
      EXPECT_TRUE(ring_.BatchMatchesFormula(*b));
      Seen s{b->epoch(), {b->indices().begin(), b->indices().end()}, {}, {}};
      s.image = HostBytes(*b->field("image"));
      s.label = HostBytes(*b->field("label"));
      out->push_back(std::move(s));
      ++i;
      if (pause.count() > 0) std::this_thread::sleep_for(pause);
    }
    return true;
  }

  std::unique_ptr<Consumer> Resume(const std::string& name, const ConsumerPosition& place) {
    ConsumerOptions o;
    o.endpoint = name;
    o.batch_size = 16;
    o.timeout = 20s;
    o.resume_from = place;
    auto c = Consumer::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  const testing::Ring ring_{Device::Cuda(0)};
};

TEST_F(GpuResume, ALoaderThatLeftMidEpochResumesExactlyFromTheLane) {
  const std::string name = UniqueName("gresume");
  // 25 batches of 16 per epoch.
  auto server = ring_.StartServer(name, {"--synthetic", "400", "--size", "16", "--batch-size", "16",
                                         "--window", "4", "--min-consumers", "2"});
  auto other = ring_.Connect(name, 16, JoinPolicy::kImmediate);
  auto victim = ring_.Connect(name, 16, JoinPolicy::kImmediate);
  ASSERT_TRUE(other && victim);
  std::vector<Seen> uninterrupted, before, after;
  std::thread reader([&] { Read(other.get(), 150, &uninterrupted, 5ms); });
  ASSERT_TRUE(Read(victim.get(), 7, &before));
  const ConsumerPosition place = victim->position();
  EXPECT_EQ(place.epoch, 0u);
  EXPECT_EQ(place.step, 7u);
  const Result<ConsumerPosition> parsed = ConsumerPosition::Parse(place.ToString());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  victim.reset();
  std::this_thread::sleep_for(300ms);  // the other reads on: the ring moves away
  auto resumed = Resume(name, *parsed);
  ASSERT_TRUE(resumed);
  ASSERT_TRUE(Read(resumed.get(), 100 - 7, &after));
  // It leaves: attached and reading no more, it would hold the other reader
  // back (lag policy block) before that one's 150 batches.
  resumed.reset();
  reader.join();
  ASSERT_GE(uninterrupted.size(), 100u);
  before.insert(before.end(), after.begin(), after.end());
  EXPECT_TRUE(std::equal(before.begin(), before.end(), uninterrupted.begin()))
      << "the resumed batches differ from the uninterrupted run";
  const nlohmann::json st = Stats(name);
  EXPECT_GE(st["resume_lane"]["owners"].get<int>(), 1) << st.dump();
}

TEST_F(GpuResume, AServerRestartedWithTheSameOptionsContinuesExactly) {
  const std::string name = UniqueName("grestart");
  const std::vector<std::string> args = {"--synthetic",  "400", "--size",   "16",
                                         "--batch-size", "16",  "--window", "4"};
  std::vector<Seen> reference, before, after;
  {
    auto ref_server = ring_.StartServer(name + "-ref", args);
    auto ref = ring_.Connect(name + "-ref", 16, JoinPolicy::kImmediate);
    ASSERT_TRUE(ref && Read(ref.get(), 60, &reference));
  }
  ConsumerPosition place;
  {
    auto server = ring_.StartServer(name, args);
    auto victim = ring_.Connect(name, 16, JoinPolicy::kImmediate);
    ASSERT_TRUE(victim && Read(victim.get(), 31, &before));
    place = victim->position();
    server->Kill();  // SIGKILL: the node was preempted
  }
  auto server = ring_.StartServer(name, args);
  auto resumed = Resume(name, place);
  ASSERT_TRUE(resumed && Read(resumed.get(), 60 - 31, &after));
  before.insert(before.end(), after.begin(), after.end());
  EXPECT_TRUE(before == reference);
  EXPECT_GE(Stats(name)["stream_moves"].get<int>(), 1);
}

}  // namespace
}  // namespace batchcast
