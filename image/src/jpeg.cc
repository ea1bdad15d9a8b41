#include "batchcast/image/jpeg.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "batchcast/core/check.h"
#include "libjpeg_util.h"

namespace batchcast::image {
namespace {

// Pillow's MULDIV255: a * b / 255, rounded.
inline int MulDiv255(int a, int b) {
  const int tmp = a * b + 128;
  return ((tmp >> 8) + tmp) >> 8;
}

// Inverted (Adobe) CMYK -> RGB exactly as Pillow: R = nk - MULDIV255(C, nk)
// with C = 255 - stored_c and nk = 255 - K = stored_k.
void InvertedCmykToRgb(const uint8_t* in, uint8_t* out, size_t width) {
  for (size_t x = 0; x < width; ++x, in += 4, out += 3) {
    const int nk = in[3];
    out[0] = static_cast<uint8_t>(nk - MulDiv255(255 - in[0], nk));
    out[1] = static_cast<uint8_t>(nk - MulDiv255(255 - in[1], nk));
    out[2] = static_cast<uint8_t>(nk - MulDiv255(255 - in[2], nk));
  }
}

// True when bytes contain the EOI marker (0xFF 0xD9).
bool ContainsEoi(const uint8_t* p, size_t n) {
  const uint8_t* end = p + n;
  while (p < end) {
    const void* ff = std::memchr(p, 0xFF, static_cast<size_t>(end - p));
    if (ff == nullptr) return false;
    p = static_cast<const uint8_t*>(ff) + 1;
    // Skip fill bytes (0xFF 0xFF ...).
    while (p < end && *p == 0xFF) ++p;
    if (p < end && *p == 0xD9) return true;
  }
  return false;
}

// ---- Functions that call libjpeg under setjmp. Only trivial locals here. ----

// Returns 0 on success, non-zero with err->message set on failure.
int GuardedCreate(jpeg_decompress_struct* cinfo, ErrorManager* err) {
  if (setjmp(err->jump)) return 1;
  jpeg_create_decompress(cinfo);
  return 0;
}

int GuardedReadHeader(jpeg_decompress_struct* cinfo, ErrorManager* err, const uint8_t* data,
                      size_t size) {
  if (setjmp(err->jump)) {
    jpeg_abort_decompress(cinfo);
    return 1;
  }
  jpeg_abort_decompress(cinfo);  // forget any previous image
  cinfo->err->num_warnings = 0;
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));  // NOLINT(runtime/int)
  if (jpeg_read_header(cinfo, TRUE) != JPEG_HEADER_OK) {
    SetMessage(err, "no image in the JPEG stream (tables only)");
    jpeg_abort_decompress(cinfo);
    return 1;
  }
  return 0;
}

struct DecodeArgs {
  int scale_denom;
  PixelRect rect;
  J_COLOR_SPACE out_space;
  bool cmyk;         // decode 4 channels into cmyk_row, convert to RGB rows
  int out_channels;  // channels of `pixels` rows: 1 or 3
  uint8_t* pixels;   // rect.h rows of capacity_width * out_channels bytes
  JDIMENSION capacity_width;
  JSAMPROW* rows;     // rect.h row pointers (filled here)
  uint8_t* cmyk_row;  // capacity_width * 4 bytes when cmyk
  bool allow_crop;
};

struct DecodeOutput {
  JDIMENSION col0;  // column of rect.x inside the decoded rows
  size_t stride;
};

