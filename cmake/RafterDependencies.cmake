# Finds rafter's dependencies, all from Debian packages (see README), through find_package/pkg-config.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
find_package(PAPI REQUIRED)
find_package(PFM REQUIRED)
find_package(dnnl QUIET CONFIG)
if(NOT dnnl_FOUND)
  message(FATAL_ERROR "oneDNN not found: install Debian's libdnnl-dev")
endif()

# MPI (Debian's libopenmpi-dev): optional. With it, the collector launches ranks under mpirun and the
# CPU collectives (probes/comm, workloads/mpi) are built; without it rafter is one rank of one.
option(RAFTER_MPI "Use MPI when it is found (rank launch, CPU collectives)" ON)
set(RAFTER_HAVE_MPI OFF)
if(RAFTER_MPI)
  # MPI's C API through the C++ compiler (rafter enables no C; consumers of the installed package
  # neither): the CXX component without the deprecated C++ bindings.
  set(MPI_CXX_SKIP_MPICXX ON)
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(RAFTER_HAVE_MPI ON)
    find_program(RAFTER_MPIEXEC NAMES mpirun mpiexec)
  endif()
endif()
message(STATUS "rafter: MPI ${RAFTER_HAVE_MPI}")
