// Little-endian byte writer and bounds-checked reader for the protocol codec.
// Internal to batchcast::core.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "batchcast/core/status.h"

namespace batchcast::wire {

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  template <typename T>
  void Put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));  // x86-64 and aarch64 are little-endian
    out_.append(bytes, sizeof(T));
  }
  // Put of each value, in order: a run of fixed-size fields.
  template <typename... T>
  void PutAll(T... values) {
    (Put(values), ...);
  }
  void PutBytes(const void* data, size_t n) { out_.append(static_cast<const char*>(data), n); }
  void PutString(std::string_view s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    PutBytes(s.data(), s.size());
  }
  // A u32 count, then the elements' bytes.
  template <typename T>
  void PutArray(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    Put<uint32_t>(static_cast<uint32_t>(v.size()));
    PutBytes(v.data(), v.size() * sizeof(T));
  }

 private:
  std::string& out_;
};

// Every Get* fails (and stays failed) instead of reading past the end.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> data) : data_(data) {}

  template <typename T>
  bool Get(T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (!Need(sizeof(T))) return false;
    std::memcpy(&value, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetBytes(void* out, size_t n) {
    if (!Need(n)) return false;
    if (n == 0) return true;  // `out` may be null for an empty list
    std::memcpy(out, data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool GetString(std::string& s, size_t max_len) {
    uint32_t n = 0;
    if (!Get(n)) return false;
    if (n > max_len)
      return Fail("string of " + std::to_string(n) + " bytes (limit " + std::to_string(max_len) +
                  ")");
    if (!Need(n)) return false;
    s.assign(reinterpret_cast<const char*>(data_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  // Reads a u32 count and checks it against `max` and against the bytes left
  // (each element needs at least `min_elem_bytes`), so a huge count cannot
  // trigger a huge allocation.
  bool GetCount(uint32_t& n, size_t max, size_t min_elem_bytes, const char* what) {
    if (!Get(n)) return false;
    if (n > max)
      return Fail(std::string(what) + " count " + std::to_string(n) + " exceeds the limit " +
                  std::to_string(max));
    if (min_elem_bytes > 0 && n > remaining() / min_elem_bytes) {
      return Fail(std::string(what) + " count " + std::to_string(n) + " exceeds the message");
    }
    return true;
  }
  // The reverse of Writer::PutArray, with GetCount's checks.
  template <typename T>
  bool GetArray(std::vector<T>& v, size_t max, const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    uint32_t n = 0;
    if (!GetCount(n, max, sizeof(T), what)) return false;
    v.resize(n);
    return GetBytes(v.data(), n * sizeof(T));
  }
  bool Fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    failed_ = true;
    return false;
  }
  size_t remaining() const { return failed_ ? 0 : data_.size() - pos_; }
  bool failed() const { return failed_; }
  const std::string& error() const { return error_; }

 private:
  bool Need(size_t n) {
    if (failed_) return false;
    if (data_.size() - pos_ < n) return Fail("truncated message");
    return true;
  }
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  bool failed_ = false;
  std::string error_;
};

}  // namespace batchcast::wire
