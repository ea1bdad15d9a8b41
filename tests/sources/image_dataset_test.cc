// ImageDataset (sources/src/image_dataset.h): the listing (ImageFolder labels,
// .tsv parsing and its errors), the header scan's drop / fail policy and its
// classify hook, and the decode-time policy of Note [Dropped files]: a file
// that fails is dropped (never stood in for), warned about and counted once,
// and never attempted again.
#include "sources/src/image_dataset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/src/mutex.h"
#include "core/src/stream_identity.h"
#include "log_capture.h"
#include "temp_dataset.h"

namespace batchcast {
namespace {

// The counters of a dataset of JPEG files read without a retry.
std::vector<std::pair<std::string, int64_t>> JpegDatasetCounters(int64_t files, int64_t at_scan,
                                                                 int64_t at_decode,
                                                                 int64_t samples_dropped) {
  return {{"files", files},
          {"files_dropped_at_scan", at_scan},
          {"files_dropped_at_decode", at_decode},
          {"samples_dropped", samples_dropped},
          {"files_jpeg", files},
          {"files_png", 0},
          {"files_webp", 0},
          {"files_bmp", 0},
          {"files_tiff", 0},
          {"files_pnm", 0},
          {"read_retries", 0},
          {"reads_recovered", 0},
          {"files_unreadable", 0}};
}

using testing::LogCapture;
using testing::TempDataset;

std::vector<std::string> Paths(const std::vector<ImageEntry>& entries) {
  std::vector<std::string> out;
  for (const ImageEntry& e : entries) out.push_back(e.path);
  return out;
}

SourceOptions Options(const std::string& data, ErrorPolicy on_error = ErrorPolicy::kSkip) {
  SourceOptions o;
  o.data = data;
  o.on_error = on_error;
  o.size = 32;
  return o;
}

// ---- Listing -------------------------------------------------------------

TEST(ListImageDataset, ImageFolderLabelsAreSortedClassFolders) {
  TempDataset d;
  const std::vector<uint8_t> j = TempDataset::Jpeg(8, 8);
  d.Write("zebra/b.jpg", j);
  d.Write("zebra/a.JPEG", j);
  d.Write("ant/x.png", j);       // listed: any torchvision image extension
  d.Write("ant/deep/y.jpg", j);  // below the class folder
  d.Write("ant/notes.txt", j);   // not an image extension
  d.Write("Moose/m.jpeg", j);    // 'M' sorts before 'a'
  d.Write("stray.jpg", j);       // not in a class folder
  auto entries = ListImageDataset(d.root());
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  EXPECT_EQ(Paths(*entries),
            (std::vector<std::string>{d.path("Moose/m.jpeg"), d.path("ant/deep/y.jpg"),
                                      d.path("ant/x.png"), d.path("zebra/a.JPEG"),
                                      d.path("zebra/b.jpg")}));
  std::vector<int64_t> labels;
  for (const ImageEntry& e : *entries) labels.push_back(e.label);
  EXPECT_EQ(labels, (std::vector<int64_t>{0, 1, 1, 2, 2}));
}

TEST(ListImageDataset, FolderErrors) {
  TempDataset d;
  auto missing = ListImageDataset(d.path("nope"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);

  d.Write("flat/a.jpg", TempDataset::Jpeg(8, 8));
  auto flat = ListImageDataset(d.path("flat"));
  EXPECT_EQ(flat.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(flat.status().message().find("no class subfolders"), std::string::npos);

  d.WriteText("empty/cls/readme.txt", "no images");
  auto empty = ListImageDataset(d.path("empty"));
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("holds no image files"), std::string::npos);
}

TEST(ListImageDataset, TsvPathsAndLabels) {
  TempDataset d;
  const std::string list = d.WriteText("lists/train.tsv",
                                       "# a comment\n"
                                       "img/a.jpg\t3\r\n"
                                       "\n"
                                       "/abs/b.jpg\t0\n"
                                       "with\ttab.jpg\t12\n");
  auto entries = ListImageDataset(list);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].path, d.path("lists/img/a.jpg"));  // relative to the list's folder
  EXPECT_EQ((*entries)[0].label, 3);
  EXPECT_EQ((*entries)[1].path, "/abs/b.jpg");
  EXPECT_EQ((*entries)[1].label, 0);
  EXPECT_EQ((*entries)[2].path, d.path("lists/with\ttab.jpg"));  // the last tab splits
  EXPECT_EQ((*entries)[2].label, 12);
}

TEST(ListImageDataset, TsvErrorsNameTheLine) {
  TempDataset d;
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {"a.jpg\t1\nb.jpg 2\n", "bad.tsv:2: expected path<TAB>label"},
      {"# c\n\n\t4\n", "bad.tsv:3: expected path<TAB>label"},
      {"a.jpg\tcat\n", "bad.tsv:1: bad label 'cat'"},
      {"a.jpg\t1\na.jpg\t-1\n", "bad.tsv:2: bad label '-1'"},
      {"a.jpg\t7x\n", "bad.tsv:1: bad label '7x'"},
      {"a.jpg\t\n", "bad.tsv:1: bad label ''"},
  };
  for (const Case& c : cases) {
    const std::string list = d.WriteText("bad.tsv", c.text);
    auto entries = ListImageDataset(list);
    EXPECT_EQ(entries.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(entries.status().message().find(c.message), std::string::npos)
        << entries.status().ToString();
  }
  const std::string only_comments = d.WriteText("comments.tsv", "# nothing\n");
  EXPECT_NE(ListImageDataset(only_comments).status().message().find("holds no image files"),
            std::string::npos);
}

// ---- The header scan -----------------------------------------------------

// Files in listing order: a (good), b_empty, c_png, d (good), e_random,
// f_huge, g_truncated (passes the scan), h (good).
void WriteHazards(const TempDataset& d) {
  d.Write("c/a.jpg", TempDataset::Jpeg(40, 30, 1));
  d.Write("c/b_empty.jpg", {});
  d.Write("c/c_png.jpg", TempDataset::Png());
  d.Write("c/d.jpg", TempDataset::Jpeg(24, 48, 2));
  d.Write("c/e_random.jpg", std::vector<uint8_t>(300, 0x5A));
  d.Write("c/f_huge.jpg", TempDataset::Huge());
  d.Write("c/g_truncated.jpg", TempDataset::Truncated(64, 64, 3));
  d.Write("c/h.jpg", TempDataset::Jpeg(17, 19, 4));
}

TEST(ImageDatasetOpen, SkipDropsUnusableFilesAndNamesThem) {
  TempDataset d;
  WriteHazards(d);
  LogCapture log;
  auto ds = ImageDataset::Open(Options(d.root()), 3);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ASSERT_EQ((*ds)->size(), 4u);
  EXPECT_EQ((*ds)->dropped_at_scan(), 4u);
  EXPECT_EQ((*ds)->path(0), d.path("c/a.jpg"));
  EXPECT_EQ((*ds)->path(1), d.path("c/d.jpg"));
  EXPECT_EQ((*ds)->path(2), d.path("c/g_truncated.jpg"));
  EXPECT_EQ((*ds)->path(3), d.path("c/h.jpg"));
  EXPECT_EQ((*ds)->file(1).info.width, 24);
  EXPECT_EQ((*ds)->file(1).info.height, 48);
  EXPECT_FALSE((*ds)->file(0).flag);  // no classify hook
  for (const char* name : {"b_empty", "c_png", "e_random", "f_huge"}) {
    EXPECT_EQ(log.Count(std::string("dropping ") + d.path("c/") + name), 1) << name;
  }
  EXPECT_EQ(log.Count("dropping"), 4);
  const auto counters = (*ds)->counters();
  EXPECT_EQ(counters, JpegDatasetCounters(4, 4, 0, 0));
}

TEST(ImageDatasetOpen, FailStopsAtTheFirstUnusableFile) {
  TempDataset d;
  WriteHazards(d);
  auto ds = ImageDataset::Open(Options(d.root(), ErrorPolicy::kFail), 3);
  ASSERT_FALSE(ds.ok());
  const std::string m = ds.status().message();
  EXPECT_EQ(m.rfind(d.path("c/b_empty.jpg") + ": ", 0), 0u) << m;
  EXPECT_NE(m.find("(--on-error fail)"), std::string::npos) << m;
}

TEST(ImageDatasetOpen, NoUsableFile) {
  TempDataset d;
  d.Write("c/a.jpg", TempDataset::Png());
  auto ds = ImageDataset::Open(Options(d.root()), 1);
  EXPECT_EQ(ds.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ds.status().message().find("no usable image files in " + d.root()), std::string::npos);
}

TEST(ImageDatasetOpen, BadTransformOptionsFailBeforeListing) {
  SourceOptions o = Options("/does/not/exist");
  o.mean[1] = std::numeric_limits<float>::infinity();
  auto ds = ImageDataset::Open(o, 1);
  EXPECT_EQ(ds.status().code(), StatusCode::kInvalidArgument) << ds.status().ToString();
  EXPECT_NE(ds.status().message().find("mean[1]"), std::string::npos);
}

TEST(ImageDatasetOpen, ClassifyHookSeesEveryUsableHeader) {
  TempDataset d;
  WriteHazards(d);
  Mutex mu;
  std::set<std::string> seen;
  auto ds = ImageDataset::Open(Options(d.root()), 2,
                               [&](const std::string& path, std::span<const uint8_t> header,
                                   bool whole, const image::JpegInfo& info) {
                                 EXPECT_TRUE(whole);  // small files are read whole
                                 EXPECT_GE(header.size(), 2u);
                                 EXPECT_EQ(header[0], 0xFF);
                                 EXPECT_EQ(header[1], 0xD8);
                                 MutexLock lock(&mu);
                                 seen.insert(path);
                                 return info.width >= 40;
                               });
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_TRUE((*ds)->file(0).flag);   // 40 x 30
  EXPECT_FALSE((*ds)->file(1).flag);  // 24 x 48
  EXPECT_TRUE((*ds)->file(2).flag);   // 64 x 64
  EXPECT_FALSE((*ds)->file(3).flag);  // 17 x 19
}

TEST(ImageDataset, FieldsAndDescription) {
  TempDataset d;
  d.Write("c/a.jpg", TempDataset::Jpeg(8, 8));
  SourceOptions o = Options(d.root());
  o.dtype = DType::kFloat16;
  o.layout = ImageLayout::kNhwc;
  o.transform = TransformKind::kEval;
  auto ds = ImageDataset::Open(o, 1);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  const std::vector<FieldSpec> f = (*ds)->fields(MemoryKind::kCuda);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].name, "image");
  EXPECT_EQ(f[0].dtype, DType::kFloat16);
  EXPECT_EQ(f[0].shape, (std::vector<int64_t>{32, 32, 3}));
  EXPECT_EQ(f[0].memory, MemoryKind::kCuda);
  EXPECT_EQ(f[1].name, "label");
  EXPECT_EQ(f[1].dtype, DType::kInt64);
  EXPECT_TRUE(f[1].shape.empty());
  EXPECT_EQ((*ds)->Describe(), "image dataset " + d.root() + " (1 files, eval 32 float16)");
  EXPECT_EQ((*ds)->Describe("more"),
            "image dataset " + d.root() + " (1 files, eval 32 float16, more)");
}