int GuardedDecode(jpeg_decompress_struct* cinfo, ErrorManager* err, const DecodeArgs& a,
                  DecodeOutput* out) {
  if (setjmp(err->jump)) {
    jpeg_abort_decompress(cinfo);
    return 1;
  }
  cinfo->scale_num = 1;
  cinfo->scale_denom = static_cast<unsigned int>(a.scale_denom);
  cinfo->out_color_space = a.out_space;
  cinfo->dct_method = JDCT_ISLOW;  // Pillow's default: same pixels as the reference
  cinfo->do_fancy_upsampling = TRUE;
  cinfo->buffered_image = FALSE;
  cinfo->quantize_colors = FALSE;
  jpeg_start_decompress(cinfo);

  const JDIMENSION x = static_cast<JDIMENSION>(a.rect.x);
  const JDIMENSION y = static_cast<JDIMENSION>(a.rect.y);
  const JDIMENSION end_row = y + static_cast<JDIMENSION>(a.rect.h);
  if (x + static_cast<JDIMENSION>(a.rect.w) > cinfo->output_width ||
      end_row > cinfo->output_height) {
    SetMessage(err, "internal: decode rectangle outside the scaled image");
    jpeg_abort_decompress(cinfo);
    return 3;
  }
  // Columns to decode: the rectangle plus a margin of kCropMargin on each side,
  // because fancy (triangle) chroma upsampling treats the first and last
  // decoded columns as image edges; with the margin, the rectangle's pixels are
  // exactly those of a full decode.
  constexpr JDIMENSION kCropMargin = 2;
  JDIMENSION xoffset = x > kCropMargin ? x - kCropMargin : 0;
  JDIMENSION width =
      std::min(cinfo->output_width, x + static_cast<JDIMENSION>(a.rect.w) + kCropMargin) - xoffset;
  if (!a.allow_crop || width >= cinfo->output_width) {
    xoffset = 0;
    width = cinfo->output_width;
  } else {
    jpeg_crop_scanline(cinfo, &xoffset, &width);  // moves xoffset left to an iMCU boundary
  }
  if (width > a.capacity_width || xoffset > x || x - xoffset + a.rect.w > width) {
    SetMessage(err, "internal: unexpected cropped scanline width");
    jpeg_abort_decompress(cinfo);
    return 3;
  }
  const size_t stride = static_cast<size_t>(width) * static_cast<size_t>(a.out_channels);
  for (int i = 0; i < a.rect.h; ++i) a.rows[i] = a.pixels + static_cast<size_t>(i) * stride;

  if (y > 0 && jpeg_skip_scanlines(cinfo, y) != y) {
    SetMessage(err, "Premature end of JPEG file (while skipping rows)");
    jpeg_abort_decompress(cinfo);
    return 1;
  }
  while (cinfo->output_scanline < end_row) {
    JSAMPROW* dst = a.rows + (cinfo->output_scanline - y);
    JDIMENSION n;
    if (a.cmyk) {
      JSAMPROW row = a.cmyk_row;
      n = jpeg_read_scanlines(cinfo, &row, 1);
      if (n == 1) InvertedCmykToRgb(a.cmyk_row, *dst, width);
    } else {
      n = jpeg_read_scanlines(cinfo, dst, end_row - cinfo->output_scanline);
    }
    if (n == 0) {
      SetMessage(err, "Premature end of JPEG file (decoder made no progress)");
      jpeg_abort_decompress(cinfo);
      return 1;
    }
  }
  if (cinfo->output_scanline < cinfo->output_height) {
    // Stopping early: the rest of the entropy-coded data is not decoded, but a
    // truncated file must still fail, whatever the rectangle. Multi-scan files
    // were read through EOI by jpeg_start_decompress; for a single scan, EOI is
    // the marker the entropy decoder stopped at or lies in the unread tail.
    const bool eoi = jpeg_has_multiple_scans(cinfo) || cinfo->unread_marker == JPEG_EOI ||
                     ContainsEoi(cinfo->src->next_input_byte, cinfo->src->bytes_in_buffer);
    jpeg_abort_decompress(cinfo);
    if (!eoi) {
      SetMessage(err, "Premature end of JPEG file (no EOI marker after the scan data)");
      return 1;
    }
  } else {
    jpeg_finish_decompress(cinfo);  // reads through EOI: truncation warns, and fails
  }
  out->col0 = x - xoffset;
  out->stride = stride;
  return 0;
}

}  // namespace

struct JpegDecoder::Impl {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  bool header_ready = false;
  JpegInfo info;
  std::vector<uint8_t> pixels;
  std::vector<uint8_t> cmyk_row;
  std::vector<JSAMPROW> rows;
};

