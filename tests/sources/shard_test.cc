// Tar shards (WebDataset layout): the pattern expansion and its errors
// (shard_pattern.h), the index pass (shard_scan.h: keys, labels, samples
// without label or image, damaged shards), the dataset's indices and groups
// over shards, and the shard reader (Note [Shard reads]): the bytes of every
// sample, sequential reads in the sampler's order (each shard opened once an
// epoch, nothing read twice, memory bounded by the shuffle buffer), and
// correct bytes in any other order.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>
#include <set>

#include "core/src/sampler.h"
#include "log_capture.h"
#include "sources/src/file_prefetcher.h"
#include "sources/src/image_dataset.h"
#include "sources/src/image_source.h"
#include "sources/src/shard_pattern.h"
#include "sources/src/shard_scan.h"
#include "sources/src/tar_archive.h"
#include "tar_writer.h"
#include "temp_dataset.h"

namespace batchcast {
namespace {

using testing::TarMembers;
using testing::TempDataset;
using testing::Text;
using testing::WriteTar;

#define SKIP_WITHOUT_TAR() \
  if (!BuiltWithTar())     \
  GTEST_SKIP() << "built without libarchive (BATCHCAST_WITH_TAR=OFF or not found)"

std::vector<std::string> Expand(const std::string& p) {
  auto r = ExpandBraces(p);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<std::string>{};
}

TEST(ShardPattern, BraceRangesAndLists) {
  EXPECT_EQ(Expand("a-{000..003}.tar"),
            (std::vector<std::string>{"a-000.tar", "a-001.tar", "a-002.tar", "a-003.tar"}));
  EXPECT_EQ(Expand("a-{8..11}.tar"),
            (std::vector<std::string>{"a-8.tar", "a-9.tar", "a-10.tar", "a-11.tar"}));
  EXPECT_EQ(Expand("{x,y}-{0..1}.tar"),
            (std::vector<std::string>{"x-0.tar", "x-1.tar", "y-0.tar", "y-1.tar"}));
  EXPECT_EQ(Expand("plain.tar"), (std::vector<std::string>{"plain.tar"}));
  EXPECT_EQ(Expand("t-{000000..001023}.tar").size(), 1024u);
  EXPECT_EQ(Expand("t-{000000..001023}.tar").back(), "t-001023.tar");
}

TEST(ShardPattern, BadPatternsSayWhy) {
  auto bad = [](const std::string& p, const std::string& why) {
    auto r = ExpandBraces(p);
    ASSERT_FALSE(r.ok()) << p;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().ToString();
  };
  bad("a-{0..3.tar", "unbalanced");
  bad("a-0..3}.tar", "unbalanced");
  bad("a-{{0..3}}.tar", "unbalanced");
  bad("a-{}.tar", "empty braces");
  bad("a-{5..3}.tar", "backwards");
  bad("a-{x..3}.tar", "not a non-negative integer");
  bad("a-{-1..3}.tar", "not a non-negative integer");
  bad("a-{0..99999999999}.tar", "too large");
  bad("{0..9999}{0..9999}.tar", "more than 10000000");
}

TEST(ShardPattern, GlobsDirectoriesListsAndMissingShards) {
  TempDataset d;
  for (const char* n : {"s-2.tar", "s-0.tar", "s-1.tar", "notes.txt"}) d.WriteText(n, "x");
  const std::string r = d.root();
  auto glob = ExpandShardPattern(r + "/s-*.tar");
  ASSERT_TRUE(glob.ok()) << glob.status().ToString();
  EXPECT_EQ(*glob, (std::vector<std::string>{r + "/s-0.tar", r + "/s-1.tar", r + "/s-2.tar"}));
  auto dir = ExpandShardPattern(r);
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(*dir, *glob);
  EXPECT_TRUE(IsShardData(r));
  auto list = ExpandShardPattern(r + "/s-2.tar::" + r + "/s-{0..1}.tar");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->front(), r + "/s-2.tar");
  EXPECT_EQ(list->size(), 3u);

  auto missing = ExpandShardPattern(r + "/s-{0..9}.tar");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("7 of the 10 shards"), std::string::npos)
      << missing.status().ToString();
  EXPECT_NE(missing.status().message().find("s-3.tar"), std::string::npos);
  EXPECT_EQ(ExpandShardPattern(r + "/none-*.tar").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ExpandShardPattern(r + "/notes.txt::" + r + "/s-0.tar").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ExpandShardPattern(r + "/s-0.tar::").status().code(), StatusCode::kInvalidArgument);

