#include "report.h"

#include <chrono>
#include <cstdlib>
#include <map>
#include <sstream>

#include "epoch_checker.h"

namespace batchcast::stress {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Reporter::Print(const std::string& line) {
  if (out_ == nullptr) return;
  std::fputs(line.c_str(), out_);
  std::fputc('\n', out_);
  std::fflush(out_);
}

void Reporter::Connected(uint64_t consumer_id, uint64_t batches_per_epoch) {
  Print("CONNECTED " + std::to_string(consumer_id) + " " + std::to_string(batches_per_epoch) + " " +
        std::to_string(NowMs()));
}

void Reporter::Epoch(const CheckedEpoch& e) {
  ++(e.samples > 0 ? exact_epochs_ : broken_epochs_);
  Print("EPOCH " + std::to_string(e.epoch) + " " + std::to_string(e.first_seq) + " " +
        std::to_string(e.samples) + " " + std::to_string(e.digest));
}

void Reporter::Batch() {
  const int64_t now = NowMs();
  last_batch_ms_ = now;
  const uint64_t n = ++batches_;
  if (now - last_progress_ms_ >= 100) {
    last_progress_ms_ = now;
    Print("PROGRESS " + std::to_string(n) + " " + std::to_string(now));
  }
}

void Reporter::Lost(const Status& status) {
  std::string message = status.message();
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  Print("LOST " + std::string(StatusCodeName(status.code())) + " " + std::to_string(NowMs()) + " " +
        message);
}

void Reporter::Violation(const std::string& what) {
  ++violations_;
  std::string line = "VIOLATION " + what;
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  Print(line);
  if (on_violation_) on_violation_(what);
}

void Reporter::Done() { Print("DONE " + std::to_string(batches_.load())); }

uint64_t Report::U(size_t i) const {
  if (i >= words.size()) return 0;
  return std::strtoull(words[i].c_str(), nullptr, 10);
}

Report ParseReport(const std::string& line) {
  static const std::map<std::string, size_t> kWords = {
      {"CONNECTED", 3}, {"EPOCH", 4}, {"PROGRESS", 2}, {"LOST", 2}, {"VIOLATION", 0}, {"DONE", 1}};
  Report r;
  std::istringstream in(line);
  in >> r.kind;
  auto it = kWords.find(r.kind);
  const size_t n = it == kWords.end() ? 0 : it->second;
  for (size_t i = 0; i < n; ++i) {
    std::string w;
    if (!(in >> w)) break;
    r.words.push_back(std::move(w));
  }
  std::getline(in >> std::ws, r.rest);
  return r;
}

}  // namespace batchcast::stress