std::string_view ColorSpaceName(JpegInfo::ColorSpace color) {
  switch (color) {
    case JpegInfo::ColorSpace::kGray:
      return "gray";
    case JpegInfo::ColorSpace::kYCbCr:
      return "ycbcr";
    case JpegInfo::ColorSpace::kRGB:
      return "rgb";
    case JpegInfo::ColorSpace::kCMYK:
      return "cmyk";
    case JpegInfo::ColorSpace::kYCCK:
      return "ycck";
    case JpegInfo::ColorSpace::kUnknown:
      break;
  }
  return "unknown";
}

int ScaledDimension(int dim, int scale_denom) {
  BATCHCAST_CHECK(dim >= 0);
  BATCHCAST_CHECK(scale_denom == 1 || scale_denom == 2 || scale_denom == 4 || scale_denom == 8)
      << "scale_denom " << scale_denom;
  return (dim + scale_denom - 1) / scale_denom;
}

JpegDecoder::JpegDecoder() : impl_(std::make_unique<Impl>()) {
  std::memset(&impl_->cinfo, 0, sizeof(impl_->cinfo));
  impl_->cinfo.err = InitErrorManager(&impl_->err);
  const int rc = GuardedCreate(&impl_->cinfo, &impl_->err);
  BATCHCAST_CHECK(rc == 0) << "jpeg_create_decompress failed: " << impl_->err.message;
}

JpegDecoder::~JpegDecoder() {
  if (impl_ != nullptr) jpeg_destroy_decompress(&impl_->cinfo);
}

// libjpeg keeps pointers to the error manager inside Impl, which is heap
// allocated: moving the unique_ptr keeps them valid.
JpegDecoder::JpegDecoder(JpegDecoder&&) noexcept = default;

