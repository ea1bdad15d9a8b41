// gpu_pipeline_bench: the GPU path's producer side on one dataset, side by side.
//
//   gpu_pipeline_bench DATA [--batch 256] [--seconds 10] [--size 224]
//                      [--dtype float16] [--layout nchw] [--transform train]
//                      [--modes decode,fill,augment] [--workers N] [--device-cache-mb N]
//
// 1. decode-only: nvJPEG batched decode (hardware backend where present) of
//    the files it supports, read beforehand into one page-locked buffer, as
//    the server passes them (Note [Pinned bitstreams]; no file I/O), batches
//    of --batch on one stream with two decode states: the reference rate
//    (benchmarks/gpu_feed.py).
// 2. fill: CudaImageSource::FillBatch (file reads, nvJPEG, CPU fallback for
//    the other files, the fused kernel) into a ring of 8 device slots, as the
//    server's pipeline thread calls it, without consumers; its JSON has each
//    stage's share of the measured run's wall time (stage_share, the
//    server's producer_stage_s: docs/stats.md).
// 3. augment (only when asked): the fused kernel alone (cuda::AugmentAsync) on
//    --batch random 500x375 images with the crops --transform gives them
//    (image::PlanCrop, as the GPU source), back to back on one stream: GPU
//    microseconds per batch and per image.
// Prints one JSON object per mode: images/s, and the process CPU time per
// wall second (cores used).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "batchcast/cuda/runtime.h"
#include "batchcast/cuda_image/augment.h"
#include "batchcast/cuda_image/nvjpeg.h"
#include "batchcast/image/crop_planner.h"
#include "batchcast/image/jpeg.h"
#include "batchcast/sources/make_source.h"
#include "benchmarks/bench_util.h"
#include "sources/src/image_dataset.h"
#include "sources/src/image_source.h"
#include "tools/server_options_cli.h"

