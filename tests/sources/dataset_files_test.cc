// Listing and reading dataset files (sources/src/dataset_files.h) on odd
// trees: symbolic-link loops, links to themselves, names that are not UTF-8,
// FIFOs in a list or as the list. Each gives a clear result, never a hang, an
// endless listing or an exception.
#include "sources/src/dataset_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "log_capture.h"
#include "sources/src/image_dataset.h"
#include "temp_dataset.h"

namespace batchcast {
namespace {

using testing::LogCapture;
using testing::TempDataset;

TEST(DatasetFiles, SymbolicLinkLoopsAreListedOnce) {
  TempDataset d;
  const std::vector<uint8_t> j = TempDataset::Jpeg(8, 8);
  d.Write("cat/a.jpg", j);
  d.Write("cat/sub/b.jpg", j);
  d.Write("dog/c.jpg", j);
  ASSERT_EQ(symlink("..", d.path("cat/sub/up").c_str()), 0);    // a loop back to cat/
  ASSERT_EQ(symlink("self", d.path("cat/self").c_str()), 0);    // a link to itself
  ASSERT_EQ(symlink("../cat", d.path("dog/cats").c_str()), 0);  // a second way into cat/
  ASSERT_EQ(symlink("gone.jpg", d.path("dog/dangling.jpg").c_str()), 0);
  LogCapture log;
  const auto t0 = std::chrono::steady_clock::now();
  auto entries = ListImageDataset(d.root());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  const std::vector<std::string> want = {d.path("cat/a.jpg"), d.path("cat/sub/b.jpg"),
                                         d.path("dog/c.jpg")};
  ASSERT_EQ(entries->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ((*entries)[i].path, want[i]) << i;
  EXPECT_GE(log.Count("a folder already listed"), 1) << log.text();
  EXPECT_GE(log.Count("cat/self"), 1) << log.text();
}

TEST(DatasetFiles, NamesThatAreNotUtf8AreListedAsBytes) {
  TempDataset d;
  const std::string cls = "cl\xff\xfe";
  d.Write(cls + "/\xe9t\xe9.jpg", TempDataset::Jpeg(8, 8));
  auto entries = ListImageDataset(d.root());
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].path, d.path(cls + "/\xe9t\xe9.jpg"));
}

TEST(DatasetFiles, AFifoIsNotReadAndDoesNotHang) {
  TempDataset d;
  d.Write("img/good.jpg", TempDataset::Jpeg(16, 16));
  ASSERT_EQ(mkfifo(d.path("img/pipe.jpg").c_str(), 0600), 0);
  std::vector<uint8_t> bytes;
  const Status s = ReadFileBytes(d.path("img/pipe.jpg"), bytes);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("it is a FIFO"), std::string::npos) << s.message();
  EXPECT_EQ(ReadFileBytes(d.path("img"), bytes).code(), StatusCode::kInvalidArgument);

  // Listed in a .tsv: the scan drops it (with the reason) and goes on.
  const std::string list = d.WriteText("list.tsv", "img/pipe.jpg\t0\nimg/good.jpg\t1\n");
  SourceOptions o;
  o.data = list;
  o.size = 8;
  LogCapture log;
  auto ds = ImageDataset::Open(o, 2);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ((*ds)->size(), 1u);
  EXPECT_EQ(log.Count("it is a FIFO"), 1) << log.text();

  // The list itself a FIFO: an error, at once.
  ASSERT_EQ(mkfifo(d.path("fifo.tsv").c_str(), 0600), 0);
  auto listed = ListImageDataset(d.path("fifo.tsv"));
  EXPECT_EQ(listed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(listed.status().message().find("it is a FIFO"), std::string::npos)
      << listed.status().message();
}

}  // namespace
}  // namespace batchcast
