# Helpers shared by the per-folder CMakeLists: one library per folder, sources globbed so that a
# new probe or operator file needs no CMake edit, and ISA flags chosen by file-name suffix.

# Files named *_avx512.cpp, *_avx2.cpp or *_sse.cpp get that ISA's flags; the probe selects among
# them at run time by CPUID, so the rest of the binary stays baseline x86-64.
function(rafter_isa_flags)
  foreach(src IN LISTS ARGN)
    if(src MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
        "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16;-mavx512vnni;-mfma")
    elseif(src MATCHES "_avx512fp16\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
        "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512fp16;-mfma")
    elseif(src MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mavxvnni")
    elseif(src MATCHES "_sse\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-msse4.1")
    endif()
  endforeach()
endfunction()

# rafter_library(NAME folder CPU_GLOBS... [CUDA_GLOBS ...])
function(rafter_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;CUDA_SOURCES;DEPS;CUDA_DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${ARG_SOURCES})
  if(RAFTER_HAVE_CUDA AND ARG_CUDA_SOURCES)
    file(GLOB_RECURSE cuda_srcs CONFIGURE_DEPENDS ${ARG_CUDA_SOURCES})
    list(APPEND srcs ${cuda_srcs})
  endif()
  if(NOT srcs)  # a folder whose sources are not written yet still configures
    file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/rafter_${name}_empty.cpp "// no sources yet\n")
    set(srcs ${CMAKE_CURRENT_BINARY_DIR}/rafter_${name}_empty.cpp)
  endif()
  rafter_isa_flags(${srcs})
  add_library(rafter_${name} STATIC ${srcs})
  add_library(rafter::${name} ALIAS rafter_${name})
  set_target_properties(rafter_${name} PROPERTIES OUTPUT_NAME rafter_${name} EXPORT_NAME ${name}
                                                  CUDA_SEPARABLE_COMPILATION OFF)
  target_include_directories(rafter_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>)
  target_link_libraries(rafter_${name} PUBLIC ${ARG_DEPS} PRIVATE $<BUILD_INTERFACE:rafter_warnings>)
  if(RAFTER_HAVE_CUDA)
    target_compile_definitions(rafter_${name} PUBLIC RAFTER_HAVE_CUDA=1)
    target_link_libraries(rafter_${name} PUBLIC ${ARG_CUDA_DEPS})
    target_compile_options(rafter_${name} PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo -Xcompiler=-Wall>)
  endif()
endfunction()
