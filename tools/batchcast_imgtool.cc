// batchcast_imgtool: runs the CPU image pipeline on one JPEG and writes the raw
// output tensor, for tests against reference implementations and for looking
// at what the pipeline does to a file.
//
//   batchcast_imgtool INPUT.jpg OUTPUT.raw [--transform train|eval] [--size S]
//       [--dtype float32|float16|bfloat16|uint8] [--layout nchw|nhwc] [--seed N]
//       [--epoch E] [--index I] [--max-pixels P] [--mean M M M] [--std S S S]
//       [--crop X Y W H] [--print-crop] [--info] [--bench N]
//       [--interpolation auto|linear|area] [--no-dct-scaling] [--no-cropped-decode]
//
// Prints "shape [3, S, S] dtype D layout L" (and with --print-crop
// "crop x=.. y=.. w=.. h=.. flip=0|1", the CropParams in source pixels; with
// --info the JPEG header fields). Exit status: 0 success, 1 the file could not
// be read or processed (the message says why), 2 bad command line.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "batchcast/core/dtype.h"
#include "batchcast/image/jpeg.h"
#include "batchcast/image/pipeline.h"
#include "batchcast/image/transform.h"

namespace {

using batchcast::image::CpuImagePipeline;
using batchcast::image::TransformOptions;

int Fail(const std::string& message) {
  std::cerr << "batchcast_imgtool: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Run the batchcast CPU image pipeline on one JPEG and write the raw output"};
  std::string input;
  std::string output;
  std::string transform = "train";
  std::string dtype_name = "float32";
  std::string layout = "nchw";
  TransformOptions options;
  uint32_t epoch = 0;
  int64_t index = 0;
  bool print_crop = false;
  bool print_info = false;
  std::string interpolation = "auto";
  batchcast::image::PipelineTuning tuning;
  bool no_dct_scaling = false;
  bool no_cropped_decode = false;
  std::vector<float> mean;
  std::vector<float> stddev;
  std::vector<int> fixed_crop;
  int bench = 0;
  app.add_option("input", input, "JPEG file")->required();
  app.add_option("output", output, "raw output file (C order, native endianness)")->required();
  app.add_option("--transform", transform, "train or eval")
      ->check(CLI::IsMember({"train", "eval"}));
  app.add_option("--size", options.size, "output height and width")
      ->check(CLI::Range(1, batchcast::image::kMaxTransformSize));
  app.add_option("--dtype", dtype_name, "float32, float16, bfloat16 or uint8")
      ->check(CLI::IsMember({"float32", "float16", "bfloat16", "uint8"}));
  app.add_option("--layout", layout, "nchw or nhwc")->check(CLI::IsMember({"nchw", "nhwc"}));
  app.add_option("--seed", options.seed, "transform seed");
  app.add_option("--epoch", epoch, "producer epoch of the sample");
  app.add_option("--index", index, "dataset index of the sample");
  app.add_option("--max-pixels", options.max_pixels, "bound on width*height (0: default)");
  app.add_option("--mean", mean, "3 channel means in [0,1] units")->expected(3);
  app.add_option("--std", stddev, "3 channel standard deviations in [0,1] units")->expected(3);
  app.add_option("--crop", fixed_crop, "use this crop box X Y W H (source pixels, no flip)")
      ->expected(4);
  app.add_option("--bench", bench,
                 "also time N runs of the transform (indices index..index+N-1), one thread")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--print-crop", print_crop, "print the crop box in source pixels");
  app.add_flag("--info", print_info, "print the JPEG header fields");
  app.add_option("--interpolation", interpolation,
                 "resize filter (experiments): auto, linear, area")
      ->check(CLI::IsMember({"auto", "linear", "area"}));
  app.add_flag("--no-dct-scaling", no_dct_scaling, "always decode at full size (experiments)");
  app.add_flag("--no-cropped-decode", no_cropped_decode,
               "always decode the whole image (experiments)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; anything else: bad command line
  }
  tuning.allow_dct_scaling = !no_dct_scaling;
  tuning.allow_cropped_decode = !no_cropped_decode;
  using Interpolation = batchcast::image::PipelineTuning::Interpolation;
  tuning.interpolation = interpolation == "linear" ? Interpolation::kLinear
                         : interpolation == "area" ? Interpolation::kArea
                                                   : Interpolation::kAuto;

