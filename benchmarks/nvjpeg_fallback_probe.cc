// nvjpeg_fallback_probe: which decoder should take the JPEGs that the nvJPEG
// hardware engine refuses (issue 9), and what each costs in host CPU.
//
//   nvjpeg_fallback_probe DATA_DIR [--seconds 5] [--threads 1,4]
//                         [--max-files 400] [--spin-sync]
//
// On the GPU host (CUDA with nvJPEG), after building the project:
//   build/benchmarks/nvjpeg_fallback_probe /tmp/bc_gpu_producer_100x40 --seconds 4 --threads 1,4
//
// 1. Lists DATA_DIR (an ImageFolder tree or a .tsv list), reads every file and
//    keeps (in memory, at most --max-files) those the hardware engine refuses:
//    progressive by their header, or NvJpegDecoder::Supports() false.
// 2. Decodes those files to interleaved RGB, round-robin, with T threads for
//    each T in --threads (each thread with its own decoder objects), for
//    --seconds after a 1 s warm-up, with:
//    - libjpeg-turbo: batchcast's JpegDecoder::DecodeRgb (the CPU route's full
//      decode, sources/src/decode_route.cc), into host memory;
//    - nvjpeg_gpu_hybrid / nvjpeg_hybrid: nvJPEG's decoupled API (JpegStream
//      parse, DecoderJpegSupported, DecodeJpegHost, TransferToDevice,
//      DecodeJpegDevice, stream sync) with NVJPEG_BACKEND_GPU_HYBRID /
//      NVJPEG_BACKEND_HYBRID, into device memory;
//    - nvjpeg_default_single: nvjpegDecode (handle of NVJPEG_BACKEND_DEFAULT).
//    Each configuration first decodes every kept file once (thread 0's
//    objects): the files it calls unsupported or fails on are counted
//    (files_unsupported, files_failed, first_file_error) and left out of its
//    timed runs, which go over the rest (files_measured).
//    Note: for train transforms the CPU route decodes a DCT-scaled crop
//    (DecodeCrop), cheaper than this full decode.
// 3. Checks each nvJPEG configuration once against libjpeg-turbo on one file
//    it decodes, progressive where it takes one ("check": mean and largest
//    absolute difference per byte; expect a mean < 3).
//
// Output: one JSON line per configuration and thread count on stdout (images/s,
// process CPU cores used over the window, cpu_ms_per_image = cores / rate,
// host_phase_ms_per_image: the wall time inside nvjpegDecodeJpegHost), then a
// summary line; a Markdown table of the same on stderr. A configuration that
// cannot be set up is reported with "ok": false, the failing call and its
// status number; per-image errors are counted ("errors", "first_error").
// GPU waits sleep (cudaDeviceScheduleBlockingSync, as the server's events do)
// unless --spin-sync, so that CPU figures do not include spin-waiting.
#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "batchcast/cuda/runtime.h"
#include "batchcast/cuda_image/nvjpeg.h"
#include "batchcast/image/jpeg.h"
#include "benchmarks/bench_util.h"
#include "sources/src/dataset_files.h"

