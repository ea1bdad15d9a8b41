// Which datasets are tar shards (WebDataset layout), and the shard files a
// dataset argument names.
//
// A shard dataset is named by
//   - a brace pattern: 'train-{000000..001023}.tar' (numeric ranges keep the
//     width of their first bound when it has leading zeros; '{a,b,c}' lists
//     alternatives; several braces expand left to right);
//   - a glob: '/data/train-*.tar' (sorted);
//   - a plain path to one .tar file;
//   - a directory holding .tar files (directly; sorted);
//   - several of these joined by '::' ('a.tar::b-{0..3}.tar'), in that order.
// The order of the expansion is the dataset's shard order: sample indices
// count shard by shard in it (then member order inside a shard).
//
// Thread-safety: pure functions (they read the file system).
#pragma once

#include <string>
#include <vector>

#include "batchcast/core/status.h"

namespace batchcast {

// True when `data` names tar shards (see above) rather than an image folder
// or a .tsv list: it holds '::', ends with ".tar", or is a directory with a
// .tar file directly inside.
bool IsShardData(const std::string& data);

// Expands brace ranges and lists of one pattern, without touching the file
// system. InvalidArgument for an unbalanced or empty brace, a range whose
// bounds are not non-negative integers or run backwards, or more than
// 10,000,000 names.
Result<std::vector<std::string>> ExpandBraces(const std::string& pattern);

// The shard files `data` names, in shard order. Every one must be an
// existing file (NotFound names how many are missing and the first);
// InvalidArgument for bad patterns, a glob or directory that matches no
// .tar file, or a path that does not end in ".tar".
Result<std::vector<std::string>> ExpandShardPattern(const std::string& data);

}  // namespace batchcast
