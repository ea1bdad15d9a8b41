// The SampleReader of one-file-per-sample datasets (sample_reader.h).
#include "dataset_files.h"
#include "image_dataset.h"
#include "sample_reader.h"

namespace batchcast {
namespace {

class FileSampleReader : public SampleReader {
 public:
  explicit FileSampleReader(const ImageDataset& dataset) : dataset_(dataset) {}
  Status Read(int64_t index, std::vector<uint8_t>& bytes) override {
    return dataset_.io().Read(dataset_.path(index), bytes);
  }
  bool sequential() const override { return false; }

 private:
  const ImageDataset& dataset_;
};

}  // namespace

std::unique_ptr<SampleReader> MakeFileSampleReader(const ImageDataset& dataset) {
  return std::make_unique<FileSampleReader>(dataset);
}

}  // namespace batchcast
