#include "image_source.h"

#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "batchcast/image/pipeline.h"

namespace batchcast {
namespace {

class ImageSource : public SampleSource {
 public:
  ImageSource(std::unique_ptr<ImageDataset> dataset, int workers)
      : SampleSource(workers),
        dataset_(std::move(dataset)),
        workers_(static_cast<size_t>(workers)) {}

  uint64_t size() const override { return dataset_->size(); }
  std::vector<FieldSpec> fields() const override { return dataset_->fields(MemoryKind::kHost); }
  std::string description() const override { return dataset_->Describe(); }
  std::vector<std::pair<std::string, int64_t>> counters() const override {
    return dataset_->counters();
  }

  Result<SampleFill> FillSample(int worker, uint32_t epoch, int64_t index,
                                std::span<uint8_t* const> out) override {
    Worker& w = workers_[static_cast<size_t>(worker)];
    if (!w.pipeline) w.pipeline = std::make_unique<image::CpuImagePipeline>(dataset_->transform());
    BATCHCAST_ASSIGN_OR_RETURN(const SampleFill fill, dataset_->Decode(index, [&](int64_t i) {
      BATCHCAST_RETURN_IF_ERROR(ReadFileBytes(dataset_->path(i), w.bytes));
      return w.pipeline->Process(w.bytes, epoch, i, out[0]);
    }));
    if (fill == SampleFill::kWritten) {
      const int64_t label = dataset_->file(index).entry.label;
      std::memcpy(out[1], &label, sizeof(label));
    }
    return fill;
  }

 private:
  // Scratch of one worker thread (FillSample's `worker`).
  struct Worker {
    std::unique_ptr<image::CpuImagePipeline> pipeline;
    std::vector<uint8_t> bytes;
  };

  const std::unique_ptr<ImageDataset> dataset_;
  std::vector<Worker> workers_;
};

}  // namespace

Result<std::unique_ptr<Source>> MakeImageSource(const SourceOptions& options) {
  const int workers = options.workers > 0
                          ? options.workers
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  BATCHCAST_ASSIGN_OR_RETURN(std::unique_ptr<ImageDataset> dataset,
                             ImageDataset::Open(options, workers));
  return std::unique_ptr<Source>(new ImageSource(std::move(dataset), workers));
}

}  // namespace batchcast
