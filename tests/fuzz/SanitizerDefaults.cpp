//===- SanitizerDefaults.cpp - Built-in LeakSanitizer suppressions ---------===//
/// \file
/// Linked into every executable of a MIST_FUZZ build (tests/fuzz/CMakeLists.txt),
/// so the fuzzers, mistc and the unit tests need no LSAN_OPTIONS.
///
/// CLN, GiNaC's number library, allocates a 26-byte string in a static
/// initializer (cln::cl_prin_globals_init_helper via cl_make_heap_string) and
/// never frees it: without this, every process reports that leak at exit and
/// libFuzzer blames whatever input triggers its first leak check. libcln has no
/// frame pointers, so the fast unwinder sees only malloc <- libcln.so and a
/// function-name pattern cannot match; the module is suppressed instead. The
/// price: a leak whose allocation stack passes through libcln (a CLN number
/// that mist code never frees) is hidden too.
//===----------------------------------------------------------------------===//

extern "C" const char *__lsan_default_suppressions() { return "leak:libcln.so\n"; }
