//===- Streams.h - The four streams a stage's work runs on ----------------===//
/// \file
/// Every piece of a stage's work runs on one of the four streams the
/// performance model prices (perfmodel: compute, g2g for collectives and
/// pipeline messages, h2d and d2h for offload copies), and work on one
/// stream that needs another's result waits for an event recorded there.
/// Streams are device streams (runtime/device/Device.h): on GPU ranks CUDA
/// streams, where `run` only enqueues. On CPU ranks compute is the calling
/// thread; the others run there too, in program order (which satisfies
/// every event by construction), or, made concurrent (the trainer's
/// --overlap), each on a thread of its own, ordered only by the events: the
/// work a concurrent `run` is given must then own what it captures, unless
/// it is fenced (runFenced: compute waits for it at once). Each piece
/// of work is bracketed by timing events for the measured timeline
/// (--trace), one row per stream as in --emit=timeline.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Streams.h"
#include "runtime/device/Device.h"
#include "runtime/trainer/TraceWriter.h"
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mist::rt {

/// The performance model's streams (format/Streams.h), named as in cluster
/// files and in both timelines.
using StreamKind = mist::Stream;
constexpr int streamCount = int(mist::numStreams);

/// A point in one stream's work: everything enqueued on it before `record`.
struct Event {
  StreamKind stream = StreamKind::Compute;
  std::shared_ptr<void> handle; ///< the device event; null until recorded
  bool recorded() const { return bool(handle); }
};

class Streams {
public:
  /// Creates the four device streams; the compute stream becomes current.
  /// `concurrent`: on CPU ranks, g2g, h2d and d2h run on threads of their own.
  explicit Streams(bool concurrent = false);
  ~Streams();
  Streams(const Streams &) = delete;
  Streams &operator=(const Streams &) = delete;

  /// The step's clock starts; the previous step's timings are dropped.
  void beginStep();
  /// Enqueues `work` on `stream` (it runs there after the work of every
  /// event the stream waits for); the ops and copies it calls go to that
  /// stream, and the compute stream is current again afterwards.
  void run(StreamKind stream, const std::string &name, const std::function<void()> &work);
  /// `run` ordered with the compute stream on both sides: after the compute
  /// work enqueued so far, and before any compute work enqueued later. For
  /// copies and collectives that read or write the buffers the regions use.
  void runFenced(StreamKind stream, const std::string &name, const std::function<void()> &work);
  Event record(StreamKind stream);
  /// Later work on `stream` starts after `event`'s work is done.
  void wait(StreamKind stream, const Event &event);
  /// Returns when the work of every stream is done.
  void synchronize();
  /// The work run since beginStep, with when; call after synchronize.
  std::vector<TraceEvent> events() const;

private:
  struct Timed {
    std::string name;
    StreamKind stream;
    size_t begin, end; ///< indices into `marks`
  };
  device::EventHandle mark(StreamKind stream);
  device::Stream streams[streamCount] = {};
  std::vector<device::EventHandle> marks; ///< timing events, reused every step
  size_t marksUsed = 0;
  std::vector<Timed> timed;
};

} // namespace mist::rt
