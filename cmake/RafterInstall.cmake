# `cmake --install`: headers, libraries, data files and a package config for find_package(rafter).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS rafter_collector rafter_probes rafter_workloads rafter_roofline
        EXPORT rafterTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(dir collector probes workloads roofline)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/workloads/models ${PROJECT_SOURCE_DIR}/workloads/recipes
        DESTINATION ${CMAKE_INSTALL_DATADIR}/rafter)
install(EXPORT rafterTargets NAMESPACE rafter:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rafter)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/rafterConfig.cmake.in
  ${PROJECT_BINARY_DIR}/rafterConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rafter)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rafterConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rafterConfig.cmake ${PROJECT_BINARY_DIR}/rafterConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindPAPI.cmake ${PROJECT_SOURCE_DIR}/cmake/FindPFM.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rafter)
