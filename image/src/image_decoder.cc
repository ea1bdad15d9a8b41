#include "batchcast/image/image_decoder.h"

#include "format_decoders.h"

namespace batchcast::image {

Result<DecodedImage> ImageDecoder::Decode(std::span<const uint8_t> bytes, uint64_t max_pixels,
                                          bool gray_as_rgb) {
  BATCHCAST_ASSIGN_OR_RETURN(const ImageHeader hdr, ReadImageHeader(bytes, max_pixels));
  int channels = 0;
  Status decoded;
  switch (hdr.format) {
    case ImageFormat::kPng:
      decoded = DecodePng(bytes, hdr, pixels_, &channels);
      break;
    case ImageFormat::kWebp:
      decoded = DecodeWebp(bytes, hdr, pixels_, &channels);
      break;
    case ImageFormat::kTiff:
      decoded = DecodeTiff(bytes, hdr, pixels_, scratch_, &channels);
      break;
    case ImageFormat::kBmp:
      decoded = DecodeBmp(bytes, hdr, pixels_, &channels);
      break;
    case ImageFormat::kPnm:
      decoded = DecodePnm(bytes, hdr, pixels_, &channels);
      break;
    default:  // ReadImageHeader takes no other format
      return InternalError("no decoder for " + std::string(ImageFormatTitle(hdr.format)));
  }
  BATCHCAST_RETURN_IF_ERROR(decoded);
  const size_t pixels = static_cast<size_t>(hdr.width) * static_cast<size_t>(hdr.height);
  const uint8_t* data = pixels_.data();
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
