// DecodeTiff (format_decoders.h): libtiff reading from memory (client
// procedures over the bytes), its first directory through the RGBA interface
// (TIFFReadRGBAImageOriented), which takes every layout libtiff reads. Its
// messages are collected per open file, never printed.
#include <tiffio.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "format_decoders.h"

namespace batchcast::image {
namespace {

struct TiffInput {
  const uint8_t* data;
  uint64_t size;
  uint64_t at;
  char error[256];
};

tmsize_t TiffRead(thandle_t h, void* buf, tmsize_t n) {
  auto* in = static_cast<TiffInput*>(h);
  const uint64_t left = in->at < in->size ? in->size - in->at : 0;
  const uint64_t take = std::min<uint64_t>(left, static_cast<uint64_t>(n));
  std::memcpy(buf, in->data + in->at, take);
  in->at += take;
  return static_cast<tmsize_t>(take);
}

tmsize_t TiffWrite(thandle_t, void*, tmsize_t) { return -1; }

toff_t TiffSeek(thandle_t h, toff_t offset, int whence) {
  auto* in = static_cast<TiffInput*>(h);
  const uint64_t base = whence == SEEK_CUR ? in->at : whence == SEEK_END ? in->size : 0;
  in->at = base + offset;
  return in->at;
}

int TiffClose(thandle_t) { return 0; }
toff_t TiffSize(thandle_t h) { return static_cast<TiffInput*>(h)->size; }

int TiffMap(thandle_t h, void** base, toff_t* size) {
  auto* in = static_cast<TiffInput*>(h);
  *base = const_cast<uint8_t*>(in->data);
  *size = in->size;
  return 1;
}

void TiffUnmap(thandle_t, void*, toff_t) {}

int TiffError(TIFF*, void* user, const char* module, const char* format, va_list args) {
  auto* in = static_cast<TiffInput*>(user);
  if (in->error[0] == '\0') {  // the first error says most
    const int n = std::snprintf(in->error, sizeof(in->error), "%s: ", module ? module : "libtiff");
    std::vsnprintf(in->error + n, sizeof(in->error) - static_cast<size_t>(n), format, args);
  }
  return 1;  // handled: not printed
}

int TiffIgnore(TIFF*, void*, const char*, const char*, va_list) { return 1; }

}  // namespace

Status DecodeTiff(std::span<const uint8_t> bytes, const ImageHeader& hdr, DecodeBuffers& buffers,
                  int* channels) {
  std::vector<uint8_t>& out = buffers.pixels;
  std::vector<uint32_t>& scratch = buffers.rgba;
  TiffInput in{bytes.data(), bytes.size(), 0, {}};
  TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
  if (options == nullptr) return ResourceExhaustedError("libtiff: out of memory");
  TIFFOpenOptionsSetErrorHandlerExtR(options, TiffError, &in);
  TIFFOpenOptionsSetWarningHandlerExtR(options, TiffIgnore, nullptr);
  TIFF* tif = TIFFClientOpenExt("TIFF", "r", &in, TiffRead, TiffWrite, TiffSeek, TiffClose,
                                TiffSize, TiffMap, TiffUnmap, options);
  TIFFOpenOptionsFree(options);
  auto fail = [&](const std::string& what) {
    if (tif != nullptr) TIFFClose(tif);
    return DataLossError("corrupt TIFF: " + what +
                         (in.error[0] ? std::string(" (") + in.error + ")" : std::string()));
  };
  if (tif == nullptr) return fail("libtiff cannot open it");
  uint32_t w = 0, h = 0;
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h);
  if (w != static_cast<uint32_t>(hdr.width) || h != static_cast<uint32_t>(hdr.height)) {
    return fail("the image's size differs from its header's");
  }
  char why[1024] = "";
  if (TIFFRGBAImageOK(tif, why) == 0) {
    TIFFClose(tif);
    return DataLossError(std::string("TIFF ") + why + ": not a variant batchcast decodes");
  }
  const size_t pixels = static_cast<size_t>(w) * h;
  scratch.resize(pixels);
  if (TIFFReadRGBAImageOriented(tif, w, h, scratch.data(), ORIENTATION_TOPLEFT, 1) == 0) {
    return fail("cannot read its pixels");
  }
  TIFFClose(tif);
  out.resize(pixels * 3);
  for (size_t i = 0; i < pixels; ++i) {
    const uint32_t p = scratch[i];
    out[3 * i] = static_cast<uint8_t>(TIFFGetR(p));
    out[3 * i + 1] = static_cast<uint8_t>(TIFFGetG(p));
    out[3 * i + 2] = static_cast<uint8_t>(TIFFGetB(p));
  }
  *channels = 3;
  return Status::Ok();
}

}  // namespace batchcast::image
