# oneDNN for the CPU executor's convolution and matmul kernels (VGPU_ONEDNN, default ON), from
# the PyPI wheels onednn-cpu-gomp + onednn-devel-cpu-gomp (scripts/setup.sh installs them): they
# put libdnnl.so.3 in <prefix>/lib, its headers in <prefix>/include and its CMake package in
# <prefix>/lib/cmake/dnnl, <prefix> being the Python environment's data prefix (the venv).
# VGPU_ONEDNN_PREFIX overrides where to look. Defines:
#   VGPU_ONEDNN_SOURCES_FLAGS  applied to the sources that include oneDNN (plugin/CMakeLists.txt):
#                              only they see its headers and VGPU_HAVE_ONEDNN=1, so every other
#                              object of the project compiles exactly as without oneDNN;
#   vgpu_onednn_link           an INTERFACE target that links libdnnl and GNU OpenMP;
#   VGPU_ONEDNN_INSTALL_RPATH  "" or the RPATH entry, relative to a module installed in a folder
#                              of site-packages, of <prefix>/lib (where the wheel put libdnnl).
add_library(vgpu_onednn_link INTERFACE)
set(VGPU_ONEDNN_INSTALL_RPATH "")
set(VGPU_ONEDNN_INCLUDE_DIR "")
if(VGPU_ONEDNN)
  if(NOT VGPU_ONEDNN_PREFIX)
    execute_process(
      COMMAND "${Python_EXECUTABLE}" -c "import sysconfig; print(sysconfig.get_path('data'))"
      OUTPUT_VARIABLE VGPU_ONEDNN_PREFIX OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  find_package(dnnl 3 CONFIG QUIET PATHS "${VGPU_ONEDNN_PREFIX}/lib/cmake/dnnl" NO_DEFAULT_PATH)
  if(NOT dnnl_FOUND)
    message(FATAL_ERROR "oneDNN 3.x not found under '${VGPU_ONEDNN_PREFIX}' (pip install "
            "onednn-cpu-gomp onednn-devel-cpu-gomp; scripts/setup.sh does), or configure with "
            "-DVGPU_ONEDNN=OFF to run the CPU executor on Eigen alone")
  endif()
  if(NOT DNNL_CPU_RUNTIME STREQUAL "OMP")
    message(FATAL_ERROR "oneDNN at ${VGPU_ONEDNN_PREFIX} uses the ${DNNL_CPU_RUNTIME} runtime; "
            "the CPU executor sizes its OpenMP threads and needs the GNU OpenMP build "
            "(onednn-cpu-gomp)")
  endif()
  get_target_property(VGPU_ONEDNN_INCLUDE_DIR DNNL::dnnl INTERFACE_INCLUDE_DIRECTORIES)
  # libgomp: oneDNN's threads; the executor calls omp_set_num_threads itself (no -fopenmp:
  # Eigen would change behaviour under it).
  # Link only: its include folder (the venv's) must not reach the other objects' command lines.
  target_link_libraries(vgpu_onednn_link INTERFACE $<LINK_ONLY:DNNL::dnnl> gomp)
  set(VGPU_ONEDNN_INSTALL_RPATH "$ORIGIN/../../..")
  message(STATUS "oneDNN ${dnnl_VERSION} (${DNNL_CPU_RUNTIME}) at ${VGPU_ONEDNN_PREFIX}")
endif()

# vgpu_onednn_sources(<files...>): compiles `files` (those that include oneDNN's headers) with
# them and with VGPU_HAVE_ONEDNN=1 when VGPU_ONEDNN is on.
function(vgpu_onednn_sources)
  if(VGPU_ONEDNN)
    set_source_files_properties(${ARGN} PROPERTIES
      COMPILE_DEFINITIONS VGPU_HAVE_ONEDNN=1
      INCLUDE_DIRECTORIES "${VGPU_ONEDNN_INCLUDE_DIR}")
  endif()
endfunction()
