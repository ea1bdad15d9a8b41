#include "libjpeg_util.h"

#include <cstring>
#include <string_view>

#include "batchcast/image/image_format.h"

namespace batchcast::image {
namespace {

ErrorManager* GetErrorManager(j_common_ptr cinfo) {
  return reinterpret_cast<ErrorManager*>(cinfo->err);
}

[[noreturn]] void OnErrorExit(j_common_ptr cinfo) {
  ErrorManager* err = GetErrorManager(cinfo);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings that mean the decoded pixels are not the encoded ones.
bool IsFatalWarning(int code) {
  switch (code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_ARITH_BAD_CODE:
    case JWRN_MUST_RESYNC:
    case JWRN_BOGUS_PROGRESSION:
    case JWRN_NOT_SEQUENTIAL:
      return true;
    default:
      return false;
  }
}

void OnEmitMessage(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;  // trace messages
  cinfo->err->num_warnings++;
  if (IsFatalWarning(cinfo->err->msg_code)) {
    ErrorManager* err = GetErrorManager(cinfo);
    (*cinfo->err->format_message)(cinfo, err->message);
    std::longjmp(err->jump, 2);
  }
}

void OnOutputMessage(j_common_ptr) {}  // never print to stderr

}  // namespace

jpeg_error_mgr* InitErrorManager(ErrorManager* err) {
  jpeg_error_mgr* pub = jpeg_std_error(&err->pub);
  pub->error_exit = OnErrorExit;
  pub->emit_message = OnEmitMessage;
  pub->output_message = OnOutputMessage;
  err->message[0] = '\0';
  return pub;
}

void SetMessage(ErrorManager* err, const char* message) {
  std::snprintf(err->message, sizeof(err->message), "%s", message);
}

std::string DescribeNonJpeg(std::span<const uint8_t> b) {
  const ImageFormat format = SniffImageFormat(b);
  if (format != ImageFormat::kUnknown && format != ImageFormat::kJpeg) {
    return std::string("not a JPEG: the data is a ") + std::string(ImageFormatTitle(format)) +
           " image";
  }
  char buf[96];
  if (b.size() == 1) {
    std::snprintf(buf, sizeof(buf), "not a JPEG: 1 byte (0x%02x)", b[0]);
  } else {
    std::snprintf(buf, sizeof(buf),
                  "not a JPEG: starts with 0x%02x 0x%02x instead of the SOI marker 0xff 0xd8", b[0],
                  b[1]);
  }
  return buf;
}

JpegInfo::ColorSpace ToColorSpace(J_COLOR_SPACE space) {
  switch (space) {
    case JCS_GRAYSCALE:
      return JpegInfo::ColorSpace::kGray;
    case JCS_YCbCr:
      return JpegInfo::ColorSpace::kYCbCr;
    case JCS_RGB:
      return JpegInfo::ColorSpace::kRGB;
    case JCS_CMYK:
      return JpegInfo::ColorSpace::kCMYK;
    case JCS_YCCK:
      return JpegInfo::ColorSpace::kYCCK;
    default:
      return JpegInfo::ColorSpace::kUnknown;
  }
}

}  // namespace batchcast::image
