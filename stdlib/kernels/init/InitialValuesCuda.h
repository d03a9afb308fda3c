//===- InitialValuesCuda.h - Initial parameter values drawn on the GPU ----===//
/// \file
/// out[i] = math::initialValueAt(a, i) for the local elements of one tensor
/// (InitialValuesMath.h): the GPU trainer draws a model's initial values in
/// milliseconds where the host's cores took minutes for billions of them.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/init/InitialValuesMath.h"

#include <cuda_runtime.h>

namespace mist::kernels {

cudaError_t initialValuesCuda(const InitialValuesArgs &a, cudaStream_t stream);

} // namespace mist::kernels
