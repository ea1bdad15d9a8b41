// Test helper: a slot in host memory for a Source's FillBatch, the SlotView
// over vectors of its own: field 0 the images, field 1 the int64 labels (the
// image sources' fields).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "batchcast/sources/source.h"

namespace batchcast::testing {

struct HostSlot {
  // A slot of the samples `idx` of `epoch`; images 0xEE and labels -1 until
  // filled.
  HostSlot(const Source& source, std::vector<int64_t> idx, uint32_t epoch)
      : indices(std::move(idx)) {
    const std::vector<FieldSpec> fields = source.fields();
    image_bytes = fields[0].bytes_per_sample();
    images.assign(image_bytes * indices.size(), 0xEE);
    labels.assign(indices.size(), -1);
    view.epoch = epoch;
    view.indices = indices;
    view.field_data = {images.data(), reinterpret_cast<uint8_t*>(labels.data())};
    view.field_bytes = {image_bytes, sizeof(int64_t)};
    view.device = Device::Cpu();
  }
  HostSlot(const HostSlot&) = delete;  // the view points into the vectors
  HostSlot& operator=(const HostSlot&) = delete;

  // The image at position i.
  std::vector<uint8_t> image(size_t i) const {
    return std::vector<uint8_t>(images.begin() + i * image_bytes,
                                images.begin() + (i + 1) * image_bytes);
  }

  std::vector<int64_t> indices;  // FillBatch compacts the kept samples' to the front
  size_t image_bytes = 0;
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
  SlotView view;
};

}  // namespace batchcast::testing
