# Finds GiNaC (and its CLN dependency) through pkg-config; defines GiNaC::GiNaC.
find_package(PkgConfig REQUIRED)
pkg_check_modules(GINAC_PC QUIET IMPORTED_TARGET ginac)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(GiNaC REQUIRED_VARS GINAC_PC_FOUND VERSION_VAR GINAC_PC_VERSION)
if(GiNaC_FOUND AND NOT TARGET GiNaC::GiNaC)
  add_library(GiNaC::GiNaC ALIAS PkgConfig::GINAC_PC)
endif()
