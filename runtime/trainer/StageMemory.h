//===- StageMemory.h - Where every buffer of a stage lives ----------------===//
/// \file
/// The generated region functions read and write buffers through Frames
/// (one per layer, one global for pre and post); this class owns the device
/// arrays behind them, by role, so that memory matches what the performance
/// model counts:
/// - parameters and their gradient buffers: one copy per layer, for the
///   whole run (the parameter store moves, gathers and offloads them); the
///   gradient buffers of one parameter are one array (the ops accumulate),
///   and where the step sums them in place (no ZeRO-2, no gradient
///   offload) a layer's gradients are consecutive in one allocation, so its
///   reduction over dp is one collective;
/// - saved activations (what the forward writes and the backward reads):
///   one set per slot, and as many slots as the stage's 1F1B order keeps
///   micro-batches between forward and backward. A micro-batch's forward
///   computes straight into its slot and its backward reads from there:
///   nothing is copied, and a checkpointed layer's slot keeps only its input
///   between the two;
/// - scratch (the forward's intermediates that no backward reads, and the
///   activation gradients): the emitter places each in the arena of the
///   run kind that uses it (forward or backward of pre, layer or post) by
///   liveness (BufferSpec::scratchRun / scratchOffset), and an arena is held
///   only while such a run goes on (enter / leave);
/// - handed on (the activation a run passes to the next, and the gradient):
///   allocated by the run right before the op writing it, then moved from
///   run to run by the runner (StageRunner::handIn / handOut): nothing here
///   holds it.
/// Saved activations are freed right after the backward op that reads them
/// last (Frame::release in train.cu; freeLayerSaved and freeGlobalSaved
/// catch the rest) and refilled when the slot's next forward begins; a
/// checkpointed layer's dropped ones are allocated as its forward or
/// recompute writes them (Frame::allocate). So memory is what the
/// performance model counts phase by phase: states, the saved activations
/// of the micro-batches in flight, and the running region's working set.
/// Slots are allocated when the trainer starts, so a plan whose activations
/// do not fit stops at once with the sizes (device::allocate); but the
/// layers' part of a slot under activation offload, or of an interleaved
/// stage (whose micro-batches in flight hold only the chunks they have been
/// through, as the model counts them), gets memory as forwards begin.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/trainer/Trainer.h"

namespace mist::rt {

enum class BufferRole { Parameter, Saved, Scratch };

class StageMemory {
public:
  StageMemory(const StageSpec &stage, int slots);
  StageMemory(const StageMemory &) = delete;
  StageMemory &operator=(const StageMemory &) = delete;

  Frame &global() { return globalFrame; }
  std::vector<Frame> &layers() { return layerFrames; }
  BufferRole role(int buffer) const { return roles[size_t(buffer)]; }

  int slots() const { return int(slotArrays.size()); }
  /// Points every frame's activation buffers at slot `slot`'s arrays.
  void bindSlot(int slot);
  /// Gives the bound slot memory again for every saved activation a
  /// backward freed (but a checkpointed layer's recomputed buffers, which
  /// its forward allocates): a forward is about to fill it. With `frame` (0
  /// global, 1 + l layer l) only that frame's: with activation offload a
  /// layer's memory comes back when its forward begins.
  void refillSlot(int frame = -1);
  /// Frees saved activations of the bound slot once the backward that
  /// reads them is done: a layer's, the global ones post's backward alone
  /// reads (StageSpec::freedAfterPostBackward), or all global ones.
  void freeLayerSaved(int layer);
  void freeGlobalSaved(const std::vector<int> &buffers);
  void freeGlobalSaved();

  /// A region's forward (or recompute) or backward run begins: its scratch
  /// arena is allocated and the frames' scratch buffers point into it;
  /// `leave` frees it once the run's outputs have been read.
  void enter(RegionKind region, bool forward);
  void leave(RegionKind region, bool forward);
  /// The float saved-activation arrays of a slot (every layer's and the global
  /// ones; a checkpointed layer's dropped buffers are empty between its
  /// forward and its recompute): what the stash offloads.
  /// With `frame` (0 global, 1 + l layer l's) that frame's only.
  std::vector<DeviceTensor *> slotFloats(int slot, int frame = -1);
  /// Bytes of one slot's activations as allocated at start (the buffers a
  /// checkpointed layer drops are not allocated until its forward runs).
  size_t slotBytes() const { return bytesPerSlot; }
  /// Bytes of the scratch (the largest arena, plus any buffer without an
  /// offset), and of the parameters and their gradient buffers.
  size_t scratchBytes() const;
  size_t parameterBytes() const { return bytesOf(parameters); }

  /// Buffers a checkpointed layer drops after its forward and recomputes
  /// before its backward: its activations but its input.
  const std::vector<int> &recomputed() const { return recomputedBuffers; }

private:
  /// The arrays of one role: [frame][buffer], frame 0 the global one, 1 +
  /// l layer l's.
  struct Arrays {
    std::vector<std::vector<DeviceTensor>> floats;
    std::vector<std::vector<DeviceArray<int32_t>>> ids;
  };
  Arrays makeArrays(BufferRole role, bool allocateRecomputed);
  static size_t bytesOf(const Arrays &arrays);
  /// Whether buffer b is what a run hands to the next (an activation or
  /// gradient between regions): the runner moves it, nothing holds it.
  bool handedOn(int b) const;
  void bind(Arrays &arrays, BufferRole role);

  const StageSpec &spec;
  std::vector<BufferRole> roles;
  /// A parameter's second gradient buffer (a weight tied between pre and
  /// post on one stage) shares the first one's array: the ops accumulate.
  std::vector<int> aliasOf;
  std::vector<int> recomputedBuffers;
  std::vector<bool> recomputedMask; ///< by buffer: in recomputedBuffers
  std::vector<bool> selectiveMask;  ///< by buffer: in StageSpec::selectiveBuffers
  /// Whether buffer b of frame f (0 global, 1 + l layer l) is one a
  /// checkpointed layer drops between its forward and its recompute, or a
  /// layer that recomputes selectively between its forward and backward.
  bool droppedBetweenPasses(size_t f, size_t b) const {
    if (f == 0)
      return false; // the global frame's
    const bool checkpointed = int(f) - 1 >= spec.layers - spec.ckptLayers;
    return checkpointed ? recomputedMask[b] : spec.selectiveRecompute && selectiveMask[b];
  }
  void freeGlobal(size_t b);  ///< a saved global buffer of the bound slot
  Arrays parameters, scratch; ///< scratch: views into the arenas, or own arrays
  /// Per layer, its weight gradients in one array (views of it in
  /// `parameters`), where they are summed in place for the whole step: a
  /// region's gradients are then one buffer, reduced over dp by one
  /// collective as the model prices it (GradientSums).
  std::vector<DeviceArray<std::byte>> layerGradients;
  /// Whether buffer b is a layer parameter's gradient kept in layerGradients.
  bool inLayerGradients(size_t b) const;
  void placeLayerGradients();
  DeviceArray<std::byte> arenas[6]; ///< per run kind (2 x region + backward), held during it
  int boundSlot = 0;
  std::vector<Arrays> slotArrays;
  Frame globalFrame;
  std::vector<Frame> layerFrames;
  size_t bytesPerSlot = 0;
};

} // namespace mist::rt
