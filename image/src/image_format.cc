#include "batchcast/image/image_format.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>
#include <string>

#include "batchcast/image/jpeg.h"
#include "byte_reader.h"
#include "format_decoders.h"

namespace batchcast::image {
namespace {

bool StartsWith(std::span<const uint8_t> b, std::string_view magic, size_t offset = 0) {
  return b.size() >= offset + magic.size() &&
         std::memcmp(b.data() + offset, magic.data(), magic.size()) == 0;
}

Status Corrupt(ImageFormat format, const std::string& why) {
  return DataLossError("corrupt " + std::string(ImageFormatTitle(format)) + " header: " + why);
}

Status Refused(ImageFormat format, const std::string& what) {
  return DataLossError(std::string(ImageFormatTitle(format)) + " " + what +
                       ": not a variant batchcast decodes");
}

// PNG: the signature, then the IHDR chunk (length 13).
Result<ImageHeader> ReadPng(std::span<const uint8_t> b) {
  constexpr ImageFormat kF = ImageFormat::kPng;
  if (b.size() < 33) return Corrupt(kF, "shorter than its IHDR chunk");
  if (ReadBe32(b, 8) != 13 || !StartsWith(b, "IHDR", 12)) return Corrupt(kF, "no IHDR chunk");
  const uint32_t w = ReadBe32(b, 16), h = ReadBe32(b, 20);
  const int depth = b[24], color = b[25];
  ImageHeader hdr{kF, static_cast<int>(w), static_cast<int>(h), 0, depth};
  if (w == 0 || h == 0 || w > INT32_MAX || h > INT32_MAX) return Corrupt(kF, "bad size");
  const bool any_depth = depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
  bool ok = false;
  switch (color) {
    case 0:  // gray
      hdr.channels = 1;
      ok = any_depth;
      break;
    case 2:  // RGB
      hdr.channels = 3;
      ok = depth == 8 || depth == 16;
      break;
    case 3:  // palette
      hdr.channels = 3;
      ok = depth <= 8 && any_depth;
      break;
    case 4:  // gray + alpha
      hdr.channels = 2;
      ok = depth == 8 || depth == 16;
      break;
    case 6:  // RGBA
      hdr.channels = 4;
      ok = depth == 8 || depth == 16;
      break;
  }
  if (!ok) {
    return Corrupt(
        kF, "colour type " + std::to_string(color) + " with bit depth " + std::to_string(depth));
  }
  return hdr;
}

// WebP: RIFF "WEBP", then a VP8 (lossy), VP8L (lossless) or VP8X (extended)
// chunk.
Result<ImageHeader> ReadWebp(std::span<const uint8_t> b) {
  constexpr ImageFormat kF = ImageFormat::kWebp;
  if (b.size() < 30) return Corrupt(kF, "shorter than its first chunk's header");
  ImageHeader hdr{kF, 0, 0, 3, 8};
  if (StartsWith(b, "VP8 ", 12)) {
    // Frame tag (3 bytes), start code 9d 01 2a, 14-bit width and height.
    if (b[23] != 0x9d || b[24] != 0x01 || b[25] != 0x2a) return Corrupt(kF, "no VP8 start code");
    hdr.width = ReadLe16(b, 26) & 0x3fff;
    hdr.height = ReadLe16(b, 28) & 0x3fff;
  } else if (StartsWith(b, "VP8L", 12)) {
    // Signature 0x2f, then width - 1 and height - 1 in 14 bits each, alpha.
    if (b[20] != 0x2f) return Corrupt(kF, "no VP8L signature");
    const uint32_t bits = ReadLe32(b, 21);
    hdr.width = static_cast<int>(bits & 0x3fff) + 1;
    hdr.height = static_cast<int>((bits >> 14) & 0x3fff) + 1;
    hdr.channels = (bits >> 28) & 1 ? 4 : 3;
  } else if (StartsWith(b, "VP8X", 12)) {
    // Flags (animation 0x02, alpha 0x10), 3 reserved bytes, canvas width - 1
    // and height - 1 in 24 bits each.
    const uint8_t flags = b[20];
    if (flags & 0x02) return Refused(kF, "animation");
    hdr.width = static_cast<int>(ReadLe24(b, 24)) + 1;
    hdr.height = static_cast<int>(ReadLe24(b, 27)) + 1;
    hdr.channels = flags & 0x10 ? 4 : 3;
  } else {
    return Corrupt(kF, "no VP8, VP8L or VP8X chunk");
  }
  if (hdr.width == 0 || hdr.height == 0) return Corrupt(kF, "bad size");
  return hdr;
}

// BMP: the file header (14 bytes), then an OS/2 core header (12 bytes) or a
// Windows info header (40 bytes or more).
Result<ImageHeader> ReadBmp(std::span<const uint8_t> b) {
  constexpr ImageFormat kF = ImageFormat::kBmp;
  if (b.size() < 26) return Corrupt(kF, "shorter than its headers");
  const uint32_t info_size = ReadLe32(b, 14);
  int64_t w = 0, h = 0;
  int bpp = 0;
  uint32_t compression = 0;
  if (info_size == 12) {
    w = ReadLe16(b, 18);
    h = ReadLe16(b, 20);
    bpp = ReadLe16(b, 24);
  } else if (info_size >= 40 && b.size() >= 14 + 40) {
    w = static_cast<int32_t>(ReadLe32(b, 18));
    h = static_cast<int32_t>(ReadLe32(b, 22));
    bpp = ReadLe16(b, 28);
    compression = ReadLe32(b, 30);
  } else {
    return Corrupt(kF, "info header of " + std::to_string(info_size) + " bytes");
  }
  if (h < 0) h = -h;  // top-down rows
  if (w <= 0 || h <= 0 || w > INT32_MAX || h > INT32_MAX) return Corrupt(kF, "bad size");
  ImageHeader hdr{kF, static_cast<int>(w), static_cast<int>(h), bpp == 32 ? 4 : 3, bpp};
  constexpr uint32_t kRgb = 0, kBitFields = 3, kAlphaBitFields = 6;
  const bool palette = bpp == 1 || bpp == 4 || bpp == 8;
  const bool ok = (compression == kRgb && (palette || bpp == 16 || bpp == 24 || bpp == 32)) ||
                  ((compression == kBitFields || compression == kAlphaBitFields) &&
                   (bpp == 16 || bpp == 32) && info_size >= 40);
  if (!ok) {
    return Refused(kF, "with " + std::to_string(bpp) + " bits per pixel and compression " +
                           std::to_string(compression));
  }
  return hdr;
}

// TIFF: byte order, 42, the first IFD's offset; its ImageWidth (256),
// ImageLength (257), BitsPerSample (258) and SamplesPerPixel (277) entries.
Result<ImageHeader> ReadTiff(std::span<const uint8_t> b) {
  constexpr ImageFormat kF = ImageFormat::kTiff;
  const bool le = b[0] == 'I';
  auto u16 = [&](size_t at) { return le ? ReadLe16(b, at) : ReadBe16(b, at); };
  auto u32 = [&](size_t at) { return le ? ReadLe32(b, at) : ReadBe32(b, at); };
  if (b.size() < 8) return Corrupt(kF, "shorter than its header");
  const uint64_t ifd = u32(4);
  if (ifd < 8) return Corrupt(kF, "first directory at offset " + std::to_string(ifd));
  if (ifd + 2 > b.size()) return OutOfRangeError("TIFF directory beyond the bytes read");
  const uint32_t entries = u16(ifd);
  if (ifd + 2 + 12ull * entries > b.size()) {
    return OutOfRangeError("TIFF directory beyond the bytes read");
  }
  ImageHeader hdr{kF, 0, 0, 1, 1};
  for (uint32_t k = 0; k < entries; ++k) {
    const size_t e = ifd + 2 + 12 * k;
    const uint16_t tag = u16(e), type = u16(e + 2);
    const uint32_t count = u32(e + 4);
    // A SHORT (3) or LONG (4) value stored in the entry itself.
    if (count != 1 && tag != 258) continue;
    const uint32_t value = type == 3 ? u16(e + 8) : type == 4 ? u32(e + 8) : 0;
    if (tag == 256) hdr.width = static_cast<int>(std::min<uint32_t>(value, INT32_MAX));
    if (tag == 257) hdr.height = static_cast<int>(std::min<uint32_t>(value, INT32_MAX));
    if (tag == 258 && type == 3) hdr.bit_depth = count <= 2 ? u16(e + 8) : 0;  // else at an offset
    if (tag == 277) hdr.channels = static_cast<int>(value);
  }
  if (hdr.width <= 0 || hdr.height <= 0) return Corrupt(kF, "no image width or length");
  return hdr;
}

}  // namespace

// PNM: "P5" (gray) or "P6" (RGB), then width, height and maxval in ASCII,
// separated by whitespace and comments, then one whitespace byte.
Result<ImageHeader> ReadPnmHeader(std::span<const uint8_t> b, size_t* data_offset, int* maxval) {
  constexpr ImageFormat kF = ImageFormat::kPnm;
  if (b[1] != '5' && b[1] != '6') {
    return Refused(kF, std::string("P") + static_cast<char>(b[1]) + " (ASCII or bitmap)");
  }
  size_t at = 2;
  uint64_t v[3] = {0, 0, 0};
  for (uint64_t& value : v) {
    for (;;) {  // whitespace and comments
      if (at >= b.size()) return Corrupt(kF, "truncated");
      if (b[at] == '#') {
        while (at < b.size() && b[at] != '\n') ++at;
      } else if (std::isspace(b[at])) {
        ++at;
      } else {
        break;
      }
    }
    if (!std::isdigit(b[at])) return Corrupt(kF, "not a number");
    while (at < b.size() && std::isdigit(b[at])) {
      value = value * 10 + (b[at++] - '0');
      if (value > INT32_MAX) return Corrupt(kF, "number too large");
    }
  }
  if (at >= b.size() || !std::isspace(b[at])) return Corrupt(kF, "truncated");
  if (v[0] == 0 || v[1] == 0 || v[2] == 0 || v[2] > 65535) return Corrupt(kF, "bad size or maxval");
  *data_offset = at + 1;
  *maxval = static_cast<int>(v[2]);
  return ImageHeader{kF, static_cast<int>(v[0]), static_cast<int>(v[1]), b[1] == '5' ? 1 : 3,
                     v[2] < 256 ? 8 : 16};
}

namespace {

Result<ImageHeader> ReadPnm(std::span<const uint8_t> b) {
  size_t offset = 0;
  int maxval = 0;
  return ReadPnmHeader(b, &offset, &maxval);
}

}  // namespace

std::string_view ImageFormatName(ImageFormat format) {
  constexpr std::string_view kNames[] = {"jpeg", "png", "webp", "bmp",
                                         "tiff", "pnm", "gif",  "unknown"};
  return kNames[static_cast<size_t>(format)];
}

std::string_view ImageFormatTitle(ImageFormat format) {
  constexpr std::string_view kTitles[] = {"JPEG", "PNG", "WebP", "BMP",
                                          "TIFF", "PNM", "GIF",  "unknown"};
  return kTitles[static_cast<size_t>(format)];
}

ImageFormat SniffImageFormat(std::span<const uint8_t> b) {
  if (StartsWith(b, "\xff\xd8\xff")) return ImageFormat::kJpeg;
  if (StartsWith(b, "\x89PNG\r\n\x1a\n")) return ImageFormat::kPng;
  if (StartsWith(b, "RIFF") && StartsWith(b, "WEBP", 8)) return ImageFormat::kWebp;
  if (StartsWith(b, "BM")) return ImageFormat::kBmp;
  if (StartsWith(b, std::string_view("II*\0", 4)) || StartsWith(b, std::string_view("MM\0*", 4))) {
    return ImageFormat::kTiff;
  }
  if (b.size() >= 3 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6' && std::isspace(b[2])) {
    return ImageFormat::kPnm;
  }
  if (StartsWith(b, "GIF87a") || StartsWith(b, "GIF89a")) return ImageFormat::kGif;
  return ImageFormat::kUnknown;
}

Result<ImageHeader> ReadImageHeader(std::span<const uint8_t> bytes, uint64_t max_pixels) {
  const ImageFormat format = SniffImageFormat(bytes);
  // The header parser of each format, by ImageFormat (null: not decoded).
  using Parser = Result<ImageHeader> (*)(std::span<const uint8_t>);
  constexpr Parser kParsers[] = {nullptr,  ReadPng, ReadWebp, ReadBmp,
                                 ReadTiff, ReadPnm, nullptr,  nullptr};
  static_assert(std::size(kParsers) == static_cast<size_t>(ImageFormat::kUnknown) + 1);
  const Parser parse = kParsers[static_cast<size_t>(format)];
  if (parse == nullptr) {
    if (format == ImageFormat::kJpeg) {
      return DataLossError("a JPEG image: read its header with ReadJpegInfo");
    }
    if (format == ImageFormat::kGif) {
      return DataLossError("a GIF image: not a format batchcast decodes");
    }
    return DataLossError(bytes.empty() ? "not an image: the data is empty (0 bytes)"
                                       : "not an image of a format batchcast decodes (JPEG, "
                                         "PNG, WebP, BMP, TIFF, PNM)");
  }
  Result<ImageHeader> hdr = parse(bytes);
  if (!hdr.ok()) return hdr;
  const uint64_t limit = max_pixels == 0 ? kDefaultMaxPixels : max_pixels;
  const uint64_t pixels = static_cast<uint64_t>(hdr->width) * static_cast<uint64_t>(hdr->height);
  if (pixels > limit) {
    return ResourceExhaustedError(std::string(ImageFormatTitle(format)) + " is " +
                                  std::to_string(hdr->width) + "x" + std::to_string(hdr->height) +
                                  " = " + std::to_string(pixels) +
                                  " pixels, more than max_pixels " + std::to_string(limit));
  }
  return hdr;
}

}  // namespace batchcast::image
