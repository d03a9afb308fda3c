# cuDNN and the cuDNN frontend's headers, for the bf16 attention on cuDNN
# (stdlib/kernels/attention/AttentionCudnn.cpp). Included by
# stdlib/kernels/CMakeLists.txt where the CUDA kernels are built. Sets
# MIST_HAVE_CUDNN (ON when both are found) and, then, MIST_CUDNN_INCLUDE_DIR,
# MIST_CUDNN_LIBRARY and MIST_CUDNN_FRONTEND_INCLUDE_DIR. Without them the file
# compiles as a stub whose entry points answer "unsupported", and bf16
# attention runs the fp32 kernels.
#
# cuDNN (headers and library from one install): MIST_CUDNN_ROOT if set, else
# the first of: the Python package nvidia.cudnn (PyTorch's pip dependency:
# include/ and lib/, the library possibly only as libcudnn.so.9), the CUDA
# toolkit, the system. The frontend is header-only (cudnn_frontend.h, from
# PyPI's nvidia-cudnn-frontend wheel): MIST_CUDNN_FRONTEND_INCLUDE if set,
# else /opt/cudnn-frontend/include (scripts/setup.sh puts it there),
# bench/gpu/work/cudnn-frontend/include (bench/gpu/prepare.sh copies it there
# for the GPU host), the include/ folder of Python's site-packages (where pip
# installs the wheel), the cuDNN include folder, the system.
set(MIST_CUDNN_ROOT "" CACHE PATH
    "cuDNN install to use (include/ and lib/ or lib64/); empty: search (cmake/MistCudnn.cmake)")
set(MIST_CUDNN_FRONTEND_INCLUDE "" CACHE PATH
    "folder holding cudnn_frontend.h; empty: search (cmake/MistCudnn.cmake)")
option(MIST_CUDNN "Run bf16 attention on cuDNN when cuDNN and its frontend are found" ON)

set(MIST_HAVE_CUDNN OFF)
if(NOT MIST_CUDNN)
  message(STATUS "cuDNN attention: off (MIST_CUDNN=OFF): bf16 attention runs the fp32 kernels")
  return()
endif()

