// The EOI probe of the GPU image source's header scan: whether a JPEG file
// ends with its EOI marker (FF D9). A file without one (truncated) is not
// given to nvJPEG but to the CPU decoder, which reports it (hardware decoders
// do not always); see cuda_image_source.h, "Decoding".
//
// Thread-safety: stateless; the scan calls it on several threads at once.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace batchcast {

// True when an EOI marker (FF D9) is among the last 32 bytes of `bytes`
// (encoders may pad after it).
bool EndsWithEoi(std::span<const uint8_t> bytes);

// The same for the file at `path`; `bytes` are its first bytes, all of them
// when `whole` (a sample in a tar shard always). Otherwise the file's last
// bytes are read; a file that cannot be read has none.
bool EndsWithEoi(const std::string& path, std::span<const uint8_t> bytes, bool whole);

}  // namespace batchcast
