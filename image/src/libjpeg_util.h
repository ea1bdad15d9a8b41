// libjpeg helpers shared by the decoder (jpeg.cc) and the transcoder
// (transcode.cc): an error manager whose error_exit and fatal warnings longjmp
// back to the caller's setjmp with the message, a description of data that is
// not a JPEG, and libjpeg's colour spaces as JpegInfo's.
//
// Use: InitErrorManager(&err) and point cinfo->err at &err.pub; call libjpeg
// only inside functions that setjmp(err.jump) first and hold only trivially
// destructible locals (the longjmp skips no destructor). After a jump,
// err.message holds libjpeg's message.
//
// Thread-safety: an ErrorManager belongs to the libjpeg objects of one thread.
#pragma once

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE and size_t first
#include <jpeglib.h>
#include <jerror.h>  // ERREXIT, JERR_* and JWRN_* codes
// clang-format on

#include <csetjmp>
#include <cstdint>
#include <span>
#include <string>

#include "batchcast/image/jpeg.h"

namespace batchcast::image {

struct ErrorManager {
  jpeg_error_mgr pub;  // first member: libjpeg sees a jpeg_error_mgr*
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

// Sets up `err`: error_exit longjmps with value 1; warnings that mean the
// pixels are not the encoded ones (premature end of data, bad Huffman code,
// must resync, bogus progression, not sequential) longjmp with value 2; other
// warnings and trace messages are ignored; nothing is printed. Returns &err->pub.
jpeg_error_mgr* InitErrorManager(ErrorManager* err);

// Copies `message` into err->message.
void SetMessage(ErrorManager* err, const char* message);

// Why `bytes` (non-empty) is not a JPEG: "not a JPEG: the data is a PNG image",
// "not a JPEG: starts with 0x.. 0x.. instead of the SOI marker 0xff 0xd8", ...
std::string DescribeNonJpeg(std::span<const uint8_t> bytes);

// kUnknown for spaces other than gray, YCbCr, RGB, CMYK and YCCK.
JpegInfo::ColorSpace ToColorSpace(J_COLOR_SPACE space);

}  // namespace batchcast::image
