//===- HostStreams.cpp - Device.h's streams and events on CPU ranks -------===//
/// \file
/// A stream made `concurrent` is a worker thread with a queue, as a CUDA
/// stream is a queue the GPU drains beside the host: `launch` appends work,
/// an event is recorded when the worker reaches it, and waiting for one
/// holds the waiting stream (or, for the calling thread's own streams, the
/// caller) until then. Other streams run their work at once on the calling
/// thread, in program order, which satisfies their events by construction.
/// The trainer makes the compute stream the calling thread and g2g, h2d and
/// d2h concurrent (with --overlap), so communication and offload copies run
/// beside compute exactly as far as the schedule's events allow, and a
/// missing event is a data race that ThreadSanitizer reports.
//===----------------------------------------------------------------------===//
#include "runtime/device/Device.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mist::rt::device {

namespace {

double nowMs() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

/// An event's state: how many recordings were enqueued and how many the
/// recording stream reached (a wait is for the recordings enqueued before
/// it, as cudaStreamWaitEvent waits for the last cudaEventRecord), and when
/// the last one was reached. Shared with queued work, so an event destroyed
/// by its owner stays alive until that work has run.
struct EventState {
  std::mutex lock;
  std::condition_variable reached;
  uint64_t enqueued = 0, done = 0;
  double ms = 0;

  void waitFor(uint64_t recording) {
    std::unique_lock<std::mutex> guard(lock);
    reached.wait(guard, [&] { return done >= recording; });
  }
  void complete(uint64_t recording) {
    {
      std::lock_guard<std::mutex> guard(lock);
      ms = nowMs();
      done = std::max(done, recording);
    }
    reached.notify_all();
  }
};
using EventRef = std::shared_ptr<EventState>;
EventRef &stateOf(EventHandle e) { return *static_cast<EventRef *>(e); }

/// A concurrent stream: one worker thread running queued work in order.
class HostStream {
public:
  HostStream() : worker([this] { drain(); }) {}
  ~HostStream() {
    {
      std::lock_guard<std::mutex> guard(lock);
      stopping = true;
    }
    changed.notify_all();
    worker.join(); // after the queue is empty
  }
  void enqueue(std::function<void()> work) {
    {
      std::lock_guard<std::mutex> guard(lock);
      queue.push_back(std::move(work));
    }
    changed.notify_all();
  }
  /// Returns when everything enqueued so far has run.
  void synchronize() {
    std::unique_lock<std::mutex> guard(lock);
    changed.wait(guard, [&] { return queue.empty() && !busy; });
  }

private:
  void drain();
  std::mutex lock;
  std::condition_variable changed;
  std::deque<std::function<void()>> queue;
  bool busy = false, stopping = false;
  std::thread worker; // last: starts once the members above exist
};

thread_local Stream current = nullptr;

void HostStream::drain() {
  current = this;
  std::unique_lock<std::mutex> guard(lock);
  for (;;) {
    changed.wait(guard, [&] { return stopping || !queue.empty(); });
    if (queue.empty())
      return; // stopping, and nothing left
    std::function<void()> work = std::move(queue.front());
    queue.pop_front();
    busy = true;
    guard.unlock();
    work();
    guard.lock();
    busy = false;
    changed.notify_all();
  }
}

HostStream *workerOf(Stream s) { return static_cast<HostStream *>(s); }

/// The process's concurrent streams, for synchronizeDevice (a GPU's device
/// knows its streams the same way).
struct StreamRegistry {
  std::mutex lock;
  std::vector<HostStream *> streams;
};
StreamRegistry &registry() {
  static StreamRegistry r;
  return r;
}

} // namespace

Stream createStream(bool concurrent) {
  if (!concurrent)
    return nullptr; // runs on the calling thread
  auto *s = new HostStream;
  StreamRegistry &r = registry();
  std::lock_guard<std::mutex> guard(r.lock);
  r.streams.push_back(s);
  return s;
}

void destroyStream(Stream s) {
  if (!s)
    return;
  {
    StreamRegistry &r = registry();
    std::lock_guard<std::mutex> guard(r.lock);
    std::erase(r.streams, workerOf(s));
  }
  delete workerOf(s);
}

Stream currentStream() { return current; }
void setCurrentStream(Stream s) { current = s; }

void launch(Stream s, const std::function<void()> &work) {
  if (!s) {
    const Stream previous = current;
    current = s;
    work();
    current = previous;
    return;
  }
  workerOf(s)->enqueue(work);
}

EventHandle createEvent() { return new EventRef(std::make_shared<EventState>()); }
void destroyEvent(EventHandle e) { delete static_cast<EventRef *>(e); }

void recordEvent(EventHandle e, Stream s) {
  EventRef state = stateOf(e);
  uint64_t recording;
  {
    std::lock_guard<std::mutex> guard(state->lock);
    recording = ++state->enqueued;
  }
  if (!s)
    return state->complete(recording); // this thread's work before it is done
  workerOf(s)->enqueue([state, recording] { state->complete(recording); });
}

void waitEvent(Stream s, EventHandle e) {
  EventRef state = stateOf(e);
  uint64_t recording;
  {
    std::lock_guard<std::mutex> guard(state->lock);
    recording = state->enqueued;
  }
  if (!s)
    return state->waitFor(recording);
  workerOf(s)->enqueue([state, recording] { state->waitFor(recording); });
}

double elapsedMs(EventHandle from, EventHandle to) {
  EventRef a = stateOf(from), b = stateOf(to);
  for (EventState *x : {a.get(), b.get()}) {
    uint64_t recording;
    {
      std::lock_guard<std::mutex> guard(x->lock);
      recording = x->enqueued;
    }
    x->waitFor(recording);
  }
  auto msOf = [](EventState &x) {
    std::lock_guard<std::mutex> guard(x.lock);
    return x.ms;
  };
  return msOf(*b) - msOf(*a);
}

void synchronizeStream(Stream s) {
  if (s)
    workerOf(s)->synchronize();
}

void synchronizeDevice() {
  std::vector<HostStream *> streams;
  {
    StreamRegistry &r = registry();
    std::lock_guard<std::mutex> guard(r.lock);
    streams = r.streams;
  }
  for (HostStream *s : streams)
    s->synchronize();
}

} // namespace mist::rt::device