# Where Python's packages are: nvidia.cudnn (cuDNN) and site-packages/include (the frontend).
set(pythonCudnn "")
set(pythonInclude "")
find_program(MIST_PYTHON3 python3)
mark_as_advanced(MIST_PYTHON3)
if(MIST_PYTHON3)
  execute_process(
    COMMAND ${MIST_PYTHON3} -c "import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])"
    OUTPUT_VARIABLE pythonCudnn OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  execute_process(
    COMMAND ${MIST_PYTHON3} -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    OUTPUT_VARIABLE pythonPurelib OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(pythonPurelib)
    set(pythonInclude ${pythonPurelib}/include)
  endif()
endif()

# The cuDNN install: the first root with both cudnn.h and the library, so the
# headers and the library always come from the same one.
if(MIST_CUDNN_ROOT)
  set(roots ${MIST_CUDNN_ROOT})
else()
  set(roots ${pythonCudnn} ${CUDAToolkit_LIBRARY_ROOT})
  foreach(dir ${CUDAToolkit_INCLUDE_DIRS})
    get_filename_component(parent ${dir} DIRECTORY)
    list(APPEND roots ${parent})
  endforeach()
  list(APPEND roots /usr /usr/local)
endif()
set(MIST_CUDNN_INCLUDE_DIR "")
set(MIST_CUDNN_LIBRARY "")
foreach(root ${roots})
  set(include "")
  foreach(dir ${root}/include ${root}/include/${CMAKE_LIBRARY_ARCHITECTURE})
    if(EXISTS ${dir}/cudnn.h AND EXISTS ${dir}/cudnn_version.h)
      set(include ${dir})
      break()
    endif()
  endforeach()
  if(NOT include)
    continue()
  endif()
  # find_library's result is cached: forget the previous root's.
  unset(MIST_CUDNN_LIBRARY_PATH CACHE)
  find_library(MIST_CUDNN_LIBRARY_PATH NAMES cudnn libcudnn.so.9
    PATHS ${root}/lib ${root}/lib64 ${root}/lib/${CMAKE_LIBRARY_ARCHITECTURE} NO_DEFAULT_PATH)
  if(MIST_CUDNN_LIBRARY_PATH)
    set(MIST_CUDNN_INCLUDE_DIR ${include})
    set(MIST_CUDNN_LIBRARY ${MIST_CUDNN_LIBRARY_PATH})
    break()
  endif()
endforeach()
unset(MIST_CUDNN_LIBRARY_PATH CACHE)

# "X.Y.Z" from a header's `#define <PREFIX><PART><SUFFIX> N` lines, one per
# part; "" when the header is missing.
function(mist_header_version header prefix suffix parts out)
  set(version "")
  if(EXISTS ${header})
    file(STRINGS ${header} lines REGEX "^#define ${prefix}[A-Z]+${suffix} +[0-9]+")
    foreach(part ${parts})
      string(REGEX MATCH "${prefix}${part}${suffix} +([0-9]+)" unused "${lines}")
      list(APPEND version ${CMAKE_MATCH_1})
    endforeach()
    list(JOIN version "." version)
  endif()
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

set(cudnnVersion "")
if(MIST_CUDNN_INCLUDE_DIR)
  mist_header_version(${MIST_CUDNN_INCLUDE_DIR}/cudnn_version.h CUDNN_ ""
    "MAJOR;MINOR;PATCHLEVEL" cudnnVersion)
endif()

# The frontend: a folder with cudnn_frontend.h and its cudnn_frontend/ tree.
set(frontendIncludes "")
if(MIST_CUDNN_FRONTEND_INCLUDE)
  set(frontendCandidates ${MIST_CUDNN_FRONTEND_INCLUDE})
else()
  set(frontendCandidates /opt/cudnn-frontend/include
      ${PROJECT_SOURCE_DIR}/bench/gpu/work/cudnn-frontend/include ${pythonInclude}
      ${MIST_CUDNN_INCLUDE_DIR} /usr/include /usr/local/include)
endif()
foreach(dir ${frontendCandidates})
  if(EXISTS ${dir}/cudnn_frontend.h AND EXISTS ${dir}/cudnn_frontend/graph_interface.h)
    set(frontendIncludes ${dir})
    break()
  endif()
endforeach()
set(frontendVersion "")
if(frontendIncludes)
  mist_header_version(${frontendIncludes}/cudnn_frontend_version.h CUDNN_FRONTEND_ _VERSION
    "MAJOR;MINOR;PATCH" frontendVersion)
endif()

set(fallback "bf16 attention runs the fp32 kernels")
if(NOT MIST_CUDNN_LIBRARY)
  list(JOIN roots ", " rootList)
  message(STATUS "cuDNN attention: no cuDNN found (cudnn.h and libcudnn under ${rootList}; "
                 "set MIST_CUDNN_ROOT): ${fallback}")
elseif(NOT cudnnVersion MATCHES "^9\\.")
  message(STATUS "cuDNN attention: cuDNN ${cudnnVersion} in ${MIST_CUDNN_INCLUDE_DIR} is not "
                 "cuDNN 9: ${fallback}")
elseif(NOT frontendIncludes)
  list(JOIN frontendCandidates ", " frontendList)
  message(STATUS "cuDNN attention: cuDNN ${cudnnVersion} found (${MIST_CUDNN_LIBRARY}) but not "
                 "the cuDNN frontend headers (cudnn_frontend.h under ${frontendList}; "
                 "scripts/setup.sh fetches them, or set MIST_CUDNN_FRONTEND_INCLUDE): ${fallback}")
else()
  set(MIST_HAVE_CUDNN ON)
  set(MIST_CUDNN_FRONTEND_INCLUDE_DIR ${frontendIncludes})
  message(STATUS "cuDNN attention: cuDNN ${cudnnVersion} (${MIST_CUDNN_LIBRARY}), cuDNN frontend "
                 "${frontendVersion} (${frontendIncludes})")
endif()
