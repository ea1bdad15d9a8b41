// cpu_pipeline_cost: thread CPU time per image of the CPU image pipeline and
// of its stages, over the JPEGs of a folder (read into memory first), so that
// the cost can be compared between versions on a machine shared with other
// work (thread CPU time, unlike wall time, hardly moves with the load).
//
//   cpu_pipeline_cost DIR [--transform train|eval] [--size 224] [--dtype float32]
//       [--layout nchw] [--passes 3] [--max-files 0] [--progressive]
//
// The transform options are spelled and parsed as `batchcast-server serve`
// takes them (tools/server_options_cli.h) and made into the pipeline's
// options as the image source makes them.
//
// Prints, per image (median over the passes): the header alone, the header +
// planned region decode, and the whole pipeline (header, decode, resize, flip,
// normalize, dtype, layout), in microseconds of thread CPU time.
//
// --progressive: only the progressive files (those the nvJPEG hardware engine
// refuses), and also the costs of the GPU source's ways to serve them: a full
// DecodeRgb, the DCT-scaled crop decode of its CPU fallback (ReadHeader +
// Decode(scale_denom, rect) of the train/eval crop, as DecodeCrop in
// sources/src/decode_route.cc), and TranscodeToBaseline (once per file, after
// which the hardware engine decodes the output), with the sizes in and out.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "batchcast/image/crop_planner.h"
#include "batchcast/image/jpeg.h"
#include "batchcast/image/pipeline.h"
#include "batchcast/image/transcode.h"
#include "benchmarks/bench_util.h"
#include "sources/src/image_dataset.h"
#include "tools/server_options_cli.h"

namespace {

namespace img = batchcast::image;

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Median over the passes of fn(pass)'s thread CPU seconds, per file, in us.
template <typename Fn>
double MedianUs(int passes, size_t files, Fn fn) {
  std::vector<double> per_pass;
  for (int p = 0; p < passes; ++p) {
    const double t0 = ThreadCpuSeconds();
    fn(static_cast<uint32_t>(p));
    per_pass.push_back(1e6 * (ThreadCpuSeconds() - t0) / static_cast<double>(files));
  }
  std::sort(per_pass.begin(), per_pass.end());
  return per_pass[per_pass.size() / 2];
}

// Header + planned region decode of every file (epoch `epoch`); returns the
// number of failed decodes.
size_t DecodeCrops(img::JpegDecoder& decoder, const std::vector<std::vector<uint8_t>>& files,
                   const img::TransformOptions& options, uint32_t epoch, bool gray_as_rgb) {
  size_t failed = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    auto info = decoder.ReadHeader(files[i], 0);
    if (!info.ok()) continue;
    const img::CropPlan plan =
        img::PlanCrop(options, epoch, static_cast<int64_t>(i), info->width, info->height);
    if (!decoder.Decode(plan.decode.scale_denom, plan.decode.rect, gray_as_rgb).ok()) ++failed;
  }
  return failed;
}

