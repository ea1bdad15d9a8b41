#include "device_list.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <string>

#include "batchcast/core/field_spec.h"

namespace batchcast {
namespace {

constexpr size_t kMaxGpus = 64;

}  // namespace

std::optional<size_t> HostRingIndex(std::string_view device) {
  constexpr std::string_view kCpu = "cpu:";
  if (!device.starts_with(kCpu) || device.size() == kCpu.size() || device.size() > 8) {
    return std::nullopt;
  }
  size_t index = 0;
  const char* end = device.data() + device.size();
  const auto [at, ec] = std::from_chars(device.data() + kCpu.size(), end, index);
  if (ec != std::errc() || at != end) return std::nullopt;
  return index;
}

Status ParseDeviceOption(std::string_view text, ServerOptions& options) {
  constexpr std::string_view kCuda = "cuda:";
  if (text == "cuda:all") {
    options.source.device = Device::Cuda(0);  // resolved by RingDevices at start
    options.gpus.clear();
    options.all_gpus = true;
    return Status::Ok();
  }
  if (!text.starts_with(kCuda) || text.find(',') == std::string_view::npos) {
    BATCHCAST_ASSIGN_OR_RETURN(Device d, ParseDevice(text));
    options.source.device = d;
    options.gpus.clear();
    options.all_gpus = false;
    return Status::Ok();
  }
  std::vector<int> gpus;
  std::string_view rest = text.substr(kCuda.size());
  while (true) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    if (item.starts_with(kCuda)) item.remove_prefix(kCuda.size());  // cuda:0,cuda:1
    Result<Device> d = ParseDevice(std::string(kCuda) + std::string(item));
    if (!d.ok()) {
      return InvalidArgumentError("'" + std::string(text) +
                                  "' is not a list of GPUs (cuda:0,1,... or cuda:all)");
    }
    if (std::find(gpus.begin(), gpus.end(), d->index) != gpus.end()) {
      return InvalidArgumentError("'" + std::string(text) +
                                  "' names cuda:" + std::to_string(d->index) + " twice");
    }
    gpus.push_back(d->index);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (gpus.size() > kMaxGpus) {
    return InvalidArgumentError("at most " + std::to_string(kMaxGpus) + " GPUs");
  }
  options.source.device = Device::Cuda(gpus.front());
  options.gpus = std::move(gpus);
  options.all_gpus = false;
  return Status::Ok();
}

std::string DeviceOptionName(const ServerOptions& options) {
  if (options.all_gpus) return "cuda:all";
  if (options.gpus.size() <= 1) return DeviceName(options.source.device);
  std::string out = "cuda:";
  for (size_t i = 0; i < options.gpus.size(); ++i) {
    out += (i ? "," : "") + std::to_string(options.gpus[i]);
  }
  return out;
}

Result<std::vector<int>> RingDevices(const ServerOptions& options, const Result<int>& visible) {
  if (options.all_gpus) {
    if (!visible.ok() || *visible <= 0) {
      return InvalidArgumentError(
          "--device cuda:all: no GPU is visible (" +
          (visible.ok() ? std::string("0 CUDA devices") : visible.status().message()) +
          "); use --device cpu");
    }
    std::vector<int> all(static_cast<size_t>(std::min<int>(*visible, kMaxGpus)));
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    return all;
  }
  if (options.gpus.size() > 1) return options.gpus;
  if (options.source.device.is_cuda()) return std::vector<int>{options.source.device.index};
  return std::vector<int>(std::max<uint32_t>(1, options.host_rings), -1);
}

Result<size_t> RingForConsumer(std::string_view device, std::span<const int> ring_devices) {
  if (device.empty()) return size_t{0};
  if (const std::optional<size_t> host = HostRingIndex(device)) {
    // "cpu:N": host ring N of a server with several (ServerOptions::host_rings).
    if (*host < ring_devices.size() && ring_devices[*host] < 0) return *host;
    return InvalidArgumentError("the consumer's device '" + std::string(device) +
                                "' names a host ring this server does not have");
  }
  Result<Device> d = ParseDevice(device);
  if (!d.ok()) {
    return InvalidArgumentError("the consumer's device '" + std::string(device) +
                                "' is not cpu or cuda:N");
  }
  if (!d->is_cuda()) return size_t{0};
  const auto it = std::find(ring_devices.begin(), ring_devices.end(), d->index);
  return it == ring_devices.end() ? size_t{0} : static_cast<size_t>(it - ring_devices.begin());
}

}  // namespace batchcast
