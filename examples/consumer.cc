// A C++ training-process stand-in: connects to a batchcast server, reads
// epochs, prints what it got and how fast.
//
//   consumer NAME_OR_ENDPOINT [--batch-size 48] [--epochs 2] [--join immediate|next_epoch]
//
// Built against the installed package (examples/CMakeLists.txt:
// find_package(batchcast) + batchcast::client).
#include <batchcast/client/consumer.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(
        stderr,
        "usage: %s NAME_OR_ENDPOINT [--batch-size N] [--epochs N] [--join immediate|next_epoch]\n",
        argv[0]);
    return 2;
  }
  batchcast::ConsumerOptions options;
  options.endpoint = argv[1];
  options.batch_size = 48;
  int epochs = 2;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--batch-size"))
      options.batch_size = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--epochs"))
      epochs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--join"))
      options.join = std::string(argv[i + 1]) == "next_epoch" ? batchcast::JoinPolicy::kNextEpoch
                                                              : batchcast::JoinPolicy::kImmediate;
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  auto consumer = batchcast::Consumer::Connect(options);
  if (!consumer.ok()) {
    std::fprintf(stderr, "consumer: %s\n", consumer.status().ToString().c_str());
    return 1;
  }
  std::printf("[consumer b=%u] connected: %llu batches per epoch\n", options.batch_size,
              static_cast<unsigned long long>((*consumer)->batches_per_epoch()));
  for (int epoch = 0; epoch < epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    size_t batches = 0, samples = 0, zero_copy = 0;
    double checksum = 0;
    while (true) {
      auto batch = (*consumer)->Next();
      if (!batch.ok()) {
        std::fprintf(stderr, "[consumer b=%u] %s\n", options.batch_size,
                     batch.status().ToString().c_str());
        return 1;
      }
      if (batch->end_of_epoch()) break;
      auto image = batch->field("image");
      if (!image.ok()) return 1;
      // Touch the data as a training step would (first byte of each sample).
      const auto* bytes = static_cast<const unsigned char*>(image->data);
      for (size_t i = 0; i < batch->size(); ++i)
        checksum += bytes[i * (image->bytes / batch->size())];
      ++batches;
      samples += batch->size();
      zero_copy += batch->zero_copy();
      if (batches == 1) {
        std::string shape;
        for (int64_t d : image->shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
        std::printf("[consumer b=%u] epoch %d: first batch image %s %s, indices %lld..\n",
                    options.batch_size, epoch, shape.c_str(),
                    std::string(batchcast::DTypeName(image->dtype)).c_str(),
                    static_cast<long long>(batch->indices()[0]));
      }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "[consumer b=%u] epoch %d: %zu batches, %zu samples, %.0f samples/s, %zu zero-copy, "
        "checksum %.0f\n",
        options.batch_size, epoch, batches, samples, samples / s, zero_copy, checksum);
  }
  return 0;
}
