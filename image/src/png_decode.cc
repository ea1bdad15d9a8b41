// DecodePng (format_decoders.h): libpng, reading from memory. libpng reports
// errors by calling an error function that must not return: PngFail
// longjmps back into DecodePng with the message, so the function holds only
// trivially destructible locals between setjmp and the jump (its buffers are
// the caller's).
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

#include "format_decoders.h"

namespace batchcast::image {
namespace {

struct PngInput {
  const uint8_t* data;
  size_t size;
  size_t at;
};

struct PngFailure {
  std::jmp_buf jump;
  char message[256];
};

[[noreturn]] void PngFail(png_structp png, png_const_charp message) {
  auto* failure = static_cast<PngFailure*>(png_get_error_ptr(png));
  std::snprintf(failure->message, sizeof(failure->message), "%s", message);
  std::longjmp(failure->jump, 1);
}

void PngIgnoreWarning(png_structp, png_const_charp) {}

void PngRead(png_structp png, png_bytep out, size_t n) {
  auto* in = static_cast<PngInput*>(png_get_io_ptr(png));
  if (n > in->size - in->at) png_error(png, "truncated: the data ends before the image does");
  std::memcpy(out, in->data + in->at, n);
  in->at += n;
}

}  // namespace

Status DecodePng(std::span<const uint8_t> bytes, const ImageHeader& hdr, DecodeBuffers& buffers,
                 int* channels) {
  std::vector<uint8_t>& out = buffers.pixels;
  PngFailure failure{};
  PngInput in{bytes.data(), bytes.size(), 0};
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &failure, PngFail, PngIgnoreWarning);
  if (png == nullptr) return ResourceExhaustedError("libpng: out of memory");
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return ResourceExhaustedError("libpng: out of memory");
  }
  if (setjmp(failure.jump) != 0) {
    png_destroy_read_struct(&png, &info, nullptr);
    return DataLossError(std::string("corrupt PNG: ") + failure.message);
  }
  png_set_read_fn(png, &in, PngRead);
  // --max-pixels bounds the size (ReadImageHeader), not libpng's defaults.
  png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
  png_read_info(png, info);
  if (png_get_image_width(png, info) != static_cast<png_uint_32>(hdr.width) ||
      png_get_image_height(png, info) != static_cast<png_uint_32>(hdr.height)) {
    png_error(png, "the image's size differs from its header's");
  }
  const int color = png_get_color_type(png, info);
  // As PIL's convert("RGB"): 16-bit samples keep their high byte, palettes are
  // expanded (their transparency ignored), alpha is dropped.
  if (png_get_bit_depth(png, info) == 16) png_set_strip_16(png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if ((color & PNG_COLOR_MASK_COLOR) == 0) png_set_expand_gray_1_2_4_to_8(png);
  // (palette_to_rgb turns a tRNS chunk into alpha: dropped too)
  if ((color & PNG_COLOR_MASK_ALPHA) != 0 || png_get_valid(png, info, PNG_INFO_tRNS) != 0) {
    png_set_strip_alpha(png);
  }
  const int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int n = png_get_channels(png, info);
  const size_t row = png_get_rowbytes(png, info);
  if ((n != 1 && n != 3) || row != static_cast<size_t>(hdr.width) * n) {
    png_error(png, "unexpected layout after the transformations");
  }
  out.resize(row * static_cast<size_t>(hdr.height));
  // Every pass into the same rows: the last leaves the full image.
  for (int pass = 0; pass < passes; ++pass) {
    for (int y = 0; y < hdr.height; ++y) png_read_row(png, out.data() + row * y, nullptr);
  }
  png_read_end(png, nullptr);  // the rest of the file, to its IEND chunk
  png_destroy_read_struct(&png, &info, nullptr);
  *channels = n;
  return Status::Ok();
}

}  // namespace batchcast::image
