// A small image dataset for the GPU source's CPU-side tests: the files of a
// TempDataset, scanned as ImageDataset does, with the scan's flag ("nvJPEG
// takes it") set for the names that contain "gpu".
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "sources/src/dataset_files.h"
#include "sources/src/image_dataset.h"
#include "temp_dataset.h"

namespace batchcast::testing {

// Opens the files under `d` (train 24 px, seed 3), read through `env` (the
// default when null; it must outlive the dataset); `size` files expected.
inline std::unique_ptr<ImageDataset> OpenFlaggedDataset(const TempDataset& d, uint64_t size,
                                                        ReadEnv* env = nullptr) {
  SourceOptions o;
  o.data = d.root();
  o.size = 24;
  o.seed = 3;
  auto ds = ImageDataset::Open(
      o, 2,
      [](const std::string& path, std::span<const uint8_t>, bool, const image::JpegInfo&) {
        return path.find("gpu") != std::string::npos;
      },
      env);
  EXPECT_TRUE(ds.ok()) << ds.status().ToString();
  if (!ds.ok()) return nullptr;
  EXPECT_EQ((*ds)->size(), size);
  return std::move(*ds);
}

// The bytes of file `index` of `dataset`.
inline std::vector<uint8_t> FileBytes(const ImageDataset& dataset, int64_t index) {
  std::vector<uint8_t> b;
  EXPECT_TRUE(ReadFileBytes(dataset.path(index), b).ok());
  return b;
}

}  // namespace batchcast::testing