// ---- Shared listing ------------------------------------------------------

// Note [Shared listing]: a listing saved by one dataset opens the same
// dataset (files, headers, classify flags, what the scan dropped, digest)
// without listing or reading a header, even after the folder changed.
TEST(ImageDatasetListing, ASavedListingOpensTheSameDatasetWithoutAScan) {
  TempDataset d;
  WriteHazards(d);
  auto scanned = ImageDataset::Open(Options(d.root()), 2,
                                    [](const std::string&, std::span<const uint8_t>, bool,
                                       const image::JpegInfo& info) { return info.width >= 40; });
  ASSERT_TRUE(scanned.ok()) << scanned.status().ToString();
  const std::string listing = d.path("saved.listing");  // not in a class folder
  ASSERT_TRUE((*scanned)->SaveListing(listing).ok());
  EXPECT_FALSE(std::filesystem::exists(listing + ".tmp"));
  EXPECT_EQ(std::filesystem::status(listing).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  // The folder changes after the save: the listing keeps what was scanned.
  d.Write("c/i_new.jpg", TempDataset::Jpeg(50, 50));
  std::filesystem::remove(d.path("c/h.jpg"));
  SourceOptions o = Options(d.root());
  o.listing_file = listing;
  LogCapture log;
  auto read = ImageDataset::Open(
      o, 2, [](const std::string& path, std::span<const uint8_t>, bool, const image::JpegInfo&) {
        ADD_FAILURE() << "a header was read again: " << path;
        return false;
      });
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ((*read)->size(), (*scanned)->size());
  for (int64_t i = 0; i < static_cast<int64_t>((*read)->size()); ++i) {
    const ImageDataset::File& a = (*scanned)->file(i);
    const ImageDataset::File& b = (*read)->file(i);
    EXPECT_EQ(b.entry.path, a.entry.path);  // absolute here already
    EXPECT_EQ(b.entry.label, a.entry.label);
    EXPECT_EQ(b.format, a.format);
    EXPECT_EQ(b.info.width, a.info.width);
    EXPECT_EQ(b.info.height, a.info.height);
    EXPECT_EQ(b.info.components, a.info.components);
    EXPECT_EQ(b.info.color, a.info.color);
    EXPECT_EQ(b.info.yuv420, a.info.yuv420);
    EXPECT_EQ(b.info.progressive, a.info.progressive);
    EXPECT_EQ(b.flag, a.flag) << i;
  }
  EXPECT_EQ((*read)->ListingDigest(), (*scanned)->ListingDigest());
  EXPECT_EQ((*read)->dropped_at_scan(), 4u);
  EXPECT_EQ((*read)->counters(), (*scanned)->counters());
  EXPECT_EQ(log.Count("read the listing " + listing + " of 8 files"), 1);
  EXPECT_EQ(log.Count("dropping"), 0);  // named by the scan that saved it
}

TEST(ImageDatasetListing, ADamagedOrMissingListingIsAnErrorNeverACrash) {
  TempDataset d;
  for (const char* name : {"c/0.jpg", "c/1.jpg"}) d.Write(name, TempDataset::Jpeg(8, 8));
  auto ds = ImageDataset::Open(Options(d.root()), 1);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  const std::string listing = d.path("saved.listing");
  ASSERT_TRUE((*ds)->SaveListing(listing).ok());
  std::string bytes;
  {
    std::ifstream in(listing, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  SourceOptions o = Options(d.root());
  o.listing_file = listing;
  const auto open_with = [&](const std::string& content) {
    std::ofstream(listing, std::ios::binary | std::ios::trunc) << content;
    return ImageDataset::Open(o, 1).status();
  };
  ASSERT_TRUE(open_with(bytes).ok());
  const auto expect_loss = [&](const std::string& content, const std::string& why) {
    const Status s = open_with(content);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
    EXPECT_NE(s.message().find("the dataset's listing " + listing + " " + why), std::string::npos)
        << s.ToString();
  };
  for (size_t cut : {size_t{0}, size_t{10}, size_t{30}, bytes.size() / 2, bytes.size() - 1}) {
    SCOPED_TRACE(cut);
    expect_loss(bytes.substr(0, cut), cut < 20 ? "is not one" : "is damaged or cut short");
  }
  expect_loss(bytes + "x", "is damaged or cut short");
  // A body changed and sealed with a matching checksum: each bound holds.
  const std::string body = bytes.substr(0, bytes.size() - 8);
  const auto sealed = [](std::string b) {
    const uint64_t sum = Fnv1a64(b);
    b.append(reinterpret_cast<const char*>(&sum), sizeof(sum));
    return b;
  };
  ASSERT_TRUE(open_with(sealed(body)).ok());
  expect_loss(sealed(body + "x"), "goes on after its last file");
  expect_loss(sealed(body.substr(0, body.size() - 3)), "is cut short");
  std::string label_changed = body;
  label_changed[body.size() - 20] ^= 1;  // the last file's label
  expect_loss(sealed(label_changed), "does not match its digest");
  std::string counted_more = body;
  counted_more[20] = '\x7f';  // the file count's low byte
  expect_loss(sealed(counted_more), "counts more files than it holds");
  // Any byte changed, the magic's aside: DataLoss, never a crash (ASan in
  // CI) or a dataset with a wrong header.
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string mutated = bytes;
    const size_t at = 20 + rng() % (mutated.size() - 20);
    mutated[at] = static_cast<char>(mutated[at] ^ (1 + rng() % 255));
    const Status s = open_with(mutated);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << at << ": " << s.ToString();
  }
  std::filesystem::remove(listing);
  EXPECT_EQ(ImageDataset::Open(o, 1).status().code(), StatusCode::kNotFound);
}

// ---- Decode-time policy --------------------------------------------------

std::unique_ptr<ImageDataset> ThreeFiles(const TempDataset& d, ErrorPolicy on_error) {
  for (const char* name : {"c/0.jpg", "c/1.jpg", "c/2.jpg"}) d.Write(name, TempDataset::Jpeg(8, 8));
  auto ds = ImageDataset::Open(Options(d.root(), on_error), 1);
  EXPECT_TRUE(ds.ok()) << ds.status().ToString();
  return ds.ok() ? std::move(*ds) : nullptr;
}

TEST(ImageDatasetPolicy, SkipMarksTheFileBadAndWarnsAndCountsItOnce) {
  TempDataset d;
  auto ds = ThreeFiles(d, ErrorPolicy::kSkip);
  ASSERT_TRUE(ds);
  LogCapture log;
  const Status bad = DataLossError("Premature end of JPEG file");
  EXPECT_TRUE(ds->OnDecodeError(1, bad).ok());
  EXPECT_TRUE(ds->OnDecodeError(1, bad).ok());
  EXPECT_TRUE(ds->OnDecodeError(2, bad).ok());
  EXPECT_TRUE(ds->OnDecodeError(1, bad).ok());
  EXPECT_FALSE(ds->known_bad(0));
  EXPECT_TRUE(ds->known_bad(1));
  EXPECT_TRUE(ds->known_bad(2));
  EXPECT_EQ(ds->files_dropped_at_decode(), 2);
  EXPECT_EQ(log.Count("dropping " + d.path("c/1.jpg") + ": Premature end of JPEG file"), 1)
      << log.text();
  EXPECT_EQ(log.Count("dropping " + d.path("c/2.jpg")), 1);
  EXPECT_EQ(log.Count("left out of this and every later epoch"), 2);
}

TEST(ImageDatasetPolicy, FailReturnsPathAndReason) {
  TempDataset d;
  auto ds = ThreeFiles(d, ErrorPolicy::kFail);
  ASSERT_TRUE(ds);
  const Status s = ds->OnDecodeError(2, DataLossError("bad Huffman code"));
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), d.path("c/2.jpg") + ": bad Huffman code (--on-error fail)");
  EXPECT_EQ(ds->files_dropped_at_decode(), 0);
  EXPECT_FALSE(ds->known_bad(2));
}

