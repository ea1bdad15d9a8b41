// Scalar conversions between float32 and the 16-bit float formats of sample
// fields: IEEE binary16 (float16) and bfloat16.
//
// Float-to-16-bit conversions round to nearest, ties to even (what torch's
// `tensor.half()` / `tensor.bfloat16()` do); NaN stays NaN (quiet), infinities
// stay infinities, float16 overflow (|x| >= 65520) gives infinity, tiny values
// become float16 subnormals or signed zero. The reverse conversions are exact.
//
// Thread-safety: pure functions.
#pragma once

#include <bit>
#include <cstdint>

namespace batchcast::image {

inline uint16_t FloatToHalf(float value) {
  // Magic-number method (F. Giesen, "float_to_half_fast3_rtne"); relies on the
  // default floating-point rounding mode (round to nearest even).
  constexpr uint32_t kF32Infinity = 255u << 23;
  constexpr uint32_t kF16Max = (127u + 16u) << 23;  // 65536.0f: at or above rounds to inf
  constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  uint16_t out;
  if (bits >= kF16Max) {
    out = bits > kF32Infinity ? 0x7E00 : 0x7C00;
  } else if (bits < (113u << 23)) {  // below 2^-14: the result is subnormal or zero
    const float shifted = std::bit_cast<float>(bits) + std::bit_cast<float>(kDenormMagic);
    out = static_cast<uint16_t>(std::bit_cast<uint32_t>(shifted) - kDenormMagic);
  } else {
    const uint32_t mantissa_odd = (bits >> 13) & 1u;
    bits += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFFu;
    bits += mantissa_odd;
    out = static_cast<uint16_t>(bits >> 13);
  }
  return static_cast<uint16_t>(out | (sign >> 16));
}

inline float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1Fu;
  const uint32_t mantissa = half & 0x3FFu;
  if (exponent == 0x1F) {  // inf / NaN
    return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  }
  if (exponent == 0) {  // zero / subnormal: mantissa * 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * 0x1.0p-24f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline uint16_t FloatToBFloat16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN: keep the sign, make it quiet
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float BFloat16ToFloat(uint16_t value) {
  return std::bit_cast<float>(static_cast<uint32_t>(value) << 16);
}

}  // namespace batchcast::image
