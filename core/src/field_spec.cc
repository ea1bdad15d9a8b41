#include "batchcast/core/field_spec.h"

namespace batchcast {

int64_t FieldSpec::elements_per_sample() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t FieldSpec::bytes_per_sample() const {
  return static_cast<size_t>(elements_per_sample()) * DTypeSize(dtype);
}

}  // namespace batchcast
