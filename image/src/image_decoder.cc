#include "batchcast/image/image_decoder.h"

#include <iterator>

#include "batchcast/core/check.h"
#include "format_decoders.h"

namespace batchcast::image {

ImageDecoder::ImageDecoder() = default;
ImageDecoder::~ImageDecoder() = default;
ImageDecoder::ImageDecoder(ImageDecoder&&) noexcept = default;
ImageDecoder& ImageDecoder::operator=(ImageDecoder&&) noexcept = default;

Result<DecodedImage> ImageDecoder::Decode(std::span<const uint8_t> bytes, uint64_t max_pixels,
                                          bool gray_as_rgb) {
  BATCHCAST_ASSIGN_OR_RETURN(const ImageHeader hdr, ReadImageHeader(bytes, max_pixels));
  // The decoder of each format, by ImageFormat (null: none; ReadImageHeader
  // accepts only formats that have one).
  using Decoder = Status (*)(std::span<const uint8_t>, const ImageHeader&, DecodeBuffers&, int*);
  constexpr Decoder kDecoders[] = {nullptr,    DecodePng, DecodeWebp, DecodeBmp,
                                   DecodeTiff, DecodePnm, nullptr,    nullptr};
  static_assert(std::size(kDecoders) == static_cast<size_t>(ImageFormat::kUnknown) + 1);
  const Decoder decode = kDecoders[static_cast<size_t>(hdr.format)];
  BATCHCAST_CHECK(decode != nullptr) << ImageFormatTitle(hdr.format);
  if (!buffers_) buffers_ = std::make_unique<DecodeBuffers>();
  int channels = 0;
  const Status decoded = decode(bytes, hdr, *buffers_, &channels);
  BATCHCAST_RETURN_IF_ERROR(decoded);
  const size_t pixels = static_cast<size_t>(hdr.width) * static_cast<size_t>(hdr.height);
  const uint8_t* data = buffers_->pixels.data();
  if (channels == 1 && gray_as_rgb) {
    rgb_.resize(pixels * 3);
    for (size_t i = 0; i < pixels; ++i) rgb_[3 * i] = rgb_[3 * i + 1] = rgb_[3 * i + 2] = data[i];
    data = rgb_.data();
    channels = 3;
  }
  return DecodedImage{data, hdr.width, hdr.height, channels,
                      static_cast<size_t>(hdr.width) * static_cast<size_t>(channels)};
}

}  // namespace batchcast::image
