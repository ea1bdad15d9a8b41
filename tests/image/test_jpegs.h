// Test helpers: synthetic images and JPEG encoders (TurboJPEG tjCompress2 for
// RGB/gray, the libjpeg API for CMYK/YCCK).
#pragma once

// clang-format off
#include <cstdio>
#include <jpeglib.h>
// clang-format on
#include <turbojpeg.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace batchcast::image::testing {

// Interleaved 8-bit image.
struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;
  uint8_t& at(int x, int y, int c) {
    return pixels[(static_cast<size_t>(y) * width + x) * channels + c];
  }
  uint8_t at(int x, int y, int c) const {
    return pixels[(static_cast<size_t>(y) * width + x) * channels + c];
  }
};

// Smooth RGB: horizontal red ramp, vertical green ramp, slow blue wave.
inline Image SmoothRgb(int width, int height) {
  Image img{width, height, 3, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      img.at(x, y, 0) = static_cast<uint8_t>(20 + 215 * x / std::max(1, width - 1));
      img.at(x, y, 1) = static_cast<uint8_t>(230 - 200 * y / std::max(1, height - 1));
      img.at(x, y, 2) =
          static_cast<uint8_t>(128 + 60 * std::sin(3.0 * x / width + 2.0 * y / height));
    }
  }
  return img;
}

inline Image SmoothGray(int width, int height) {
  Image img{width, height, 1, std::vector<uint8_t>(static_cast<size_t>(width) * height)};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      img.at(x, y, 0) = static_cast<uint8_t>(30 + 100 * x / width + 90 * y / height);
    }
  }
  return img;
}

// Smooth image with some texture and noise (more entropy-coded data).
inline Image TexturedRgb(int width, int height, uint32_t seed) {
  Image img = SmoothRgb(width, height);
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 6.0f);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        const float stripes = ((x / 7 + y / 5 + c) % 3 == 0) ? 25.0f : 0.0f;
        const float v = img.at(x, y, c) + stripes + noise(rng);
        img.at(x, y, c) = static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
      }
    }
  }
  return img;
}

// Encodes RGB (channels 3) or gray (channels 1) with tjCompress2. subsamp is a
// TJSAMP_* value (ignored for gray).
inline std::vector<uint8_t> EncodeJpeg(const Image& img, int quality = 95, int subsamp = TJSAMP_420,
                                       bool progressive = false) {
  tjhandle handle = tjInitCompress();
  if (handle == nullptr) throw std::runtime_error("tjInitCompress failed");
  unsigned char* buf = nullptr;
  unsigned long size = 0;  // NOLINT(runtime/int)
  const int format = img.channels == 1 ? TJPF_GRAY : TJPF_RGB;
  const int samp = img.channels == 1 ? TJSAMP_GRAY : subsamp;
  const int flags = progressive ? TJFLAG_PROGRESSIVE : 0;
  const int rc = tjCompress2(handle, img.pixels.data(), img.width, 0, img.height, format, &buf,
                             &size, samp, quality, flags);
  if (rc != 0) {
    std::string msg = tjGetErrorStr2(handle);
    tjDestroy(handle);
    throw std::runtime_error("tjCompress2: " + msg);
  }
  std::vector<uint8_t> out(buf, buf + size);
  tjFree(buf);
  tjDestroy(handle);
  return out;
}

// Encodes `height` rows of `width` x `components` samples in colour space
// `in_space` with the libjpeg API: `configure(cinfo)` runs after
// jpeg_set_defaults, `row(y)` points at the samples of row y.
template <typename Configure, typename Row>
std::vector<uint8_t> EncodeWithLibjpeg(int width, int height, int components,
                                       J_COLOR_SPACE in_space, Configure configure, Row row) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&cinfo);
  unsigned char* buf = nullptr;
  unsigned long size = 0;  // NOLINT(runtime/int)
  jpeg_mem_dest(&cinfo, &buf, &size);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = components;
  cinfo.in_color_space = in_space;
  jpeg_set_defaults(&cinfo);
  configure(cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW r = const_cast<JSAMPROW>(row(cinfo.next_scanline));
    jpeg_write_scanlines(&cinfo, &r, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::vector<uint8_t> out(buf, buf + size);
  std::free(buf);
  return out;
}

// Encodes `components`-channel data as a JPEG of unknown colour space.
inline std::vector<uint8_t> EncodeUnknownJpeg(int width, int height, int components) {
  const std::vector<uint8_t> row(static_cast<size_t>(width) * components, 77);
  return EncodeWithLibjpeg(
      width, height, components, JCS_UNKNOWN, [](jpeg_compress_struct&) {},
      [&](JDIMENSION) { return row.data(); });
}

// Encodes 4-channel data (as stored in the file: for Adobe-convention files
// that is inverted CMYK) with the libjpeg API; ycck stores it as YCCK.
inline std::vector<uint8_t> EncodeCmykJpeg(const Image& stored, bool ycck, int quality = 100) {
  return EncodeWithLibjpeg(
      stored.width, stored.height, 4, JCS_CMYK,
      [&](jpeg_compress_struct& cinfo) {
        jpeg_set_colorspace(&cinfo, ycck ? JCS_YCCK : JCS_CMYK);  // writes an Adobe marker
        jpeg_set_quality(&cinfo, quality, TRUE);
      },
      [&](JDIMENSION y) {
        return stored.pixels.data() + static_cast<size_t>(y) * stored.width * 4;
      });
}

// The first bytes of a PNG file: its signature and the length of its IHDR.
inline std::vector<uint8_t> PngStart() {
  return {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
}

// `n` bytes from std::mt19937(seed), the first one 0x12 (no JPEG signature).
inline std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  out[0] = 0x12;
  return out;
}

// `jpeg` with 1 to 8 random bytes overwritten, then cut at a random length
// when `truncate`.
inline std::vector<uint8_t> Corrupt(const std::vector<uint8_t>& jpeg, std::mt19937& rng,
                                    bool truncate) {
  std::vector<uint8_t> bad = jpeg;
  const int flips = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < flips; ++i) bad[rng() % bad.size()] = static_cast<uint8_t>(rng());
  if (truncate) bad.resize(rng() % bad.size());
  return bad;
}

// Rewrites the dimensions in the SOF marker of a JPEG. Returns false if none.
inline bool PatchSofDimensions(std::vector<uint8_t>& jpeg, uint16_t width, uint16_t height) {
  for (size_t i = 2; i + 9 < jpeg.size();) {
    if (jpeg[i] != 0xFF) return false;
    const uint8_t marker = jpeg[i + 1];
    const size_t length = (static_cast<size_t>(jpeg[i + 2]) << 8) | jpeg[i + 3];
    if (marker >= 0xC0 && marker <= 0xC2) {
      jpeg[i + 5] = static_cast<uint8_t>(height >> 8);
      jpeg[i + 6] = static_cast<uint8_t>(height & 0xFF);
      jpeg[i + 7] = static_cast<uint8_t>(width >> 8);
      jpeg[i + 8] = static_cast<uint8_t>(width & 0xFF);
      return true;
    }
    i += 2 + length;
  }
  return false;
}

}  // namespace batchcast::image::testing