// The --progressive report: the GPU source's fallback routes for `files`.
void ReportFallbackRoutes(const std::vector<std::vector<uint8_t>>& files,
                          const img::TransformOptions& options, int passes) {
  img::JpegDecoder decoder;
  size_t failed = 0;
  const double full = MedianUs(passes, files.size(), [&](uint32_t) {
    for (const auto& f : files) failed += decoder.DecodeRgb(f, 0).ok() ? 0 : 1;
  });
  const double crop = MedianUs(passes, files.size(), [&](uint32_t epoch) {
    failed += DecodeCrops(decoder, files, options, epoch, /*gray_as_rgb=*/true);
  });
  size_t in_bytes = 0, out_bytes = 0;
  std::vector<std::vector<uint8_t>> baseline(files.size());
  const double transcode = MedianUs(passes, files.size(), [&](uint32_t) {
    in_bytes = out_bytes = 0;
    for (size_t i = 0; i < files.size(); ++i) {
      auto out = img::TranscodeToBaseline(files[i], 0);
      if (!out.ok()) {
        ++failed;
        continue;
      }
      in_bytes += files[i].size();
      out_bytes += out->size();
      baseline[i] = *std::move(out);
    }
  });
  const double baseline_full = MedianUs(passes, files.size(), [&](uint32_t) {
    for (const auto& f : baseline) failed += decoder.DecodeRgb(f, 0).ok() ? 0 : 1;
  });
  std::printf(
      "  progressive files, us of thread CPU per image: full DecodeRgb %.1f | crop decode "
      "(CPU fallback) %.1f | TranscodeToBaseline %.1f (once per file)\n"
      "  bytes in %zu -> out %zu (%.3fx); for reference, full DecodeRgb of the output %.1f\n",
      full, crop, transcode, in_bytes, out_bytes,
      static_cast<double>(out_bytes) / static_cast<double>(std::max<size_t>(in_bytes, 1)),
      baseline_full);
  if (failed > 0) std::printf("  %zu fallback-route calls failed\n", failed);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Thread CPU time per image of the CPU image pipeline and its stages");
  batchcast::ServerOptions server_options;
  std::vector<batchcast::Status> option_errors;
  batchcast::AddServerOptions(&app, server_options, option_errors,
                              {"data", "size", "dtype", "layout", "transform"});
  app.get_option("data")->description("folder of JPEG files (searched recursively)")->required();
  int passes = 3;
  size_t max_files = 0;
  bool progressive_only = false;
  app.add_option("--passes", passes, "passes over the files (the median is printed)");
  app.add_option("--max-files", max_files, "at most this many files (0: all)");
  app.add_flag("--progressive", progressive_only,
               "only progressive files; also the GPU source's fallback routes and transcoding");
  CLI11_PARSE(app, argc, argv);
  for (const batchcast::Status& e : option_errors) {
    std::fprintf(stderr, "%s\n", e.ToString().c_str());
    return 2;
  }
  auto made = batchcast::MakeTransformOptions(server_options.source);
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
    return 2;
  }
  const img::TransformOptions& options = *made;

  std::vector<std::vector<uint8_t>> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(server_options.source.data)) {
    if (!e.is_regular_file()) continue;
    std::vector<uint8_t> bytes = batchcast::bench::ReadAll(e.path().string());
    if (progressive_only) {
      auto info = img::ReadJpegInfo(bytes);
      if (!info.ok() || !info->progressive) continue;
    }
    files.push_back(std::move(bytes));
    if (max_files > 0 && files.size() >= max_files) break;
  }
  img::JpegDecoder decoder;
  const double header = MedianUs(passes, files.size(), [&](uint32_t) {
    for (const auto& f : files) (void)decoder.ReadHeader(f, 0);
  });
  size_t failed = 0;
  const double decode = MedianUs(passes, files.size(), [&](uint32_t epoch) {
    failed += DecodeCrops(decoder, files, options, epoch, /*gray_as_rgb=*/false);
  });
  img::CpuImagePipeline pipeline(options);
  std::vector<uint8_t> out(pipeline.output_bytes());
  const double whole = MedianUs(passes, files.size(), [&](uint32_t epoch) {
    for (size_t i = 0; i < files.size(); ++i) {
      if (!pipeline.Process(files[i], epoch, static_cast<int64_t>(i), out.data()).ok()) ++failed;
    }
  });
  std::printf(
      "%zu files, %s %d %s, median of %d passes, us of thread CPU per image:\n"
      "  header %.1f | header + region decode %.1f | pipeline %.1f (%.0f images/s per core)\n",
      files.size(), options.kind == img::TransformOptions::Kind::kEval ? "eval" : "train",
      options.size, std::string(batchcast::DTypeName(options.dtype)).c_str(), passes, header,
      decode, whole, 1e6 / whole);
  if (failed > 0) std::printf("  %zu decodes failed\n", failed);
  if (progressive_only) ReportFallbackRoutes(files, options, passes);
  return 0;
}
