# `cmake --install BUILD --prefix PREFIX` (docs/install.md): mistc and the
# profilers, the standard model library and the cluster presets, and the CPU
# trainer runtime (headers, static libraries and a CMake package), laid out
# as tools/mistc/InstallLayout.h expects, so an installed mistc and the
# train.cu files it writes need nothing of the source or build tree.
include(GNUInstallDirs)
set(MIST_INSTALL_SHARE ${CMAKE_INSTALL_DATADIR}/mist)
set(MIST_INSTALL_LIB ${CMAKE_INSTALL_LIBDIR}/mist)
set(MIST_INSTALL_INCLUDE ${CMAKE_INSTALL_INCLUDEDIR}/mist)

foreach(tool mistc mist-data mist-profile-cpu mist-profile mist-bench-kernels)
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/stdlib/models/ DESTINATION ${MIST_INSTALL_SHARE}/models
  FILES_MATCHING PATTERN "*.mist")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/stdlib/clusters/
  DESTINATION ${MIST_INSTALL_SHARE}/clusters FILES_MATCHING PATTERN "*.yaml")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${MIST_INSTALL_SHARE}/examples
  FILES_MATCHING PATTERN "*.mist" PATTERN "*.yaml")

# The runtime a train.cu includes (its headers keep their paths under
# include/mist) and links (the libraries in MIST_CPU_TRAINER_LIBS's order).
foreach(dir runtime schedule format stdlib/kernels)
  get_filename_component(parent ${dir} DIRECTORY)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${MIST_INSTALL_INCLUDE}/${parent}
    FILES_MATCHING PATTERN "*.h")
endforeach()
install(TARGETS ${MIST_CPU_TRAINER_LIBS} ARCHIVE DESTINATION ${MIST_INSTALL_LIB})

# find_package(mistrt): the imported target mistrt::cpu-trainer.
list(TRANSFORM MIST_CPU_TRAINER_LIBS REPLACE "(.+)" "$<TARGET_FILE_NAME:\\1>"
  OUTPUT_VARIABLE MIST_INSTALLED_LIB_NAMES)
list(JOIN MIST_INSTALLED_LIB_NAMES ";" MIST_INSTALLED_LIB_NAMES)
separate_arguments(MIST_KERNELS_LINK_LIST UNIX_COMMAND "${MIST_CPU_KERNELS_LINK}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/mistrtConfig.cmake.in
  ${PROJECT_BINARY_DIR}/mistrtConfig.cmake.pre @ONLY)
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/mistrtConfig.cmake
  INPUT ${PROJECT_BINARY_DIR}/mistrtConfig.cmake.pre)
install(FILES ${PROJECT_BINARY_DIR}/mistrtConfig.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mistrt)
