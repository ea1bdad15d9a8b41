// Test helper: a temporary dataset folder (ImageFolder trees, .tsv lists) of
// generated JPEGs and bad files, removed when the object goes away.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../image/test_jpegs.h"

namespace batchcast::testing {

class TempDataset {
 public:
  TempDataset() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr ? tmp : "/tmp") + "/bc_sources_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    root_ = pattern;
  }
  ~TempDataset() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  TempDataset(const TempDataset&) = delete;
  TempDataset& operator=(const TempDataset&) = delete;

  const std::string& root() const { return root_; }
  std::string path(const std::string& rel) const { return root_ + "/" + rel; }

  // Writes `bytes` to root/rel, creating folders; returns the full path.
  std::string Write(const std::string& rel, const std::vector<uint8_t>& bytes) const {
    const std::filesystem::path p = path(rel);
    std::filesystem::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }
  std::string WriteText(const std::string& rel, const std::string& text) const {
    return Write(rel, std::vector<uint8_t>(text.begin(), text.end()));
  }

  // A valid baseline RGB JPEG, different per seed.
  static std::vector<uint8_t> Jpeg(int width, int height, uint32_t seed = 1) {
    return image::testing::EncodeJpeg(image::testing::TexturedRgb(width, height, seed), 90);
  }
  // A JPEG whose header is intact but whose data stops at 2/3: it passes the
  // scan and fails to decode.
  static std::vector<uint8_t> Truncated(int width, int height, uint32_t seed = 1) {
    std::vector<uint8_t> j = Jpeg(width, height, seed);
    j.resize(j.size() * 2 / 3);
    return j;
  }
  // A PNG cut inside its header: fails the scan.
  static std::vector<uint8_t> Png() {
    return {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  }
  static std::vector<uint8_t> Huge() {  // a header declaring 60000 x 60000 pixels
    std::vector<uint8_t> j = Jpeg(16, 16);
    image::testing::PatchSofDimensions(j, 60000, 60000);
    return j;
  }

 private:
  std::string root_;
};

}  // namespace batchcast::testing
