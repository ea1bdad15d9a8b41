// Shared by tests/e2e/image_test.cc (host ring) and tests/gpu/gpu_image_test.cc
// (device ring): consumers read a dataset with files that fail only when
// decoded (tools/make_dataset.py --decode-failures), and each of their epochs
// is checked against Note [Dropped files] (sources/src/image_dataset.h) and
// Note [Holes] (server/src/slot_table.h): exactly once minus the dropped
// files, never a stand-in.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "batchcast/client/consumer.h"
#include "batchcast/server/server.h"
#include "device_util.h"
#include "harness.h"
#include "sources/src/image_dataset.h"

namespace batchcast::testing {

// What one consumer read in one of its epochs.
struct EpochRead {
  std::vector<int64_t> indices;              // every sample, in order
  std::vector<int64_t> labels;               // of each sample
  std::vector<std::vector<uint8_t>> images;  // of each sample (host copy)
  uint32_t batches = 0;
};

// Reads `epochs` epochs of `c`; device batches are copied to the host on
// `stream` (their delivery stream).
inline std::vector<EpochRead> ReadEpochs(Consumer& c, int epochs, CudaStreamRef stream = {}) {
  std::vector<EpochRead> out(static_cast<size_t>(epochs));
  for (EpochRead& e : out) {
    ForEachBatchOfEpoch(&c, [&](const Batch& b) {
      auto image = b.field("image");
      auto label = b.field("label");
      ASSERT_TRUE(image.ok() && label.ok());
      std::vector<uint8_t> img, lab;
      ASSERT_TRUE(ReadToHost(*image, stream, &img).ok());
      ASSERT_TRUE(ReadToHost(*label, stream, &lab).ok());
      const size_t per = image->bytes / b.size();
      for (size_t i = 0; i < b.size(); ++i) {
        e.indices.push_back(b.indices()[i]);
        e.labels.push_back(reinterpret_cast<const int64_t*>(lab.data())[i]);
        e.images.emplace_back(img.begin() + i * per, img.begin() + (i + 1) * per);
      }
      ++e.batches;
    });
    if (::testing::Test::HasFatalFailure()) break;
  }
  return out;
}

// The listing of a dataset made with --decode-failures: each file's label,
// and the indices of the files whose path contains `marker`.
struct MarkedListing {
  std::vector<int64_t> label_of;
  std::set<int64_t> marked;
};
inline MarkedListing Mark(const std::vector<ImageEntry>& entries, const std::string& marker) {
  MarkedListing out;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].path.find(marker) != std::string::npos) out.marked.insert(int64_t(i));
    out.label_of.push_back(entries[i].label);
  }
  return out;
}

// One consumer's view of the server: its batch size, drop_last, and the
// batches per epoch it was announced.
struct ConsumerShape {
  uint32_t batch = 0;
  bool drop_last = true;
  uint64_t announced = 0;
};

// Connects one join=next_epoch consumer per shape to server `name` (a test
// failure and an empty list if one cannot) and sets each shape's announced
// batches per epoch.
inline std::vector<std::unique_ptr<Consumer>> ConnectShapes(const std::string& name,
                                                            std::vector<ConsumerShape>& shapes) {
  std::vector<std::unique_ptr<Consumer>> out;
  for (ConsumerShape& sh : shapes) {
    ConsumerOptions o =
        ReaderOptions(name, sh.batch, JoinPolicy::kNextEpoch, std::chrono::seconds(60));
    o.drop_last = sh.drop_last;
    auto c = Consumer::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return {};
    sh.announced = (*c)->batches_per_epoch();
    out.push_back(std::move(*c));
  }
  return out;
}

// ReadEpochs of every consumer at once, one thread each.
inline std::vector<std::vector<EpochRead>> ReadEpochsTogether(
    const std::vector<std::unique_ptr<Consumer>>& consumers, int epochs);

// A server, its consumers (one per shape) and what each read in each epoch.
struct ServedEpochs {
  std::unique_ptr<Server> server;
  std::vector<std::unique_ptr<Consumer>> consumers;
  std::vector<std::vector<EpochRead>> reads;  // [consumer][epoch]
};

// Starts a server of `o` that serves `epochs` epochs in batches of 8 over 4
// slots to one consumer per shape (it waits for them all), connects them
// (ConnectShapes) and has them read their epochs at once. A test failure and
// no reads when the server does not start or a consumer cannot connect.
inline ServedEpochs ServeEpochsToShapes(ServerOptions o, int epochs,
                                        std::vector<ConsumerShape>& shapes) {
  o.batch_size = 8;
  o.window = 4;
  o.epochs = static_cast<uint64_t>(epochs);
  o.min_consumers = static_cast<uint32_t>(shapes.size());
  ServedEpochs out;
  auto started = Server::Start(o);
  EXPECT_TRUE(started.ok()) << started.status().ToString();
  if (!started.ok()) return out;
  out.server = std::move(*started);
  out.consumers = ConnectShapes(o.name, shapes);
  if (out.consumers.size() == shapes.size()) out.reads = ReadEpochsTogether(out.consumers, epochs);
  return out;
}

// ReadEpochs of every consumer at once, one thread each.
inline std::vector<std::vector<EpochRead>> ReadEpochsTogether(
    const std::vector<std::unique_ptr<Consumer>>& consumers, int epochs) {
  return ReadTogether(consumers, [epochs](Consumer& c) { return ReadEpochs(c, epochs); });
}

// Checks one consumer epoch `e` whose producer epoch's order is `order`
// (consumers that joined at the start with join=next_epoch): its samples are
// `order` without `dropped`, in that order (with drop_last all but fewer than
// B at the end), so no index twice and no dropped one ever; the labels are
// `label_of`'s; it has at least announced - |dropped| batches and at most
// announced.
inline void ExpectEpochMinusDropped(const EpochRead& e, const std::vector<int64_t>& order,
                                    const std::set<int64_t>& dropped, ConsumerShape shape,
                                    const std::vector<int64_t>& label_of) {
  std::vector<int64_t> expected;
  for (int64_t i : order) {
    if (dropped.count(i) == 0) expected.push_back(i);
  }
  const size_t want =
      shape.drop_last ? expected.size() / shape.batch * shape.batch : expected.size();
  ASSERT_EQ(e.indices.size(), want);
  EXPECT_TRUE(std::equal(e.indices.begin(), e.indices.end(), expected.begin()))
      << "the samples are the epoch's order without the dropped files";
  EXPECT_EQ(std::set<int64_t>(e.indices.begin(), e.indices.end()).size(), e.indices.size())
      << "an index arrived twice";
  for (size_t i = 0; i < e.indices.size(); ++i) {
    EXPECT_EQ(e.labels[i], label_of[static_cast<size_t>(e.indices[i])]) << "sample " << i;
  }
  EXPECT_GE(e.batches + dropped.size(), shape.announced);
  EXPECT_LE(e.batches, shape.announced);
}

}  // namespace batchcast::testing
