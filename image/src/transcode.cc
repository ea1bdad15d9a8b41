#include "batchcast/image/transcode.h"

#include <cstring>
#include <new>
#include <string>

#include "libjpeg_util.h"

namespace batchcast::image {
namespace {

// A libjpeg destination that writes into a std::vector (which the caller owns,
// so nothing leaks when libjpeg longjmps out mid-write, unlike jpeg_mem_dest,
// whose grown buffer is only handed over by term_destination).
struct VectorDestination {
  jpeg_destination_mgr pub;  // first member: libjpeg sees a jpeg_destination_mgr*
  std::vector<uint8_t>* out;
  size_t initial_size;
};

VectorDestination* GetDestination(j_compress_ptr cinfo) {
  return reinterpret_cast<VectorDestination*>(cinfo->dest);
}

// Grows *out to `size` bytes; false when out of memory (no exception may
// unwind through libjpeg's C frames).
bool Grow(std::vector<uint8_t>* out, size_t size) {
  try {
    out->resize(size);
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

void InitDestination(j_compress_ptr cinfo) {
  VectorDestination* d = GetDestination(cinfo);
  if (!Grow(d->out, d->initial_size)) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 1);
  d->pub.next_output_byte = d->out->data();
  d->pub.free_in_buffer = d->out->size();
}

boolean EmptyDestination(j_compress_ptr cinfo) {
  VectorDestination* d = GetDestination(cinfo);
  const size_t used = d->out->size();
  if (!Grow(d->out, used * 2)) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 2);
  d->pub.next_output_byte = d->out->data() + used;
  d->pub.free_in_buffer = d->out->size() - used;
  return TRUE;
}

void TermDestination(j_compress_ptr cinfo) {
  VectorDestination* d = GetDestination(cinfo);
  d->out->resize(d->out->size() - d->pub.free_in_buffer);
}

// True when every defined quantization table fits a baseline (8-bit) DQT.
bool QuantTablesFitBaseline(JQUANT_TBL* const tables[NUM_QUANT_TBLS]) {
  for (int t = 0; t < NUM_QUANT_TBLS; ++t) {
    if (tables[t] == nullptr) continue;
    for (int k = 0; k < DCTSIZE2; ++k) {
      if (tables[t]->quantval[k] > 255) return false;
    }
  }
  return true;
}

// True when the block's coefficients have codes in the standard Huffman
// tables: a quantized DC value in [-1024, 1023] (so DC differences need at
// most 11 bits) and AC values in [-1023, 1023] (10 bits).
bool BlockFitsStandardTables(const JCOEF* c) {
  if (c[0] < -1024 || c[0] > 1023) return false;
  for (int k = 1; k < DCTSIZE2; ++k) {
    if (c[k] < -1023 || c[k] > 1023) return false;
  }
  return true;
}

// True when every block fits the standard tables, as in any 8-bit JPEG whose
// data is not corrupt. libjpeg-turbo's encoder does not check this with the
// standard tables (it would write a broken file); corrupt progressive data can
// decode to larger values. Runs under the caller's setjmp (access_virt_barray
// may fail); only the real blocks are encoded (edge padding is made anew).
bool CoefficientsFitStandardTables(j_decompress_ptr src, jvirt_barray_ptr* coefficients) {
  for (int ci = 0; ci < src->num_components; ++ci) {
    const jpeg_component_info& comp = src->comp_info[ci];
    for (JDIMENSION row = 0; row < comp.height_in_blocks; ++row) {
      JBLOCKARRAY blocks = (*src->mem->access_virt_barray)(reinterpret_cast<j_common_ptr>(src),
                                                           coefficients[ci], row, 1, FALSE);
      for (JDIMENSION col = 0; col < comp.width_in_blocks; ++col) {
        const JCOEF* c = blocks[0][col];
        // |c| <= 1023 for all 64 (a fixed count: this loop vectorizes); the
        // exact test only for the rare block that fails it.
        uint16_t outside = 0;
        for (int k = 0; k < DCTSIZE2; ++k) {
          outside |= static_cast<uint16_t>(static_cast<uint16_t>(c[k] + 1023) > 2046);
        }
        if (outside != 0 && !BlockFitsStandardTables(c)) return false;
      }
    }
  }
  return true;
}

// The libjpeg state of one call.
struct Transcoder {
  jpeg_decompress_struct src;
  jpeg_compress_struct dst;
  ErrorManager err;
  VectorDestination dest;
};

// ---- Functions that call libjpeg under setjmp. Only trivial locals here. ----

// Creates both libjpeg objects and reads the header. 0 on success.
int GuardedReadHeader(Transcoder* t, const uint8_t* data, size_t size) {
  if (setjmp(t->err.jump)) return 1;
  jpeg_create_decompress(&t->src);
  jpeg_create_compress(&t->dst);
  jpeg_mem_src(&t->src, data, static_cast<unsigned long>(size));  // NOLINT(runtime/int)
  if (jpeg_read_header(&t->src, TRUE) != JPEG_HEADER_OK) {
    SetMessage(&t->err, "no image in the JPEG stream (tables only)");
    return 1;
  }
  return 0;
}

// Reads the coefficients and writes them as baseline into t->dest. 0 on
// success; 3 when the tables in effect do not fit baseline; 1 on a libjpeg
// error or coefficients out of range.
int GuardedTranscode(Transcoder* t) {
  if (setjmp(t->err.jump)) return 1;
  jvirt_barray_ptr* coefficients = jpeg_read_coefficients(&t->src);  // reads through EOI
  jpeg_copy_critical_parameters(&t->src, &t->dst);  // also: JFIF header, input's density
  if (!QuantTablesFitBaseline(t->dst.quant_tbl_ptrs)) return 3;
  // The standard Huffman tables, not optimized ones: on the progressive files
  // of tools/make_dataset.py (benchmarks/cpu_pipeline_cost --progressive),
  // optimizing made the output 1.012x-1.044x the input's size instead of
  // 1.047x-1.098x, but cost a second pass over the coefficients: 1.66-2.2 ms
  // of CPU per file instead of 1.1-1.45 ms. CPU is the scarce resource here.
  // The standard tables need the range check below (~10-20 us per file).
  t->dst.optimize_coding = FALSE;
  if (!CoefficientsFitStandardTables(&t->src, coefficients)) {
    SetMessage(&t->err, "DCT coefficient out of range");
    return 1;
  }
  t->dst.dest = &t->dest.pub;
  jpeg_write_coefficients(&t->dst, coefficients);  // no jpeg_simple_progression: sequential
  jpeg_finish_compress(&t->dst);
  jpeg_finish_decompress(&t->src);
  return 0;
}

// Why the parsed header is not transcoded, or OK.
Status CheckTranscodable(const jpeg_decompress_struct& c, uint64_t max_pixels) {
  const uint64_t pixels = static_cast<uint64_t>(c.image_width) * c.image_height;
  if (pixels > max_pixels) {
    return ResourceExhaustedError("JPEG is " + std::to_string(c.image_width) + "x" +
                                  std::to_string(c.image_height) + " = " + std::to_string(pixels) +
                                  " pixels, more than max_pixels " + std::to_string(max_pixels));
  }
  if (pixels == 0) return DataLossError("corrupt JPEG header: empty image");
  if (c.num_components != 1 && c.num_components != 3) {
    return InvalidArgumentError("JPEG not transcoded: " + std::to_string(c.num_components) +
                                " components");
  }
  const bool gray = c.num_components == 1 && c.jpeg_color_space == JCS_GRAYSCALE;
  const bool ycbcr = c.num_components == 3 && c.jpeg_color_space == JCS_YCbCr;
  if (!gray && !ycbcr) {
    return InvalidArgumentError("JPEG not transcoded: colour space " +
                                std::string(ColorSpaceName(ToColorSpace(c.jpeg_color_space))) +
                                " (" + std::to_string(c.num_components) + " components)");
  }
  if (c.data_precision != 8) {
    return InvalidArgumentError("JPEG not transcoded: " + std::to_string(c.data_precision) +
                                "-bit samples");
  }
  if (!QuantTablesFitBaseline(c.quant_tbl_ptrs)) {
    return InvalidArgumentError(
        "JPEG not transcoded: quantization values over 255 do not fit baseline");
  }
  return Status::Ok();
}

Result<std::vector<uint8_t>> Transcode(Transcoder* t, std::span<const uint8_t> jpeg,
                                       uint64_t max_pixels) {
  if (GuardedReadHeader(t, jpeg.data(), jpeg.size()) != 0) {
    return DataLossError(std::string("corrupt JPEG header: ") + t->err.message);
  }
  BATCHCAST_RETURN_IF_ERROR(CheckTranscodable(t->src, max_pixels));
  std::vector<uint8_t> out;
  t->dest.pub.init_destination = InitDestination;
  t->dest.pub.empty_output_buffer = EmptyDestination;
  t->dest.pub.term_destination = TermDestination;
  t->dest.out = &out;
  // The baseline file is about as large as the progressive one: rarely grown.
  t->dest.initial_size = jpeg.size() + jpeg.size() / 8 + 4096;
  const int rc = GuardedTranscode(t);
  if (rc == 3) {
    return InvalidArgumentError(
        "JPEG not transcoded: quantization values over 255 do not fit baseline");
  }
  if (rc != 0) return DataLossError(std::string("corrupt JPEG data: ") + t->err.message);
  return out;
}

}  // namespace

Result<std::vector<uint8_t>> TranscodeToBaseline(std::span<const uint8_t> jpeg,
                                                 uint64_t max_pixels) {
  if (max_pixels == 0) max_pixels = kDefaultMaxPixels;
  if (jpeg.empty()) return InvalidArgumentError("not a JPEG: the data is empty (0 bytes)");
  if (jpeg.size() < 2 || jpeg[0] != 0xFF || jpeg[1] != 0xD8) {
    return InvalidArgumentError(DescribeNonJpeg(jpeg));
  }
  Transcoder t;
  std::memset(&t, 0, sizeof(t));  // jpeg_destroy_* accept never-created objects
  t.src.err = InitErrorManager(&t.err);
  t.dst.err = &t.err.pub;
  Result<std::vector<uint8_t>> result = Transcode(&t, jpeg, max_pixels);
  jpeg_destroy_compress(&t.dst);
  jpeg_destroy_decompress(&t.src);
  return result;
}

}  // namespace batchcast::image