namespace {

using batchcast::bench::CpuSeconds;
using batchcast::bench::ReadAll;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
namespace img = batchcast::image;

struct File {
  std::string path;
  std::vector<uint8_t> bytes;
  int width = 0;
  int height = 0;
  bool progressive = false;
};

// The first failing call of a configuration or an image.
struct Error {
  std::string call;
  int status = 0;
  json ToJson() const { return {{"call", call}, {"status", status}}; }
};

// Calls fn(args...); on a status other than 0 fills *err and returns false.
#define BC_TRY(fn, ...)                                       \
  do {                                                        \
    const int bc_status_ = static_cast<int>(fn(__VA_ARGS__)); \
    if (bc_status_ != 0) {                                    \
      *err = Error{#fn, bc_status_};                          \
      return false;                                           \
    }                                                         \
  } while (0)

// One decoding configuration: per-thread objects, created up front.
class Config {
 public:
  virtual ~Config() = default;
  virtual std::string name() const = 0;
  // Makes the objects of `threads` threads. False (with *err) when it fails.
  virtual bool Setup(int threads, size_t max_rgb_bytes, Error* err) = 0;
  // Decodes `f` with thread t's objects. *supported false: skipped.
  virtual bool Decode(int t, const File& f, bool* supported, Error* err) = 0;
  // Thread t's last output as packed RGB on the host (for the check).
  virtual bool Output(int t, const File& f, std::vector<uint8_t>* rgb, Error* err) = 0;
  // Wall seconds spent in the host phase so far (decoupled API only).
  virtual double host_phase_seconds() const { return 0; }
};

class LibjpegConfig : public Config {
 public:
  std::string name() const override { return "libjpeg-turbo"; }
  bool Setup(int threads, size_t, Error*) override {
    decoders_.clear();
    for (int t = 0; t < threads; ++t) decoders_.push_back(std::make_unique<img::JpegDecoder>());
    last_.assign(threads, {});
    return true;
  }
  bool Decode(int t, const File& f, bool* supported, Error* err) override {
    *supported = true;
    auto out = decoders_[t]->DecodeRgb(f.bytes, img::kDefaultMaxPixels);
    if (!out.ok()) {
      *err = Error{"JpegDecoder::DecodeRgb: " + out.status().ToString(), -1};
      return false;
    }
    last_[t] = *out;
    return true;
  }
  bool Output(int t, const File&, std::vector<uint8_t>* rgb, Error*) override {
    const img::DecodedImage& d = last_[t];
    rgb->clear();
    for (int y = 0; y < d.height; ++y) {
      const uint8_t* row = d.data + d.stride * y;
      rgb->insert(rgb->end(), row, row + size_t(d.width) * d.channels);
    }
    return true;
  }

 private:
  std::vector<std::unique_ptr<img::JpegDecoder>> decoders_;
  std::vector<img::DecodedImage> last_;
};

// nvJPEG: the decoupled API with one backend, or (single) nvjpegDecode.
class NvJpegConfig : public Config {
 public:
  NvJpegConfig(std::string name, nvjpegBackend_t backend, bool single)
      : name_(std::move(name)), backend_(backend), single_(single) {}
  ~NvJpegConfig() override { Teardown(); }
  std::string name() const override { return name_; }

  bool Setup(int threads, size_t max_rgb_bytes, Error* err) override {
    Teardown();
    BC_TRY(nvjpegCreateEx, backend_, nullptr, nullptr, 0, &handle_);
    for (int t = 0; t < threads; ++t) {
      threads_.push_back(std::make_unique<PerThread>());
      PerThread& p = *threads_.back();
      BC_TRY(cudaStreamCreateWithFlags, &p.stream, cudaStreamNonBlocking);
      BC_TRY(cudaMalloc, reinterpret_cast<void**>(&p.out), max_rgb_bytes);
      if (single_) {
        BC_TRY(nvjpegJpegStateCreate, handle_, &p.state);
        continue;
      }
      BC_TRY(nvjpegDecoderCreate, handle_, backend_, &p.decoder);
      BC_TRY(nvjpegDecoderStateCreate, handle_, p.decoder, &p.state);
      BC_TRY(nvjpegBufferPinnedCreate, handle_, nullptr, &p.pinned);
      BC_TRY(nvjpegBufferDeviceCreate, handle_, nullptr, &p.device);
      BC_TRY(nvjpegStateAttachPinnedBuffer, p.state, p.pinned);
      BC_TRY(nvjpegStateAttachDeviceBuffer, p.state, p.device);
      BC_TRY(nvjpegJpegStreamCreate, handle_, &p.jpeg);
      BC_TRY(nvjpegDecodeParamsCreate, handle_, &p.params);
      BC_TRY(nvjpegDecodeParamsSetOutputFormat, p.params, NVJPEG_OUTPUT_RGBI);
    }
    return true;
  }

  bool Decode(int t, const File& f, bool* supported, Error* err) override {
    PerThread& p = *threads_[t];
    nvjpegImage_t dst{};
    dst.channel[0] = p.out;
    dst.pitch[0] = size_t(f.width) * 3;
    *supported = true;
    if (single_) {
      BC_TRY(nvjpegDecode, handle_, p.state, f.bytes.data(), f.bytes.size(), NVJPEG_OUTPUT_RGBI,
             &dst, p.stream);
    } else {
      BC_TRY(nvjpegJpegStreamParse, handle_, f.bytes.data(), f.bytes.size(), 0, 0, p.jpeg);
      int not_supported = 1;  // nvJPEG: 0 means supported
      BC_TRY(nvjpegDecoderJpegSupported, p.decoder, p.jpeg, p.params, &not_supported);
      if (not_supported != 0) {
        *supported = false;
        return true;
      }
      const auto h0 = Clock::now();
      BC_TRY(nvjpegDecodeJpegHost, handle_, p.decoder, p.state, p.params, p.jpeg);
      p.host_ns.fetch_add(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - h0).count(),
          std::memory_order_relaxed);
      BC_TRY(nvjpegDecodeJpegTransferToDevice, handle_, p.decoder, p.state, p.jpeg, p.stream);
      BC_TRY(nvjpegDecodeJpegDevice, handle_, p.decoder, p.state, &dst, p.stream);
    }
    BC_TRY(cudaStreamSynchronize, p.stream);
    return true;
  }

  bool Output(int t, const File& f, std::vector<uint8_t>* rgb, Error* err) override {
    rgb->resize(size_t(f.width) * 3 * f.height);
    BC_TRY(cudaMemcpy, rgb->data(), threads_[t]->out, rgb->size(), cudaMemcpyDeviceToHost);
    return true;
  }

  double host_phase_seconds() const override {
    int64_t ns = 0;
    for (const auto& p : threads_) ns += p->host_ns.load(std::memory_order_relaxed);
    return ns * 1e-9;
  }

 private:
  struct PerThread {
    cudaStream_t stream = nullptr;
    uint8_t* out = nullptr;
    nvjpegJpegDecoder_t decoder = nullptr;
    nvjpegJpegState_t state = nullptr;
    nvjpegBufferPinned_t pinned = nullptr;
    nvjpegBufferDevice_t device = nullptr;
    nvjpegJpegStream_t jpeg = nullptr;
    nvjpegDecodeParams_t params = nullptr;
    std::atomic<int64_t> host_ns{0};
  };

  // Destroys in reverse order of creation; statuses are ignored (best effort).
  void Teardown() {
    for (auto& p : threads_) {
      if (p->stream != nullptr) cudaStreamSynchronize(p->stream);
      if (p->params != nullptr) nvjpegDecodeParamsDestroy(p->params);
      if (p->jpeg != nullptr) nvjpegJpegStreamDestroy(p->jpeg);
      if (p->state != nullptr) nvjpegJpegStateDestroy(p->state);
      if (p->device != nullptr) nvjpegBufferDeviceDestroy(p->device);
      if (p->pinned != nullptr) nvjpegBufferPinnedDestroy(p->pinned);
      if (p->decoder != nullptr) nvjpegDecoderDestroy(p->decoder);
      if (p->out != nullptr) cudaFree(p->out);
      if (p->stream != nullptr) cudaStreamDestroy(p->stream);
    }
    threads_.clear();
    if (handle_ != nullptr) nvjpegDestroy(handle_);
    handle_ = nullptr;
  }

  std::string name_;
  nvjpegBackend_t backend_;
  bool single_;
  nvjpegHandle_t handle_ = nullptr;
  std::vector<std::unique_ptr<PerThread>> threads_;
};

// Per-image counts of one measured run, summed over the threads.
struct Counts {
  int64_t images = 0;
  int64_t unsupported = 0;
  int64_t errors = 0;
};

// Runs `threads` threads over `files` (thread t takes t, t+T, ...) for a 1 s
// warm-up and then `seconds`; returns the JSON line of the run.
json Measure(Config& c, const std::vector<File>& files, int threads, double seconds) {
  struct alignas(64) Slot {
    std::atomic<int64_t> images{0}, unsupported{0}, errors{0};
    Error first_error;
    bool failed = false;
  };
  std::vector<Slot> slots(threads);
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      cudaSetDevice(0);
      Slot& s = slots[t];
      for (size_t i = t; !stop.load(std::memory_order_relaxed); i += threads) {
        bool supported = true;
        Error err;
        if (!c.Decode(t, files[i % files.size()], &supported, &err)) {
          if (!s.failed) s.first_error = err;
          s.failed = true;
          s.errors.fetch_add(1, std::memory_order_relaxed);
        } else if (!supported) {
          s.unsupported.fetch_add(1, std::memory_order_relaxed);
        } else {
          s.images.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  auto snapshot = [&] {
    Counts k;
    for (Slot& s : slots) {
      k.images += s.images.load();
      k.unsupported += s.unsupported.load();
      k.errors += s.errors.load();
    }
    return k;
  };
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const Counts k0 = snapshot();
  const double c0 = CpuSeconds(), h0 = c.host_phase_seconds();
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const Counts k1 = snapshot();
  const double cpu = CpuSeconds() - c0, host = c.host_phase_seconds() - h0;
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  stop = true;
  for (std::thread& th : pool) th.join();

  const double images = double(k1.images - k0.images);
  const double rate = images / wall, cores = cpu / wall;
  json j = {
      {"config", c.name()},
      {"threads", threads},
      {"ok", k1.errors == 0},
      {"images_per_s", rate},
      {"cpu_cores_used", cores},
      {"cpu_ms_per_image", images > 0 ? json(cores / rate * 1000) : json(nullptr)},
      {"wall_ms_per_image_per_thread", images > 0 ? json(threads / rate * 1000) : json(nullptr)},
      {"skipped_unsupported", k1.unsupported - k0.unsupported},
      {"errors", k1.errors}};
  if (host > 0 && images > 0) j["host_phase_ms_per_image"] = host / images * 1000;
  for (const Slot& s : slots) {
    if (s.failed) {
      j["first_error"] = s.first_error.ToJson();
      break;
    }
  }
  return j;
}

// Mean absolute and largest difference per byte between RGB images.
json Compare(const File& f, const img::DecodedImage& want, const std::vector<uint8_t>& got) {
  double sum = 0;
  int max_diff = 0;
  for (int y = 0; y < f.height; ++y) {
    const uint8_t* a = want.data + want.stride * y;
    const uint8_t* b = got.data() + size_t(f.width) * 3 * y;
    for (int x = 0; x < f.width * 3; ++x) {
      const int d = std::abs(int(a[x]) - int(b[x]));
      sum += d;
      max_diff = std::max(max_diff, d);
    }
  }
  const double mad = sum / (double(f.width) * 3 * f.height);
  return {{"file", f.path},
          {"progressive", f.progressive},
          {"mean_abs_diff", mad},
          {"max_abs_diff", max_diff},
          {"ok", mad < 3}};
}

// What one pass of `c` (set up, thread 0) over the files gives.
struct Survey {
  std::vector<File> decodable;  // those it decodes without error
  int unsupported = 0;
  int failed = 0;
  json first_error = nullptr;
  json check = nullptr;  // against libjpeg-turbo, on a progressive file if any
};

Survey SurveyFiles(Config& c, const std::vector<File>& files) {
  Survey s;
  img::JpegDecoder reference;
  for (const File& f : files) {
    bool supported = true;
    Error err;
    if (!c.Decode(0, f, &supported, &err)) {
      ++s.failed;
      if (s.first_error.is_null()) s.first_error = {{"file", f.path}, {"error", err.ToJson()}};
      continue;
    }
    if (!supported) {
      ++s.unsupported;
      continue;
    }
    s.decodable.push_back(f);
    const bool checked = s.check.is_object() && !s.check.contains("error");
    if (checked && (s.check.value("progressive", false) || !f.progressive)) continue;
    std::vector<uint8_t> got;
    if (!c.Output(0, f, &got, &err)) {
      s.check = {{"file", f.path}, {"progressive", f.progressive}, {"error", err.ToJson()}};
      continue;
    }
    auto want = reference.DecodeRgb(f.bytes, img::kDefaultMaxPixels);
    if (want.ok() && want->channels == 3 && want->width == f.width && want->height == f.height) {
      s.check = Compare(f, *want, got);
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Decoders for the JPEGs the nvJPEG hardware engine refuses (issue 9)"};
  std::string data;
  double seconds = 5;
  std::vector<int> thread_counts = {1, 4};
  size_t max_files = 400;
  bool spin_sync = false;
  app.add_option("data", data, "ImageFolder tree or .tsv list")->required();
  app.add_option("--seconds", seconds, "measured seconds per run (after 1 s warm-up)");
  app.add_option("--threads", thread_counts, "thread counts, e.g. 1,4")->delimiter(',');
  app.add_option("--max-files", max_files, "refused files kept in memory");
  app.add_flag("--spin-sync", spin_sync, "let CUDA spin while waiting (default: sleep)");
  CLI11_PARSE(app, argc, argv);

  // Before any CUDA call creates the context.
  const int flags_status = static_cast<int>(
      cudaSetDeviceFlags(spin_sync ? cudaDeviceScheduleAuto : cudaDeviceScheduleBlockingSync));
  const std::string device = batchcast::cuda::DeviceDescription(0);
  std::cerr << "device: " << device << "\n";
  auto hw = batchcast::cuda::NvJpegDecoder::Create(0);
  if (!hw.ok()) {
    std::cerr << "NvJpegDecoder::Create(0): " << hw.status().ToString() << "\n";
    return 1;
  }
  auto entries = batchcast::ListImageDataset(data);
  if (!entries.ok()) {
    std::cerr << entries.status().ToString() << "\n";
    return 1;
  }

  // ---- 1. the files the hardware engine refuses ----
  std::vector<File> files;
  size_t scanned = 0, progressive = 0, other = 0, unreadable = 0;
  for (const batchcast::ImageEntry& e : *entries) {
    ++scanned;
    std::vector<uint8_t> bytes = ReadAll(e.path);
    auto info = img::ReadJpegInfo(bytes);
    if (!info.ok()) {
      ++unreadable;
      continue;
    }
    if (!info->progressive && (*hw)->Supports(bytes)) continue;
    ++(info->progressive ? progressive : other);
    if (files.size() < max_files) {
      files.push_back({e.path, std::move(bytes), info->width, info->height, info->progressive});
    }
  }
  size_t max_rgb = 0;
  for (const File& f : files) max_rgb = std::max(max_rgb, size_t(f.width) * 3 * f.height);
  json summary = {{"summary", true},
                  {"device", device},
                  {"reference_backend", (*hw)->backend_name()},
                  {"data", data},
                  {"files_scanned", scanned},
                  {"refused_progressive", progressive},
                  {"refused_other", other},
                  {"unreadable", unreadable},
                  {"files_measured", files.size()},
                  {"seconds", seconds},
                  {"gpu_wait", spin_sync ? "spin" : "blocking_sync"},
                  {"set_device_flags_status", flags_status}};
  std::cerr << summary.dump() << "\n";
  if (files.empty()) {
    std::cout << summary.dump() << std::endl;
    return 0;
  }

  // ---- 2./3. each configuration ----
  std::vector<std::unique_ptr<Config>> configs;
  configs.push_back(std::make_unique<LibjpegConfig>());
  configs.push_back(
      std::make_unique<NvJpegConfig>("nvjpeg_gpu_hybrid", NVJPEG_BACKEND_GPU_HYBRID, false));
  configs.push_back(std::make_unique<NvJpegConfig>("nvjpeg_hybrid", NVJPEG_BACKEND_HYBRID, false));
  configs.push_back(
      std::make_unique<NvJpegConfig>("nvjpeg_default_single", NVJPEG_BACKEND_DEFAULT, true));
  std::ostringstream table;
  table << "| config | threads | images/s | CPU cores | CPU ms/image | host phase ms/image "
           "| files unsupported | files failed | errors in run | check MAD |\n"
           "|---|---|---|---|---|---|---|---|---|---|\n";
  json runs = json::array();
  for (auto& c : configs) {
    Survey survey;
    bool surveyed = false;
    for (int threads : thread_counts) {
      threads = std::max(1, threads);
      Error err;
      json j;
      if (!c->Setup(threads, max_rgb, &err)) {
        j = {{"config", c->name()}, {"threads", threads}, {"ok", false}, {"failed", err.ToJson()}};
      } else {
        if (!surveyed) {
          survey = SurveyFiles(*c, files);
          surveyed = true;
        }
        if (survey.decodable.empty()) {
          j = {{"config", c->name()},
               {"threads", threads},
               {"ok", false},
               {"failed", "no file decodable"}};
        } else {
          j = Measure(*c, survey.decodable, threads, seconds);
        }
      }
      j["files"] = files.size();
      if (surveyed) {
        j["files_measured"] = survey.decodable.size();
        j["files_unsupported"] = survey.unsupported;
        j["files_failed"] = survey.failed;
        j["first_file_error"] = survey.first_error;
        j["check"] = survey.check;
      }
      std::cout << j.dump() << std::endl;
      runs.push_back(j);
      auto num = [&](const json& o, const char* key, const char* format) {
        if (!o.is_object() || !o.contains(key) || !o[key].is_number()) return std::string("-");
        char buf[32];
        std::snprintf(buf, sizeof(buf), format, o[key].get<double>());
        return std::string(buf);
      };
      const json& check = surveyed ? survey.check : json(nullptr);
      table << "| " << c->name() << (j["ok"].get<bool>() ? "" : " (FAILED)") << " | " << threads
            << " | " << num(j, "images_per_s", "%.1f") << " | " << num(j, "cpu_cores_used", "%.2f")
            << " | " << num(j, "cpu_ms_per_image", "%.3f") << " | "
            << num(j, "host_phase_ms_per_image", "%.3f") << " | "
            << (surveyed ? std::to_string(survey.unsupported) : "-") << " | "
            << (surveyed ? std::to_string(survey.failed) : "-") << " | " << num(j, "errors", "%.0f")
            << " | " << num(check, "mean_abs_diff", "%.3f") << " |\n";
    }
    c.reset();  // frees its GPU memory before the next configuration
  }
  summary["runs"] = runs.size();
  std::cout << summary.dump() << std::endl;
  std::cerr << "\n"
            << device << ", " << files.size() << " refused files (" << progressive
            << " progressive, " << other << " other of " << scanned << ")\n"
            << table.str();
  return 0;
}
