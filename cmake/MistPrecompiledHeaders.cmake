# Precompiled headers for the compiler's C++ targets. Every translation unit
# above support/ includes GiNaC (through ir/SymExpr.h), LLVM's ADT and fmt,
# and parsing them is about 3 s of each file's compile time at -O2; compiling
# them once per target halves a clean build (what CI does twice, once with
# sanitizers). -DMIST_PCH=OFF compiles every file on its own.
option(MIST_PCH "Precompile GiNaC, LLVM ADT and fmt headers for the compiler's targets" ON)

function(mist_precompile_compiler_headers target)
  if(NOT MIST_PCH)
    return()
  endif()
  # CXX only: a target's CUDA sources, if any, parse their own includes.
  set(headers <ginac/ginac.h> <llvm/ADT/SmallVector.h> <llvm/ADT/StringRef.h>
      <llvm/ADT/DenseMap.h> <llvm/Support/raw_ostream.h> <fmt/format.h>
      <map> <memory> <optional> <string> <vector>)
  # GCC 12 loses the system-header mark of <string>'s code when it comes from
  # a PCH, so its known std::string false positives (GCC bugs 105329, 105651;
  # fixed in 13) fire at our call sites: warnings there, not errors.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wno-error=array-bounds -Wno-error=stringop-overflow>)
  endif()
  foreach(header IN LISTS headers)
    string(REPLACE ">" "$<ANGLE-R>" header "${header}")
    target_precompile_headers(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${header}>")
  endforeach()
endfunction()
