//===- HostDevice.h - Functions compiled for the GPU and the CPU ----------===//
/// \file
/// `MIST_HOST_DEVICE` marks a kernel's per-element formula that nvcc compiles
/// for the device (the kernel calls it) and the C++ compiler for the host,
/// where tests/unit/KernelMathTest.cpp checks it against the reference: the
/// GPU's arithmetic tested on a machine without a GPU.
//===----------------------------------------------------------------------===//
#pragma once

#if defined(__CUDACC__)
#define MIST_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MIST_HOST_DEVICE inline
#endif
