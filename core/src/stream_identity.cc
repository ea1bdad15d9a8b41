#include "core/src/stream_identity.h"

#include <algorithm>
#include <cstdio>

#include "batchcast/core/check.h"

namespace batchcast {

void StreamIdentity::Add(std::string_view key, std::string value) {
  BATCHCAST_CHECK(!key.empty() && key.find_first_of(";=") == std::string_view::npos &&
                  value.find(';') == std::string::npos)
      << "bad stream identity component " << key;
  for (const auto& [k, _] : components_) BATCHCAST_CHECK(k != key) << "duplicate " << key;
  components_.emplace_back(std::string(key), std::move(value));
}

std::string StreamIdentity::ToString() const {
  std::string s;
  for (const auto& [k, v] : components_) s += (s.empty() ? "" : ";") + k + "=" + v;
  return s;
}

Result<StreamIdentity> StreamIdentity::Parse(std::string_view text) {
  StreamIdentity id;
  while (!text.empty()) {
    const size_t end = std::min(text.find(';'), text.size());
    const std::string_view part = text.substr(0, end);
    const size_t eq = part.find('=');
    if (eq == 0 || eq == std::string_view::npos) {
      return InvalidArgumentError("'" + std::string(part) + "' is not a key=value component");
    }
    const std::string_view key = part.substr(0, eq);
    for (const auto& [k, _] : id.components_) {
      if (k == key) return InvalidArgumentError("component '" + std::string(key) + "' twice");
    }
    id.components_.emplace_back(std::string(key), std::string(part.substr(eq + 1)));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  if (id.components_.empty()) return InvalidArgumentError("no component");
  return id;
}

Status StreamIdentity::CheckSaved(std::string_view saved) const {
  Result<StreamIdentity> other = Parse(saved);
  if (!other.ok()) {
    return InvalidArgumentError("the saved stream identity is not one: " +
                                other.status().message());
  }
  auto value_of = [](const StreamIdentity& id, const std::string& key) -> const std::string* {
    for (const auto& [k, v] : id.components_) {
      if (k == key) return &v;
    }
    return nullptr;
  };
  std::string diff;
  auto note = [&](const std::string& key, const std::string* was, const std::string* is) {
    diff += (diff.empty() ? "" : "; ") + key + ": saved " + (was ? *was : "(none)") + ", here " +
            (is ? *is : "(none)");
  };
  for (const auto& [k, v] : components_) {
    const std::string* was = value_of(*other, k);
    if (was == nullptr || *was != v) note(k, was, &v);
  }
  for (const auto& [k, v] : other->components_) {
    if (value_of(*this, k) == nullptr) note(k, &v, nullptr);
  }
  if (diff.empty()) return Status::Ok();
  return InvalidArgumentError("the state was saved from another stream (" + diff + ")");
}

uint64_t Fnv1a64(std::string_view bytes, uint64_t h) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace batchcast
