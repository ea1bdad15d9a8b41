#include "image_source.h"

#include <cstring>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "batchcast/image/pipeline.h"
#include "file_prefetcher.h"
#include "stage_times.h"

namespace batchcast {
namespace {

class ImageSource : public SampleSource {
 public:
  ImageSource(std::shared_ptr<ImageDataset> dataset, int workers)
      : SampleSource(workers),
        dataset_(std::move(dataset)),
        workers_(static_cast<size_t>(workers)),
        stages_({{"read", workers}, {"decode_augment", workers}}),
        sequential_(dataset_->reader().sequential()),
        prefetcher_(*dataset_, sequential_) {}

  uint64_t size() const override { return dataset_->size(); }
  std::vector<FieldSpec> fields() const override { return dataset_->fields(MemoryKind::kHost); }
  std::string description() const override { return dataset_->Describe(); }
  std::vector<std::pair<std::string, int64_t>> counters() const override {
    return dataset_->counters();
  }
  std::vector<std::string> dataset_counters() const override { return dataset_->counter_names(); }
  std::vector<uint64_t> sample_groups() const override { return dataset_->sample_groups(); }
  uint64_t listing_digest() const override { return dataset_->ListingDigest(); }
  Status SaveListing(const std::string& path) const override { return dataset_->SaveListing(path); }
  Status DroppedElsewhere(std::span<const int64_t> indices) override {
    return dataset_->DroppedElsewhere(indices);
  }

  // Files: each worker reads its samples' files. Shards (a sequential
  // reader, Note [Shard reads]): the prefetch thread reads each batch's
  // bytes in stream order while the batch before it decodes.
  Result<uint32_t> FillBatch(const SlotView& slot, const ReadAhead& next) override {
    if (!sequential_) return SampleSource::FillBatch(slot, next);
    prefetcher_.Wait(slot.indices);
    std::swap(current_, ahead_);
    if (current_.size() < slot.count()) current_.resize(slot.count());
    position_.clear();
    for (size_t i = 0; i < slot.count(); ++i) {
      const int64_t index = slot.indices[i];
      position_[index] = i;
      // Not read ahead (the first batch, or a wrong hint): read it now, in order.
      if (current_[i].index != index && !dataset_->known_bad(index)) {
        (void)current_[i].Read(dataset_->reader(),
                               index);  // a failure is found again in FillSample
      }
    }
    prefetcher_.Start(&ahead_, next.indices, nullptr, next.guess);
    return SampleSource::FillBatch(slot, next);
  }

  // Read, then decode + crop + resize + normalize in one pass (the CPU
  // pipeline does not separate them); worker-seconds over `workers` threads.
  std::vector<StageTime> stage_times() const override { return stages_.Read(); }
  void Cancel() override { dataset_->Cancel(); }

  Result<SampleFill> FillSample(int worker, uint32_t epoch, int64_t index,
                                std::span<uint8_t* const> out) override {
    Worker& w = workers_[static_cast<size_t>(worker)];
    if (!w.pipeline) w.pipeline = std::make_unique<image::CpuImagePipeline>(dataset_->transform());
    BATCHCAST_ASSIGN_OR_RETURN(const SampleFill fill, dataset_->Decode(index, [&](int64_t i) {
      // Shards: the bytes read ahead in stream order (the prefetch thread's
      // reads are not in the "read" stage time).
      const FileBuffer* ahead = nullptr;
      if (sequential_) {
        const auto at = position_.find(i);
        if (at != position_.end() && current_[at->second].index == i) ahead = &current_[at->second];
      }
      if (ahead == nullptr) {
        StageTimes::Scope read_time(&stages_, kRead);
        BATCHCAST_RETURN_IF_ERROR(dataset_->reader().Read(i, w.bytes));
      }
      StageTimes::Scope timed(&stages_, kDecodeAugment);
      return w.pipeline->Process(ahead != nullptr ? ahead->bytes : w.bytes, epoch, i, out[0]);
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

  enum Stage : size_t { kRead, kDecodeAugment };

  // Shared with the sources of the server's other rings (MakeSources).
  const std::shared_ptr<ImageDataset> dataset_;
  std::vector<Worker> workers_;
  StageTimes stages_;
  const bool sequential_;
  // Sequential readers: this batch's bytes, the next batch's (the prefetch
  // thread's between Start and Wait), and where each index of this batch is.
  std::vector<FileBuffer> current_, ahead_;
  std::unordered_map<int64_t, size_t> position_;
  FilePrefetcher prefetcher_;  // writes ahead_: declared after it
};

}  // namespace

Result<std::unique_ptr<Source>> MakeImageSource(const SourceOptions& options, ReadEnv* env,
                                                DatasetShare* share) {
  const int workers = options.workers > 0
                          ? options.workers
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  BATCHCAST_ASSIGN_OR_RETURN(std::shared_ptr<ImageDataset> dataset,
                             SharedDataset(share, [&](uint32_t readers) {
                               return ImageDataset::Open(options, workers, {}, env, readers);
                             }));
  return std::unique_ptr<Source>(new ImageSource(std::move(dataset), workers));
}

}  // namespace batchcast