  TempDataset folder;  // an ImageFolder tree is not shards
  folder.Write("cat/a.jpg", TempDataset::Jpeg(8, 8));
  EXPECT_FALSE(IsShardData(folder.root()));
  EXPECT_TRUE(IsShardData("x-{0..3}.tar"));
}

TEST(ShardLabel, ClsJsonTxt) {
  EXPECT_EQ(*ParseShardLabel("cls", Text(" 7\n")), 7);
  EXPECT_EQ(*ParseShardLabel("txt", Text("12")), 12);
  EXPECT_EQ(*ParseShardLabel("json", Text(R"({"label": 3, "x": "y"})")), 3);
  EXPECT_FALSE(ParseShardLabel("cls", Text("dog")).ok());
  EXPECT_FALSE(ParseShardLabel("cls", Text("-1")).ok());
  EXPECT_FALSE(ParseShardLabel("json", Text(R"({"cls": 3})")).ok());
  EXPECT_FALSE(ParseShardLabel("json", Text("[1]")).ok());
  EXPECT_FALSE(ParseShardLabel("json", Text("{")).ok());
}

// Shards of `per_shard` samples: sample k is a distinct JPEG with label k % 5.
struct ShardSet {
  ShardSet(int shards, int per_shard) {
    for (int s = 0; s < shards; ++s) {
      TarMembers m;
      for (int i = 0; i < per_shard; ++i) {
        const int k = s * per_shard + i;
        char key[16];
        std::snprintf(key, sizeof(key), "%06d", k);
        images.push_back(TempDataset::Jpeg(16 + k % 7, 12 + k % 5, static_cast<uint32_t>(k + 1)));
        m.push_back({std::string(key) + ".jpg", images.back()});
        m.push_back({std::string(key) + ".cls", Text(std::to_string(k % 5))});
      }
      WriteTar(d.path("s-" + std::to_string(s) + ".tar"), m);
    }
    pattern = d.root() + "/s-{0.." + std::to_string(shards - 1) + "}.tar";
  }
  TempDataset d;
  std::vector<std::vector<uint8_t>> images;
  std::string pattern;
};

std::unique_ptr<ImageDataset> Open(const std::string& data, uint64_t shuffle_buffer = 1000,
                                   ErrorPolicy on_error = ErrorPolicy::kSkip) {
  SourceOptions o;
  o.data = data;
  o.size = 16;
  o.shuffle_buffer = shuffle_buffer;
  o.on_error = on_error;
  auto ds = ImageDataset::Open(o, 2);
  EXPECT_TRUE(ds.ok()) << ds.status().ToString();
  return ds.ok() ? std::move(*ds) : nullptr;
}

TEST(ShardDataset, IndicesFollowShardThenMemberOrder) {
  SKIP_WITHOUT_TAR();
  ShardSet s(3, 4);
  auto ds = Open(s.pattern);
  ASSERT_TRUE(ds);
  ASSERT_EQ(ds->size(), 12u);
  EXPECT_EQ(ds->shards().size(), 3u);
  EXPECT_EQ(ds->sample_groups(), (std::vector<uint64_t>{4, 4, 4}));
  EXPECT_TRUE(ds->reader().sequential());
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(ds->file(i).entry.label, i % 5);
    EXPECT_EQ(ds->file(i).shard, static_cast<uint32_t>(i / 4));
    EXPECT_EQ(ds->file(i).member, static_cast<uint64_t>(2 * (i % 4)));
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(ds->reader().Read(i, bytes).ok());
    EXPECT_EQ(bytes, s.images[static_cast<size_t>(i)]) << i;
  }
  EXPECT_NE(ds->Describe().find(s.pattern), std::string::npos);
  // The read-ahead reads shards on its one thread, in stream order, whatever
  // its read_threads (a folder's files are read on that many at once).
  FilePrefetcher prefetcher(*ds, true, nullptr, 0, /*read_threads=*/4);
  EXPECT_EQ(prefetcher.read_threads(), 1);
  std::vector<FileBuffer> files;
  std::vector<int64_t> all(12);
  std::iota(all.begin(), all.end(), 0);
  prefetcher.Start(&files, all);
  prefetcher.Wait();
  ASSERT_EQ(files.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(files[i].bytes, s.images[i]) << i;
}