namespace {

using batchcast::bench::CpuSeconds;
using batchcast::bench::ReadAll;
using Clock = std::chrono::steady_clock;

// One JSON line: the mode's images/s over `batch`-sized batches, the process's
// CPU cores (CPU seconds per wall second) and what `more` adds.
void PrintResult(const char* mode, int batch, double rate, double cores, nlohmann::json more) {
  more["mode"] = mode;
  more["batch"] = batch;
  more["images_per_s"] = rate;
  more["cpu_cores_used"] = cores;
  std::cout << more.dump() << std::endl;
}

void Die(const batchcast::Status& s) {
  std::cerr << s.ToString() << "\n";
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace batchcast;
  CLI::App app{"GPU path producer benchmark"};
  int batch = 256;
  double seconds = 10;
  app.add_option("--batch", batch);
  app.add_option("--seconds", seconds);
  std::string modes = "decode,fill";
  app.add_option("--modes", modes, "decode (decode-only), fill, augment (the kernel alone)");
  // The source options as batchcast-server spells and parses them.
  ServerOptions server_options;
  server_options.source.dtype = DType::kFloat16;
  std::vector<Status> option_errors;
  AddServerOptions(&app, server_options, option_errors,
                   {"data", "size", "dtype", "layout", "transform", "workers", "device_cache_mb",
                    "transcode_cache_mb", "nvjpeg_calls", "nvjpeg_region"});
  app.get_option("data")->required();
  CLI11_PARSE(app, argc, argv);
  for (const Status& e : option_errors) Die(e);
  const std::string& data = server_options.source.data;
  std::cerr << "device: " << cuda::DeviceDescription(0) << "\n";

  // ---- 1. decode only ----
  if (modes.find("decode") != std::string::npos) {
    auto dec = cuda::NvJpegDecoder::Create(0);
    if (!dec.ok()) Die(dec.status());
    auto entries = ListImageDataset(data);
    if (!entries.ok()) Die(entries.status());
    std::vector<std::vector<uint8_t>> files;
    std::vector<std::pair<int, int>> dims;
    size_t skipped = 0, total = 0;
    for (const ImageEntry& e : *entries) {
      std::vector<uint8_t> bytes = ReadAll(e.path);
      auto info = image::ReadJpegInfo(bytes);
      if (!info.ok() || info->progressive || !(*dec)->Supports(bytes)) {
        ++skipped;
        continue;
      }
      dims.emplace_back(info->width, info->height);
      total += bytes.size();
      files.push_back(std::move(bytes));
    }
    if (files.empty()) Die(NotFoundError("no file the decoder takes under " + data));
    // The files in one page-locked buffer, so that nvJPEG's copies of them
    // need no staging through pageable memory (as the server passes them).
    auto pinned_files = cuda::PinnedBuffer::Create(total);
    if (!pinned_files.ok()) Die(pinned_files.status());
    std::vector<std::span<const uint8_t>> inputs;
    size_t off = 0;
    for (const auto& f : files) {
      std::memcpy(pinned_files->data() + off, f.data(), f.size());
      inputs.emplace_back(pinned_files->data() + off, f.size());
      off += f.size();
    }
    auto stream = cuda::Stream::Create(0);
    if (!stream.ok()) Die(stream.status());
    size_t max_bytes = 0;
    for (auto [w, h] : dims) max_bytes = std::max<size_t>(max_bytes, size_t(w + 1) * h * 3);
    std::vector<cuda::DeviceBuffer> arenas;
    std::vector<cuda::Event> done;
    for (int k = 0; k < 2; ++k) {
      auto a = cuda::DeviceBuffer::Create(0, max_bytes * batch);
      if (!a.ok()) Die(a.status());
      arenas.push_back(std::move(*a));
      auto e = cuda::Event::Create(0, false, true);
      if (!e.ok()) Die(e.status());
      (void)e->Record(stream->ref());
      done.push_back(std::move(*e));
    }
    auto run = [&](double secs) {
      size_t next = 0, images = 0;
      int k = 0;
      const auto t0 = Clock::now();
      const double c0 = CpuSeconds();
      while (std::chrono::duration<double>(Clock::now() - t0).count() < secs) {
        if (Status s = done[k].Synchronize(); !s.ok()) Die(s);
        std::vector<std::span<const uint8_t>> jpegs;
        std::vector<cuda::NvJpegDecoder::Output> outs;
        for (int i = 0; i < batch; ++i) {
          const size_t f = next++ % files.size();
          jpegs.push_back(inputs[f]);
          const auto [w, h] = dims[f];
          outs.push_back({arenas[k].data() + max_bytes * i, size_t(w) * 3, size_t(h)});
        }
        if (Status s = (*dec)->DecodeBatch(k, jpegs, outs, stream->ref()); !s.ok()) Die(s);
        (void)done[k].Record(stream->ref());
        images += batch;
        k ^= 1;
      }
      (void)stream->Synchronize();
      const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
      return std::make_tuple(images / wall, (CpuSeconds() - c0) / wall);
    };
    run(1.0);  // warm up
    auto [rate, cores] = run(seconds);
    PrintResult("decode_only", batch, rate, cores,
                {{"backend", (*dec)->backend_name()},
                 {"input", "pinned"},
                 {"files", files.size()},
                 {"files_not_supported", skipped}});
  }

  // ---- 2. CudaImageSource::FillBatch into device slots ----
  if (modes.find("fill") != std::string::npos) {
    SourceOptions o = server_options.source;
    o.device = Device::Cuda(0);
    o.decode = DecodeMode::kGpu;
    auto source = MakeSource(o);
    if (!source.ok()) Die(source.status());
    const auto fields = (*source)->fields();
    const size_t per = fields[0].bytes_per_sample();
    constexpr int kSlots = 8;
    auto ring = cuda::DeviceBuffer::Create(0, (per + 8) * batch * kSlots);
    if (!ring.ok()) Die(ring.status());
    auto stream = cuda::Stream::Create(0);
    if (!stream.ok()) Die(stream.status());
    const int64_t n_files = static_cast<int64_t>((*source)->size());
    std::vector<int64_t> idx(batch);
    int64_t next = 0;
    nlohmann::json stage_share;  // of the last run: seconds per stage / wall
    auto run = [&](double secs, int64_t max_images) {
      size_t images = 0;
      const auto t0 = Clock::now();
      const double c0 = CpuSeconds();
      const std::vector<StageTime> stages0 = (*source)->stage_times();
      for (int slot = 0; std::chrono::duration<double>(Clock::now() - t0).count() < secs &&
                         static_cast<int64_t>(images) < max_images;
           slot = (slot + 1) % kSlots) {
        for (int i = 0; i < batch; ++i) idx[i] = next++ % n_files;
        SlotView t;
        t.epoch = static_cast<uint32_t>(next / n_files);
        t.indices = idx;
        uint8_t* base = ring->data() + (per + 8) * batch * slot;
        t.field_data = {base, base + per * batch};
        t.field_bytes = {per, 8};
        t.device = Device{MemoryKind::kCuda, 0};
        t.stream = stream->ref();
        std::vector<int64_t> ahead(batch);
        for (int i = 0; i < batch; ++i) ahead[i] = (next + i) % n_files;
        Result<uint32_t> kept = (*source)->FillBatch(t, ReadAhead{ahead, t.epoch});
        if (!kept.ok()) Die(kept.status());
        images += *kept;  // dropped files (Note [Dropped files]) make no image
      }
      (void)stream->Synchronize();
      const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
      const std::vector<StageTime> stages1 = (*source)->stage_times();
      stage_share = nlohmann::json::object();
      for (size_t k = 0; k < stages1.size() && k < stages0.size(); ++k) {
        stage_share[stages1[k].name] = (stages1[k].seconds - stages0[k].seconds) / wall;
      }
      return std::make_tuple(images / wall, (CpuSeconds() - c0) / wall);
    };
    // The first epoch; then later ones (the same unless --device-cache-mb
    // keeps CPU-decoded files on the device).
    auto [cold_rate, cold_cores] = run(1e9, n_files);
    run(1.0, INT64_MAX);
    auto [rate, cores] = run(seconds, INT64_MAX);
    nlohmann::json counters;
    for (const auto& [k, v] : (*source)->counters()) counters[k] = v;
    PrintResult("fill", batch, rate, cores,
                {{"source", (*source)->description()},
                 {"first_epoch_images_per_s", cold_rate},
                 {"first_epoch_cpu_cores_used", cold_cores},
                 {"counters", counters},
                 {"stage_share", stage_share}});
  }
  // ---- 3. the fused kernel alone ----
  if (modes.find("augment") != std::string::npos) {
    constexpr int kW = 500, kH = 375;
    const int size = server_options.source.size;
    const size_t image_bytes = size_t(kW) * kH * 3;
    auto src = cuda::DeviceBuffer::Create(0, image_bytes * batch);
    auto out = cuda::DeviceBuffer::Create(0, size_t(size) * size * 3 * 4 * batch);
    auto desc = cuda::DeviceBuffer::Create(0, sizeof(cuda::AugmentSample) * batch);
    auto stream = cuda::Stream::Create(0);
    if (!src.ok()) Die(src.status());
    if (!out.ok()) Die(out.status());
    if (!desc.ok()) Die(desc.status());
    if (!stream.ok()) Die(stream.status());
    std::mt19937 rng(1);
    std::vector<uint8_t> pixels(image_bytes * batch);
    for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng());
    if (Status s = cuda::CopyAsync(src->data(), pixels.data(), pixels.size(), stream->ref());
        !s.ok()) {
      Die(s);
    }
    auto transform = MakeTransformOptions(server_options.source);
    if (!transform.ok()) Die(transform.status());
    nlohmann::json results = nlohmann::json::array();
    for (DType dtype : {DType::kFloat16, DType::kFloat32}) {
      cuda::AugmentParams params;
      params.size = size;
      params.dtype = dtype;
      std::vector<cuda::AugmentSample> samples(batch);
      int area = 0, boxed = 0;
      for (int i = 0; i < batch; ++i) {
        // The crop and DCT scale the GPU source gives sample i of epoch 0
        // (image::PlanCrop), as its kernel descriptor for a full-size image.
        const image::CropPlan plan = image::PlanCrop(*transform, 0, i, kW, kH);
        cuda::AugmentSample& d = samples[i];
        d.src = src->data() + image_bytes * i;
        d.pitch = kW * 3;
        d.src_w = kW;
        d.src_h = kH;
        d.box = plan.decode.scale_denom;
        d.rect_x = plan.decode.rect.x;
        d.rect_y = plan.decode.rect.y;
        d.rect_w = plan.decode.rect.w;
        d.rect_h = plan.decode.rect.h;
        d.flip = plan.crop.flip ? 1 : 0;
        d.area = cuda::UsesAreaResampling(d.rect_w, d.rect_h, size) ? 1 : 0;
        d.out = out->data() + size_t(size) * size * 3 * 4 * i;
        area += d.area;
        boxed += d.box > 1;
      }
      if (Status s = cuda::CopyAsync(desc->data(), samples.data(),
                                     samples.size() * sizeof(samples[0]), stream->ref());
          !s.ok()) {
        Die(s);
      }
      auto launch = [&](int n) {
        for (int k = 0; k < n; ++k) {
          if (Status s =
                  cuda::AugmentAsync(reinterpret_cast<const cuda::AugmentSample*>(desc->data()),
                                     batch, params, stream->ref());
              !s.ok()) {
            Die(s);
          }
        }
        if (Status s = stream->Synchronize(); !s.ok()) Die(s);
      };
      launch(5);  // warm up
      constexpr int kLaunches = 200;
      const auto t0 = Clock::now();
      launch(kLaunches);
      const double us =
          std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kLaunches;
      results.push_back({{"dtype", std::string(DTypeName(dtype))},
                         {"us_per_batch", us},
                         {"us_per_image", us / batch},
                         {"area_samples", area},
                         {"box_samples", boxed}});
    }
    nlohmann::json j = {{"mode", "augment"},
                        {"batch", batch},
                        {"size", size},
                        {"source", "500x375"},
                        {"kernels", results}};
    std::cout << j.dump() << std::endl;
  }
  return 0;
}
