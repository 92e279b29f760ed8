// Where a run's wall time goes, by phase (issue 18: a suite's time outside evaluation).
//
// The orchestrating thread of Optimizer::run enters named phases ("prepare", "compile_wait",
// "final", "profile", ...) through scopes; a phase entered inside another pauses the outer one,
// so the phases are disjoint and their sum is the wall time the clock ran. What no scope names
// counts as the base phase ("search": candidate evaluation on the workers plus the search's own
// bookkeeping; result.json's device_s says how much of it the workers took).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kforge::search {

/// Disjoint wall-clock seconds per phase, measured on one thread with an injectable clock.
/// Not thread-safe: only the run's orchestrating thread enters phases.
class PhaseClock {
 public:
  /// `now_s`: a monotonic clock in seconds; `base`: the phase of time no scope names.
  PhaseClock(std::function<double()> now_s, std::string base)
      : now_s_(std::move(now_s)), stack_{std::move(base)} {}

  /// While alive, time counts to `phase` (and not to the phase it interrupted).
  class Scope {
   public:
    Scope(PhaseClock& clock, const std::string& phase) : clock_(&clock) { clock_->push(phase); }
    ~Scope() {
      if (clock_ != nullptr) clock_->pop();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    PhaseClock* clock_;
  };

  /// Starts counting (to the base phase); before it, nothing counts.
  void start() {
    started_ = true;
    since_ = now_s_();
  }

  [[nodiscard]] Scope enter(const std::string& phase) { return Scope(*this, phase); }

  /// Seconds per phase so far, the running phase included; phases with no time are absent.
  std::map<std::string, double> seconds() const {
    std::map<std::string, double> out = seconds_;
    if (started_) out[stack_.back()] += now_s_() - since_;
    return out;
  }

 private:
  void push(const std::string& phase) {
    charge();
    stack_.push_back(phase);
  }
  void pop() {
    charge();
    if (stack_.size() > 1) stack_.pop_back();
  }
  void charge() {
    if (!started_) return;
    const double now = now_s_();
    seconds_[stack_.back()] += now - since_;
    since_ = now;
  }

  std::function<double()> now_s_;
  std::vector<std::string> stack_;
  std::map<std::string, double> seconds_;
  double since_ = 0.0;
  bool started_ = false;
};

}  // namespace kforge::search