TEST(ShardScan, LabelsOfEveryKindAndSamplesThatCannotBeUsed) {
  SKIP_WITHOUT_TAR();
  TempDataset d;
  const auto jpg = TempDataset::Jpeg(16, 16);
  WriteTar(d.path("a.tar"), {{"dir/k0.cls", Text("1")},  // the label may come first
                             {"dir/k0.jpg", jpg},
                             {"k1.jpg", jpg},
                             {"k1.json", Text(R"({"label": 2})")},
                             {"k2.jpg", jpg},
                             {"k2.txt", Text("3")},
                             {"k3.jpg", jpg},  // no label
                             {"k4.jpg", Text("not a jpeg")},
                             {"k4.cls", Text("0")},
                             {"k5.cls", Text("0")},  // no image
                             {"k6.jpg", jpg},
                             {"k6.cls", Text("cat")},  // a bad label
                             {"k7.seg.png", jpg},      // not an image extension of the sample
                             {"k7.jpeg", jpg},
                             {"k7.cls", Text("4")},
                             {"README", Text("no extension: not a sample")}});
  RetryingReader io;
  auto scan = ScanShards(
      d.path("a.tar"), 1,
      [](const std::string&, std::span<const uint8_t> b, image::ImageFormat*, image::JpegInfo* info,
         bool*) {
        auto r = image::ReadJpegInfo(b);
        if (r.ok()) *info = *r;
        return r.status();
      },
      io);
  ASSERT_TRUE(scan.ok()) << scan.status().ToString();
  EXPECT_TRUE(scan->damage.empty());
  ASSERT_EQ(scan->samples.size(), 8u);
  const auto& v = scan->samples;
  EXPECT_TRUE(v[0].verdict.ok());
  EXPECT_EQ(v[0].label, 1);
  EXPECT_EQ(v[0].member, 1u);
  EXPECT_EQ(v[1].label, 2);
  EXPECT_EQ(v[2].label, 3);
  EXPECT_NE(v[3].verdict.message().find("no label member"), std::string::npos)
      << v[3].verdict.ToString();
  EXPECT_EQ(v[4].verdict.code(), StatusCode::kDataLoss) << v[4].verdict.ToString();
  EXPECT_NE(v[5].verdict.message().find("no image member"), std::string::npos);
  EXPECT_NE(v[6].verdict.message().find("bad label in k6.cls"), std::string::npos)
      << v[6].verdict.ToString();
  EXPECT_TRUE(v[7].verdict.ok());
  EXPECT_EQ(v[7].label, 4);
  EXPECT_EQ(v[7].name, d.path("a.tar") + ":k7.jpeg");
}

TEST(ShardScan, ATruncatedShardKeepsTheSamplesBeforeTheDamage) {
  SKIP_WITHOUT_TAR();
  ShardSet s(2, 5);
  // Cut shard 1 in the middle of its fourth image.
  TarMembers m;
  for (int i = 0; i < 5; ++i) {
    m.push_back({"x" + std::to_string(i) + ".jpg", s.images[static_cast<size_t>(i)]});
    m.push_back({"x" + std::to_string(i) + ".cls", Text("1")});
  }
  size_t cut = 0;
  for (int i = 0; i < 3; ++i) {
    cut += 512 + (s.images[static_cast<size_t>(i)].size() + 511) / 512 * 512 + 1024;
  }
  WriteTar(s.d.path("s-1.tar"), m, cut + 512 + 100);
  testing::LogCapture log;
  auto ds = Open(s.pattern);
  ASSERT_TRUE(ds);
  EXPECT_EQ(ds->size(), 8u);  // 5 + the 3 before the damage
  EXPECT_EQ(ds->sample_groups(), (std::vector<uint64_t>{5, 3}));
  EXPECT_EQ(log.Count("the rest of the shard is lost"), 1) << log.text();
  EXPECT_EQ(log.Count("s-1.tar at member 6"), 1) << log.text();
  auto counters = ds->counters();
  EXPECT_NE(std::find(counters.begin(), counters.end(),
                      std::pair<std::string, int64_t>{"shards_damaged", 1}),
            counters.end());
  // on_error=fail stops the start, naming the shard.
  SourceOptions o;
  o.data = s.pattern;
  o.on_error = ErrorPolicy::kFail;
  auto failed = ImageDataset::Open(o, 2);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("s-1.tar"), std::string::npos);
  EXPECT_NE(failed.status().message().find("--on-error fail"), std::string::npos);
}