JpegDecoder& JpegDecoder::operator=(JpegDecoder&& other) noexcept {
  if (this != &other) {
    if (impl_ != nullptr) jpeg_destroy_decompress(&impl_->cinfo);
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Result<JpegInfo> JpegDecoder::ReadHeader(std::span<const uint8_t> bytes, uint64_t max_pixels) {
  impl_->header_ready = false;
  if (max_pixels == 0) max_pixels = kDefaultMaxPixels;
  if (bytes.empty()) return DataLossError("not a JPEG: the data is empty (0 bytes)");
  if (bytes.size() < 2 || bytes[0] != 0xFF || bytes[1] != 0xD8) {
    return DataLossError(DescribeNonJpeg(bytes));
  }
  if (GuardedReadHeader(&impl_->cinfo, &impl_->err, bytes.data(), bytes.size()) != 0) {
    return DataLossError(std::string("corrupt JPEG header: ") + impl_->err.message);
  }
  const jpeg_decompress_struct& c = impl_->cinfo;
  JpegInfo info;
  info.width = static_cast<int>(c.image_width);
  info.height = static_cast<int>(c.image_height);
  info.components = c.num_components;
  info.progressive = c.progressive_mode != 0;
  info.color = ToColorSpace(c.jpeg_color_space);
  info.yuv420 = info.color == JpegInfo::ColorSpace::kYCbCr && c.num_components == 3 &&
                c.comp_info[0].h_samp_factor == 2 && c.comp_info[0].v_samp_factor == 2 &&
                c.comp_info[1].h_samp_factor == 1 && c.comp_info[1].v_samp_factor == 1 &&
                c.comp_info[2].h_samp_factor == 1 && c.comp_info[2].v_samp_factor == 1;
  const uint64_t pixels = static_cast<uint64_t>(c.image_width) * c.image_height;
  if (pixels > max_pixels) {
    jpeg_abort_decompress(&impl_->cinfo);
    return ResourceExhaustedError("JPEG is " + std::to_string(info.width) + "x" +
                                  std::to_string(info.height) + " = " + std::to_string(pixels) +
                                  " pixels, more than max_pixels " + std::to_string(max_pixels));
  }
  if (info.width <= 0 || info.height <= 0) {
    jpeg_abort_decompress(&impl_->cinfo);
    return DataLossError("corrupt JPEG header: empty image");
  }
  if (info.color == JpegInfo::ColorSpace::kUnknown) {
    jpeg_abort_decompress(&impl_->cinfo);
    return DataLossError("unsupported JPEG colour space (" + std::to_string(info.components) +
                         " components)");
  }
  impl_->info = info;
  impl_->header_ready = true;
  return info;
}

Result<DecodedImage> JpegDecoder::Decode(int scale_denom, PixelRect rect, bool gray_as_rgb) {
  BATCHCAST_CHECK(impl_->header_ready) << "JpegDecoder::Decode without a successful ReadHeader";
  impl_->header_ready = false;
  const JpegInfo& info = impl_->info;
  const int scaled_w = ScaledDimension(info.width, scale_denom);
  const int scaled_h = ScaledDimension(info.height, scale_denom);
  BATCHCAST_CHECK(rect.w > 0 && rect.h > 0 && rect.x >= 0 && rect.y >= 0 &&
                  rect.x + rect.w <= scaled_w && rect.y + rect.h <= scaled_h)
      << "rect " << rect.x << "," << rect.y << " " << rect.w << "x" << rect.h
      << " outside the scaled image " << scaled_w << "x" << scaled_h;

  DecodeArgs args{};
  args.scale_denom = scale_denom;
  args.rect = rect;
  args.allow_crop = true;
  args.cmyk = false;
  switch (info.color) {
    case JpegInfo::ColorSpace::kGray:
      args.out_space = gray_as_rgb ? JCS_RGB : JCS_GRAYSCALE;
      args.out_channels = gray_as_rgb ? 3 : 1;
      break;
    case JpegInfo::ColorSpace::kYCbCr:
    case JpegInfo::ColorSpace::kRGB:
      args.out_space = JCS_RGB;
      args.out_channels = 3;
      break;
    case JpegInfo::ColorSpace::kCMYK:
    case JpegInfo::ColorSpace::kYCCK:
      args.out_space = JCS_CMYK;
      args.out_channels = 3;
      args.cmyk = true;
      break;
    case JpegInfo::ColorSpace::kUnknown:  // rejected by ReadHeader
      BATCHCAST_CHECK(false) << "unreachable";
  }
  // GuardedDecode widens the rectangle by 2 columns on each side, and
  // jpeg_crop_scanline to the left by less than one iMCU (at most 32 columns).
  args.capacity_width = static_cast<JDIMENSION>(std::min(scaled_w, rect.w + 72));
  const size_t need = static_cast<size_t>(rect.h) * args.capacity_width * args.out_channels;
  if (impl_->pixels.size() < need) impl_->pixels.resize(need);
  if (impl_->rows.size() < static_cast<size_t>(rect.h)) impl_->rows.resize(rect.h);
  if (args.cmyk && impl_->cmyk_row.size() < args.capacity_width * 4u) {
    impl_->cmyk_row.resize(args.capacity_width * 4u);
  }
  args.pixels = impl_->pixels.data();
  args.rows = impl_->rows.data();
  args.cmyk_row = impl_->cmyk_row.data();

  DecodeOutput out{};
  const int rc = GuardedDecode(&impl_->cinfo, &impl_->err, args, &out);
  if (rc == 3) return InternalError(impl_->err.message);
  if (rc != 0) return DataLossError(std::string("corrupt JPEG data: ") + impl_->err.message);

  DecodedImage image;
  image.channels = args.out_channels;
  image.data = impl_->pixels.data() + static_cast<size_t>(out.col0) * image.channels;
  image.width = rect.w;
  image.height = rect.h;
  image.stride = out.stride;
  return image;
}

Result<DecodedImage> JpegDecoder::DecodeRgb(std::span<const uint8_t> bytes, uint64_t max_pixels) {
  BATCHCAST_ASSIGN_OR_RETURN(JpegInfo info, ReadHeader(bytes, max_pixels));
  return Decode(1, PixelRect{0, 0, info.width, info.height}, /*gray_as_rgb=*/true);
}

Result<JpegInfo> ReadJpegInfo(std::span<const uint8_t> bytes, uint64_t max_pixels) {
  JpegDecoder decoder;
  return decoder.ReadHeader(bytes, max_pixels);
}

}  // namespace batchcast::image
