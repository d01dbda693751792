# Finds libpfm4 (Debian: libpfm4-dev) and defines PFM::pfm.
find_path(PFM_INCLUDE_DIR perfmon/pfmlib.h)
find_library(PFM_LIBRARY pfm)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(PFM REQUIRED_VARS PFM_LIBRARY PFM_INCLUDE_DIR)
if(PFM_FOUND AND NOT TARGET PFM::pfm)
  add_library(PFM::pfm UNKNOWN IMPORTED)
  set_target_properties(PFM::pfm PROPERTIES IMPORTED_LOCATION "${PFM_LIBRARY}"
                                            INTERFACE_INCLUDE_DIRECTORIES "${PFM_INCLUDE_DIR}")
endif()
mark_as_advanced(PFM_INCLUDE_DIR PFM_LIBRARY)