// Note [Dropped files]: a file that fails is dropped, never replaced by
// another index; its later samples are dropped without an attempt; every
// dropped sample counts.
TEST(ImageDatasetPolicy, DecodeDropsABadFileForeverAndNeverStandsIn) {
  TempDataset d;
  auto ds = ThreeFiles(d, ErrorPolicy::kSkip);
  ASSERT_TRUE(ds);
  std::vector<int64_t> tried;
  auto attempt = [&](int64_t i) {
    tried.push_back(i);
    return i == 0 ? DataLossError("bad") : Status::Ok();
  };
  auto first = ds->Decode(0, attempt);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, SampleFill::kDropped);
  EXPECT_EQ(tried, (std::vector<int64_t>{0})) << "no other index is tried in its place";
  auto again = ds->Decode(0, attempt);  // a later epoch
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, SampleFill::kDropped);
  EXPECT_EQ(tried, (std::vector<int64_t>{0})) << "a known bad file is not attempted again";
  auto good = ds->Decode(2, attempt);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, SampleFill::kWritten);
  EXPECT_EQ(ds->files_dropped_at_decode(), 1);
  EXPECT_EQ(ds->samples_dropped(), 2);
  EXPECT_EQ(ds->counters(), JpegDatasetCounters(3, 0, 1, 2));
}

TEST(ImageDatasetPolicy, FailStopsAtTheFirstBadFile) {
  TempDataset d;
  auto ds = ThreeFiles(d, ErrorPolicy::kFail);
  ASSERT_TRUE(ds);
  int calls = 0;
  auto r = ds->Decode(1, [&](int64_t) {
    ++calls;
    return DataLossError("truncated");
  });
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(r.status().message(), d.path("c/1.jpg") + ": truncated (--on-error fail)");
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ds->samples_dropped(), 0);
}

}  // namespace
}  // namespace batchcast