int64_t Counter(const ImageDataset& ds, const std::string& name) {
  for (const auto& [k, v] : ds.counters()) {
    if (k == name) return v;
  }
  return -1;
}

// The sampler's order reads every shard front to back once an epoch, and
// holds at most shuffle_buffer + one batch of samples.
TEST(ShardReader, SamplerOrderIsSequentialWithBoundedMemory) {
  SKIP_WITHOUT_TAR();
  ShardSet s(6, 10);
  const uint64_t k = 8, batch = 4;
  auto ds = Open(s.pattern, k);
  ASSERT_TRUE(ds);
  auto sampler = Sampler::Make(ds->size(), SamplerOptions{3, true, 0, 1, ds->sample_groups(), k});
  ASSERT_TRUE(sampler.ok());
  for (uint64_t e = 0; e < 3; ++e) {
    const auto order = sampler->EpochOrder(e);
    // Reads a batch at a time, as the prefetcher does.
    for (size_t at = 0; at < order.size(); at += batch) {
      for (size_t i = at; i < std::min(order.size(), at + batch); ++i) {
        std::vector<uint8_t> bytes;
        ASSERT_TRUE(ds->reader().Read(order[i], bytes).ok());
        ASSERT_EQ(bytes, s.images[static_cast<size_t>(order[i])]) << order[i];
      }
    }
  }
  EXPECT_EQ(Counter(*ds, "shard_opens"), 18);  // 6 shards x 3 epochs
  EXPECT_EQ(Counter(*ds, "shard_rereads"), 0);
  EXPECT_LE(Counter(*ds, "shard_held_peak_samples"), static_cast<int64_t>(k));
  EXPECT_GT(Counter(*ds, "shard_held_peak_samples"), 0);
}

// Any order gets the right bytes; memory stays within the reader's bound.
TEST(ShardReader, AnyOrderIsServedCorrectly) {
  SKIP_WITHOUT_TAR();
  ShardSet s(3, 20);
  auto ds = Open(s.pattern, /*shuffle_buffer=*/0);  // holds at most 1024
  ASSERT_TRUE(ds);
  std::vector<int64_t> order(60);
  for (int64_t i = 0; i < 60; ++i) order[static_cast<size_t>(i)] = i;
  std::mt19937 rng(4);
  for (int round = 0; round < 3; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t i : order) {
      std::vector<uint8_t> bytes;
      ASSERT_TRUE(ds->reader().Read(i, bytes).ok());
      ASSERT_EQ(bytes, s.images[static_cast<size_t>(i)]) << i;
    }
  }
  EXPECT_LE(Counter(*ds, "shard_held_peak_samples"), 60);
}

