# Enables CUDA for the whole tree when nvcc is found (GPU or not): the CUDA
# kernels (stdlib/kernels) and their tests (tests/gpu) are then built, so a
# machine without a GPU still proves they compile. Sets MIST_HAVE_CUDA.
# Included from the top-level CMakeLists.txt: CMake wants the language
# enabled in a scope that every directory using .cu files sees.
include(CheckLanguage)
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
check_language(CUDA)
set(MIST_HAVE_CUDA OFF)
if(CMAKE_CUDA_COMPILER)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  set(MIST_HAVE_CUDA ON)
endif()
# The GPU architectures the CUDA code is built for: A100 (80) and H100 (90a,
# Hopper's full instruction set; its code runs on sm_90 devices only). CI,
# which only proves the code compiles, builds 90a (scripts/build.sh).
set(MIST_CUDA_ARCHITECTURES "80;90a" CACHE STRING "CUDA architectures of the kernels and runtime")