  options.kind =
      transform == "train" ? TransformOptions::Kind::kTrain : TransformOptions::Kind::kEval;
  options.dtype = *batchcast::ParseDType(dtype_name);
  options.nchw = layout == "nchw";
  if (!mean.empty()) std::copy(mean.begin(), mean.end(), options.mean.begin());
  if (!stddev.empty()) std::copy(stddev.begin(), stddev.end(), options.std.begin());
  if (const batchcast::Status valid = batchcast::image::ValidateTransformOptions(options);
      !valid.ok()) {
    std::cerr << "batchcast_imgtool: " << valid.message() << "\n";
    return 2;
  }

  std::ifstream in(input, std::ios::binary);
  if (!in) return Fail("cannot open " + input);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  if (in.bad()) return Fail("cannot read " + input);

  if (print_info) {
    const auto info = batchcast::image::ReadJpegInfo(bytes, options.max_pixels);
    if (!info.ok()) return Fail(input + ": " + info.status().ToString());
    std::cout << "info width=" << info->width << " height=" << info->height
              << " components=" << info->components << " progressive=" << info->progressive
              << " color=" << batchcast::image::ColorSpaceName(info->color) << "\n";
  }

  CpuImagePipeline pipeline(options, tuning);
  std::vector<uint8_t> out(pipeline.output_bytes());
  batchcast::image::CropParams crop;
  batchcast::Status status;
  if (fixed_crop.empty()) {
    status = pipeline.Process(bytes, epoch, index, out.data(), &crop);
  } else {
    crop = {fixed_crop[0], fixed_crop[1], fixed_crop[2], fixed_crop[3], false};
    status = pipeline.ProcessWithCrop(bytes, crop, out.data());
  }
  if (!status.ok()) return Fail(input + ": " + status.ToString());

  if (bench > 0) {
    const auto thread_cpu_seconds = [] {
      timespec t{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
      return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
    };
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = thread_cpu_seconds();
    for (int i = 0; i < bench; ++i) {
      const batchcast::Status s = pipeline.Process(bytes, epoch, index + i, out.data());
      if (!s.ok()) return Fail(input + ": " + s.ToString());
    }
    const double cpu = thread_cpu_seconds() - cpu_start;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Thread CPU time is the better per-core figure on a busy machine.
    std::printf(
        "bench %d images: wall %.3f s = %.1f images/s; thread CPU %.3f s = %.1f images/s "
        "(%.1f us/image)\n",
        bench, seconds, bench / seconds, cpu, bench / cpu, 1e6 * cpu / bench);
    // Leave the output of the first run in the file.
    const batchcast::Status s = fixed_crop.empty()
                                    ? pipeline.Process(bytes, epoch, index, out.data())
                                    : pipeline.ProcessWithCrop(bytes, crop, out.data());
    if (!s.ok()) return Fail(input + ": " + s.ToString());
  }

  std::ofstream file(output, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  file.close();
  if (!file) return Fail("cannot write " + output);

  const int s = options.size;
  if (options.nchw) {
    std::cout << "shape [3, " << s << ", " << s << "]";
  } else {
    std::cout << "shape [" << s << ", " << s << ", 3]";
  }
  std::cout << " dtype " << dtype_name << " layout " << layout << "\n";
  if (print_crop) {
    std::cout << "crop x=" << crop.x << " y=" << crop.y << " w=" << crop.w << " h=" << crop.h
              << " flip=" << (crop.flip ? 1 : 0) << "\n";
  }
  return 0;
}