// A read-ahead that may guess wrong peeks: the reader keeps a copy for the
// ring that gets the batch (its Read takes it: no shard opened again), or
// forgets it when the guess was right.
TEST(ShardReader, APeekKeepsACopyUntilReadOrForgotten) {
  SKIP_WITHOUT_TAR();
  ShardSet s(2, 10);
  auto ds = Open(s.pattern, /*shuffle_buffer=*/0);
  ASSERT_TRUE(ds);
  SampleReader& reader = ds->reader();
  std::vector<uint8_t> bytes;
  for (int64_t i = 0; i < 4; ++i) {  // a guess: samples 0-3
    ASSERT_TRUE(reader.Peek(i, bytes).ok());
    EXPECT_EQ(bytes, s.images[static_cast<size_t>(i)]) << i;
  }
  EXPECT_EQ(Counter(*ds, "shard_held_samples"), 4);
  ASSERT_TRUE(reader.Peek(1, bytes).ok()) << "a second guess of a kept sample";
  EXPECT_EQ(bytes, s.images[1]);
  for (int64_t i = 0; i < 2; ++i) {  // wrong for 0-1: another ring reads them
    ASSERT_TRUE(reader.Read(i, bytes).ok());
    EXPECT_EQ(bytes, s.images[static_cast<size_t>(i)]) << i;
  }
  reader.Forget(2);  // right for 2-3: the reader forgets its copies
  reader.Forget(3);
  reader.Forget(3);
  EXPECT_EQ(Counter(*ds, "shard_held_samples"), 0);
  for (int64_t i = 4; i < 20; ++i) ASSERT_TRUE(reader.Read(i, bytes).ok());
  EXPECT_EQ(Counter(*ds, "shard_opens"), 2) << "each shard once";
  EXPECT_EQ(Counter(*ds, "shard_rereads"), 0);
  // A guess of a sample another reader took already is declined, and opens
  // nothing; a read of it (the next epoch's) opens its shard again.
  EXPECT_EQ(reader.Peek(5, bytes).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(Counter(*ds, "shard_held_samples"), 0);
  EXPECT_EQ(Counter(*ds, "shard_opens"), 2);
  ASSERT_TRUE(reader.Read(5, bytes).ok());
  EXPECT_EQ(bytes, s.images[5]);
  EXPECT_EQ(Counter(*ds, "shard_opens"), 3);
}

// A shard that goes bad after the scan fails its remaining samples with the
// reason, without reading it again for each one.
TEST(ShardReader, AShardDamagedAfterTheScanFailsItsRest) {
  SKIP_WITHOUT_TAR();
  ShardSet s(2, 4);
  auto ds = Open(s.pattern);
  ASSERT_TRUE(ds);
  std::filesystem::resize_file(s.d.path("s-1.tar"), 512 + 100);
  std::vector<uint8_t> bytes;
  for (int64_t i = 0; i < 4; ++i) ASSERT_TRUE(ds->reader().Read(i, bytes).ok());
  const Status first = ds->reader().Read(5, bytes);
  EXPECT_EQ(first.code(), StatusCode::kDataLoss) << first.ToString();
  EXPECT_NE(first.message().find("s-1.tar"), std::string::npos);
  const int64_t opens = Counter(*ds, "shard_opens");
  EXPECT_FALSE(ds->reader().Read(7, bytes).ok());
  EXPECT_EQ(Counter(*ds, "shard_opens"), opens);
}

// The CPU source on shards: same pixels as the folder of the same images.
TEST(ShardSource, SamePixelsAsTheFolderOfTheSameImages) {
  SKIP_WITHOUT_TAR();
  ShardSet s(2, 6);
  TempDataset folder;
  // One class folder holding every image in index order: labels differ, pixels not.
  for (size_t k = 0; k < s.images.size(); ++k) {
    char name[32];
    std::snprintf(name, sizeof(name), "c/%06zu.jpg", k);
    folder.Write(name, s.images[k]);
  }
  SourceOptions o;
  o.size = 16;
  o.seed = 9;
  o.workers = 2;
  o.data = s.pattern;
  auto shards = MakeImageSource(o);
  o.data = folder.root();
  auto files = MakeImageSource(o);
  ASSERT_TRUE(shards.ok() && files.ok()) << shards.status().ToString();
  std::vector<int64_t> idx = {11, 0, 5, 6, 3}, idx2 = idx;
  const size_t image_bytes = (*files)->fields()[0].bytes_per_sample();
  for (uint32_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<uint8_t> a(image_bytes * idx.size()), b(a.size());
    std::vector<int64_t> la(idx.size()), lb(idx.size());
    auto slot = [&](std::vector<int64_t>& indices, std::vector<uint8_t>& img,
                    std::vector<int64_t>& lab) {
      SlotView v;
      v.epoch = epoch;
      v.indices = indices;
      v.field_data = {img.data(), reinterpret_cast<uint8_t*>(lab.data())};
      v.field_bytes = {image_bytes, sizeof(int64_t)};
      return v;
    };
    auto ra = (*shards)->FillBatch(slot(idx, a, la), {});
    auto rb = (*files)->FillBatch(slot(idx2, b, lb), {});
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_EQ(*ra, idx.size());
    EXPECT_EQ(a, b) << "epoch " << epoch;
    for (size_t i = 0; i < idx.size(); ++i) EXPECT_EQ(la[i], idx[i] % 5);
  }
}

TEST(ShardSource, WithoutTarSupportTheErrorSaysSo) {
  if (BuiltWithTar()) GTEST_SKIP() << "this build reads tar shards";
  SourceOptions o;
  o.data = "/nonexistent/train-{0..3}.tar";
  auto source = MakeImageSource(o);
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.status().message().find("no tar shard support"), std::string::npos)
      << source.status().ToString();
}

}  // namespace
}  // namespace batchcast
