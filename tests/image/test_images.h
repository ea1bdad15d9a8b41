// Test helpers: encoders of the formats other than JPEG (Note [Image
// formats], batchcast/image/image_format.h): PNG (libpng), WebP (libwebp),
// TIFF (libtiff, through a temporary file), BMP and PNM (written here).
#pragma once

#include <png.h>
#include <tiffio.h>
#include <unistd.h>
#include <webp/encode.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_jpegs.h"

namespace batchcast::image::testing {

// Samples of a PNG: `channels` per pixel (gray 1, gray + alpha 2, RGB 3,
// RGBA 4; a palette image 1 index), each of `depth` bits (1, 2, 4, 8 or 16).
struct PngSpec {
  int width = 0;
  int height = 0;
  int color_type = PNG_COLOR_TYPE_RGB;
  int depth = 8;
  std::vector<uint16_t> samples;   // row-major, channels per pixel
  std::vector<png_color> palette;  // PNG_COLOR_TYPE_PALETTE
  std::vector<uint8_t> trns;       // palette transparency (optional)
  bool interlaced = false;
};

inline std::vector<uint8_t> EncodePng(const PngSpec& s) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  std::vector<uint8_t> out;
  if (setjmp(png_jmpbuf(png))) throw std::runtime_error("libpng failed to encode");
  png_set_write_fn(
      png, &out,
      [](png_structp p, png_bytep data, size_t n) {
        auto* o = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(p));
        o->insert(o->end(), data, data + n);
      },
      nullptr);
  png_set_IHDR(png, info, s.width, s.height, s.depth, s.color_type,
               s.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!s.palette.empty()) png_set_PLTE(png, info, s.palette.data(), int(s.palette.size()));
  if (!s.trns.empty()) png_set_tRNS(png, info, s.trns.data(), int(s.trns.size()), nullptr);
  png_write_info(png, info);
  const int channels = s.color_type == PNG_COLOR_TYPE_RGB          ? 3
                       : s.color_type == PNG_COLOR_TYPE_RGBA       ? 4
                       : s.color_type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                                                                   : 1;
  const size_t per_row = size_t(s.width) * channels;
  std::vector<std::vector<uint8_t>> rows(s.height);
  std::vector<png_bytep> pointers(s.height);
  for (int y = 0; y < s.height; ++y) {
    std::vector<uint8_t>& row = rows[y];
    row.assign((per_row * s.depth + 7) / 8, 0);
    for (size_t k = 0; k < per_row; ++k) {
      const uint16_t v = s.samples[per_row * y + k];
      if (s.depth == 16) {
        row[2 * k] = uint8_t(v >> 8);
        row[2 * k + 1] = uint8_t(v);
      } else {
        const size_t bit = k * s.depth;
        row[bit / 8] |= uint8_t(v << (8 - s.depth - bit % 8));
      }
    }
    pointers[y] = row.data();
  }
  png_write_image(png, pointers.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

// An 8-bit image as a PNG of its channels (1 gray, 2 gray + alpha, 3 RGB, 4 RGBA).
inline std::vector<uint8_t> EncodePng(const Image& img, bool interlaced = false) {
  PngSpec s{img.width, img.height, 0,         8, {img.pixels.begin(), img.pixels.end()},
            {},        {},         interlaced};
  s.color_type = img.channels == 1   ? PNG_COLOR_TYPE_GRAY
                 : img.channels == 2 ? PNG_COLOR_TYPE_GRAY_ALPHA
                 : img.channels == 3 ? PNG_COLOR_TYPE_RGB
                                     : PNG_COLOR_TYPE_RGBA;
  return EncodePng(s);
}

// Lossless (exact pixels) or lossy WebP of an RGB or RGBA image.
inline std::vector<uint8_t> EncodeWebp(const Image& img, bool lossless, float quality = 90) {
  uint8_t* data = nullptr;
  const int stride = img.width * img.channels;
  size_t n = 0;
  if (img.channels == 4) {
    n = lossless ? WebPEncodeLosslessRGBA(img.pixels.data(), img.width, img.height, stride, &data)
                 : WebPEncodeRGBA(img.pixels.data(), img.width, img.height, stride, quality, &data);
  } else {
    n = lossless ? WebPEncodeLosslessRGB(img.pixels.data(), img.width, img.height, stride, &data)
                 : WebPEncodeRGB(img.pixels.data(), img.width, img.height, stride, quality, &data);
  }
  if (n == 0) throw std::runtime_error("libwebp failed to encode");
  std::vector<uint8_t> out(data, data + n);
  WebPFree(data);
  return out;
}

// An 8-bit (or 16-bit: samples16) TIFF of 1 (gray) or 3 (RGB) channels.
inline std::vector<uint8_t> EncodeTiff(const Image& img, uint16_t compression = COMPRESSION_NONE,
                                       const std::vector<uint16_t>* samples16 = nullptr) {
  char path[] = "/tmp/bc_tiff_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) throw std::runtime_error("mkstemp");
  close(fd);
  TIFF* tif = TIFFOpen(path, "w");
  TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, uint32_t(img.width));
  TIFFSetField(tif, TIFFTAG_IMAGELENGTH, uint32_t(img.height));
  TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, uint16_t(img.channels));
  TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, uint16_t(samples16 ? 16 : 8));
  TIFFSetField(tif, TIFFTAG_PHOTOMETRIC,
               img.channels == 1 ? PHOTOMETRIC_MINISBLACK : PHOTOMETRIC_RGB);
  TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  TIFFSetField(tif, TIFFTAG_COMPRESSION, compression);
  TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, uint32_t(8));
  const size_t row = size_t(img.width) * img.channels;
  for (int y = 0; y < img.height; ++y) {
    void* line =
        samples16 ? (void*)(samples16->data() + row * y) : (void*)(img.pixels.data() + row * y);
    if (TIFFWriteScanline(tif, line, y, 0) < 0) throw std::runtime_error("libtiff failed");
  }
  TIFFClose(tif);
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> out{std::istreambuf_iterator<char>(f), {}};
  std::remove(path);
  return out;
}

