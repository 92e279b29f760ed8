#include "common/scratch_release.h"

#include <unistd.h>

#include <algorithm>

namespace kforge {

ScratchRelease::ScratchRelease(int max_pending)
    : max_pending_(static_cast<size_t>(std::max(1, max_pending))), thread_([this] { run(); }) {}

ScratchRelease::~ScratchRelease() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void ScratchRelease::release(std::vector<std::string> paths, MappedFile mapping) {
  if (paths.empty() && mapping.size() == 0) return;
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return queue_.size() < max_pending_; });
  queue_.push_back({std::move(paths), std::move(mapping)});
  changed_.notify_all();
}

void ScratchRelease::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void ScratchRelease::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    Item item = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    changed_.notify_all();  // room in the queue
    lock.unlock();
    item.mapping = MappedFile();  // unmapped here
    for (const std::string& path : item.paths) ::unlink(path.c_str());
    lock.lock();
    busy_ = false;
    changed_.notify_all();
  }
}

ScratchRelease& scratch_release() {
  static ScratchRelease release;
  return release;
}

}  // namespace kforge
