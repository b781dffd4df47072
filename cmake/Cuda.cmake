# The CUDA executor's toolchain (VGPU_CUDA=ON; docs/cuda.md): enables the CUDA language and finds
# the CUDA runtime, cuBLAS, cuBLASLt and cuDNN either on the system (/usr/local/cuda, the
# default search paths) or in NVIDIA's Python packages (VGPU_CUDA_PACKAGES = the site-packages/
# nvidia folder holding cu13/ and cudnn/; scripts/build_cuda.sh passes it). The packages ship
# only versioned libraries (libcudart.so.13, libcudnn.so.9, ...), so every library is linked by
# its full path. Defines:
#   vgpu_cuda_headers    INTERFACE: the CUDA/cuDNN include folders, for the CUDA layer's own
#                        sources only (the CPU layers' command lines stay as without CUDA);
#   vgpu_cuda_libraries  INTERFACE: link-only, the four libraries by full path;
#   VGPU_CUDA_RPATH      the folders holding them (RPATH of the executables that link them).
set(VGPU_CUDA_PACKAGES "" CACHE PATH
    "site-packages/nvidia folder of NVIDIA's Python packages (cu13/, cudnn/); empty: the system's toolkit")
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)  # H200 (sm_90); override with -DCMAKE_CUDA_ARCHITECTURES=...
endif()
set(_vgpu_cuda_hints "")
if(VGPU_CUDA_PACKAGES)
  if(NOT EXISTS "${VGPU_CUDA_PACKAGES}/cu13/bin/nvcc")
    message(FATAL_ERROR "VGPU_CUDA_PACKAGES=${VGPU_CUDA_PACKAGES} holds no cu13/bin/nvcc "
            "(pip install 'nvidia-cuda-nvcc==13.0.*'; scripts/build_cuda.sh does)")
  endif()
  if(NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER "${VGPU_CUDA_PACKAGES}/cu13/bin/nvcc")
  endif()
  list(APPEND _vgpu_cuda_hints "${VGPU_CUDA_PACKAGES}/cu13" "${VGPU_CUDA_PACKAGES}/cudnn")
  # The packages' nvcc.profile names lib64/, but they install lib/: CMake's compiler check links
  # (with the static runtime) only if told where it is.
  if(NOT CMAKE_CUDA_FLAGS MATCHES "cu13/lib")
    string(APPEND CMAKE_CUDA_FLAGS " -L${VGPU_CUDA_PACKAGES}/cu13/lib")
  endif()
endif()
if(NOT CMAKE_CUDA_HOST_COMPILER)
  set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}")
endif()
# The runtime is linked by full path below (the packages have no libcudart.so, only .so.13).
set(CMAKE_CUDA_RUNTIME_LIBRARY None)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
if(CCACHE_PROGRAM)
  set(CMAKE_CUDA_COMPILER_LAUNCHER "${CCACHE_PROGRAM}")
endif()
enable_language(CUDA)
get_filename_component(_vgpu_nvcc_root "${CMAKE_CUDA_COMPILER}" DIRECTORY)
get_filename_component(_vgpu_nvcc_root "${_vgpu_nvcc_root}" DIRECTORY)
list(APPEND _vgpu_cuda_hints "${_vgpu_nvcc_root}" /usr/local/cuda)

# vgpu_find_cuda_library(<var> <what> <names...>): the full path of the first of `names` found.
function(vgpu_find_cuda_library var what)
  find_library(${var} NAMES ${ARGN} HINTS ${_vgpu_cuda_hints}
               PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
  if(NOT ${var})
    message(FATAL_ERROR "VGPU_CUDA: ${what} not found (looked for ${ARGN} under "
            "${_vgpu_cuda_hints} and the system's paths); pass -DVGPU_CUDA_PACKAGES=<site-packages>/nvidia "
            "or run scripts/build_cuda.sh")
  endif()
endfunction()
vgpu_find_cuda_library(VGPU_CUDART_LIBRARY "the CUDA runtime" libcudart.so.13 cudart)
vgpu_find_cuda_library(VGPU_CUBLAS_LIBRARY "cuBLAS" libcublas.so.13 cublas)
vgpu_find_cuda_library(VGPU_CUBLASLT_LIBRARY "cuBLASLt" libcublasLt.so.13 cublasLt)
vgpu_find_cuda_library(VGPU_CUDNN_LIBRARY "cuDNN 9" libcudnn.so.9 cudnn)
find_path(VGPU_CUDNN_INCLUDE_DIR cudnn.h HINTS ${_vgpu_cuda_hints} PATH_SUFFIXES include)
find_path(VGPU_CUDA_INCLUDE_DIR cuda_runtime_api.h HINTS ${_vgpu_cuda_hints}
          ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES} PATH_SUFFIXES include)
if(NOT VGPU_CUDNN_INCLUDE_DIR OR NOT VGPU_CUDA_INCLUDE_DIR)
  message(FATAL_ERROR "VGPU_CUDA: cuda_runtime_api.h or cudnn.h not found under ${_vgpu_cuda_hints}")
endif()

add_library(vgpu_cuda_headers INTERFACE)
target_include_directories(vgpu_cuda_headers SYSTEM INTERFACE
  "${VGPU_CUDA_INCLUDE_DIR}" "${VGPU_CUDA_INCLUDE_DIR}/cccl" "${VGPU_CUDNN_INCLUDE_DIR}")
target_compile_options(vgpu_cuda_headers INTERFACE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall>)

add_library(vgpu_cuda_libraries INTERFACE)
target_link_libraries(vgpu_cuda_libraries INTERFACE
  "${VGPU_CUDNN_LIBRARY}" "${VGPU_CUBLASLT_LIBRARY}" "${VGPU_CUBLAS_LIBRARY}"
  "${VGPU_CUDART_LIBRARY}" ${CMAKE_DL_LIBS})
set(VGPU_CUDA_RPATH "")
foreach(_vgpu_lib "${VGPU_CUDART_LIBRARY}" "${VGPU_CUBLAS_LIBRARY}" "${VGPU_CUDNN_LIBRARY}")
  get_filename_component(_vgpu_dir "${_vgpu_lib}" DIRECTORY)
  list(APPEND VGPU_CUDA_RPATH "${_vgpu_dir}")
endforeach()
list(REMOVE_DUPLICATES VGPU_CUDA_RPATH)

# vgpu_cuda_executable(<target>): links the CUDA libraries into an executable with an RPATH to
# their folders. DT_RPATH (not RUNPATH) because cuDNN dlopens its sub-libraries
# (libcudnn_cnn.so.9, ...) by name, and only an executable's DT_RPATH reaches those.
function(vgpu_cuda_executable target)
  target_link_libraries(${target} PRIVATE vgpu_cuda_libraries)
  target_link_options(${target} PRIVATE -Wl,--disable-new-dtags)
  set_target_properties(${target} PROPERTIES BUILD_RPATH "${VGPU_CUDA_RPATH}"
                        INSTALL_RPATH "${VGPU_CUDA_RPATH}")
endfunction()
message(STATUS "CUDA executor: nvcc ${CMAKE_CUDA_COMPILER_VERSION} for sm_${CMAKE_CUDA_ARCHITECTURES}; "
        "libraries in ${VGPU_CUDA_RPATH}")