inline void PutLe(std::vector<uint8_t>& b, uint32_t v, int bytes) {
  for (int k = 0; k < bytes; ++k) b.push_back(uint8_t(v >> (8 * k)));
}

// A BMP (BITMAPINFOHEADER) of `bpp` 24 or 32 (BI_RGB, BGRX) from RGB, or 8
// (a palette of gray levels 0..255: the image's first channel), bottom-up
// unless top_down.
inline std::vector<uint8_t> EncodeBmp(const Image& img, int bpp, bool top_down = false) {
  const uint32_t stride = (uint32_t(img.width) * bpp + 31) / 32 * 4;
  const uint32_t palette = bpp == 8 ? 256 * 4 : 0;
  const uint32_t offset = 14 + 40 + palette;
  std::vector<uint8_t> b = {'B', 'M'};
  PutLe(b, offset + stride * img.height, 4);
  PutLe(b, 0, 4);
  PutLe(b, offset, 4);
  PutLe(b, 40, 4);
  PutLe(b, uint32_t(img.width), 4);
  PutLe(b, top_down ? uint32_t(-img.height) : uint32_t(img.height), 4);
  PutLe(b, 1, 2);
  PutLe(b, uint32_t(bpp), 2);
  for (int k = 0; k < 6; ++k) PutLe(b, 0, 4);  // BI_RGB, sizes, resolution, colours
  for (uint32_t k = 0; k < palette / 4; ++k) PutLe(b, k | k << 8 | k << 16, 4);
  for (int r = 0; r < img.height; ++r) {
    const int y = top_down ? r : img.height - 1 - r;
    const size_t start = b.size();
    for (int x = 0; x < img.width; ++x) {
      if (bpp == 8) {
        b.push_back(img.at(x, y, 0));
        continue;
      }
      b.push_back(img.at(x, y, 2));
      b.push_back(img.at(x, y, 1));
      b.push_back(img.at(x, y, 0));
      if (bpp == 32) b.push_back(0x7f);  // X, ignored
    }
    b.resize(start + stride, 0);
  }
  return b;
}

// A binary PGM (1 channel) or PPM (3 channels), 8-bit.
inline std::vector<uint8_t> EncodePnm(const Image& img) {
  const std::string head = std::string(img.channels == 1 ? "P5" : "P6") + "\n# batchcast\n" +
                           std::to_string(img.width) + " " + std::to_string(img.height) + "\n255\n";
  std::vector<uint8_t> b(head.begin(), head.end());
  b.insert(b.end(), img.pixels.begin(), img.pixels.end());
  return b;
}

}  // namespace batchcast::image::testing
