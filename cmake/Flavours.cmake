# Build flavours of the layers `vgpu server` is made of. A flavour is an INTERFACE target,
# vgpu_flavour_<name>, that provides Abseil and Eigen to every layer compiled for it:
#   tensorflow  - TensorFlow's headers and libtensorflow_framework.so.2 (its Abseil, its Eigen);
#                 the plugin, vgpu._core and the C++ tests use it. Its targets have plain names.
#   standalone  - the system's static Abseil (Debian's libabsl-dev) and only the Eigen parts of
#                 TensorFlow's include folder; the `vgpu-server` executable uses it, which so
#                 links no TensorFlow library. Its targets end in _standalone.
# vgpu_add_layer defines one layer's static library for one flavour, so that a layer's sources
# and dependencies are written once whatever the number of flavours.

# The name of layer `base` in `flavour` (vgpu_server -> vgpu_server_standalone).
function(vgpu_layer_target out base flavour)
  if(flavour STREQUAL "tensorflow")
    set(${out} ${base} PARENT_SCOPE)
  else()
    set(${out} ${base}_${flavour} PARENT_SCOPE)
  endif()
endfunction()

# vgpu_add_layer(<base> FLAVOUR <flavour> SOURCES <files...> [LAYERS <base names...>]
#                [LIBRARIES <targets...>])
# A static library of `SOURCES` for `flavour`, linking the same flavour of each layer in LAYERS
# and the flavour-independent LIBRARIES (e.g. Threads::Threads).
function(vgpu_add_layer base)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "FLAVOUR" "SOURCES;LAYERS;LIBRARIES")
  if(NOT TARGET vgpu_flavour_${ARG_FLAVOUR})
    message(FATAL_ERROR "vgpu_add_layer(${base}): no flavour '${ARG_FLAVOUR}'")
  endif()
  vgpu_layer_target(target ${base} ${ARG_FLAVOUR})
  add_library(${target} STATIC ${ARG_SOURCES})
  set(layers "")
  foreach(layer IN LISTS ARG_LAYERS)
    vgpu_layer_target(layer_target ${layer} ${ARG_FLAVOUR})
    list(APPEND layers ${layer_target})
  endforeach()
  target_link_libraries(${target} PUBLIC vgpu_flavour_${ARG_FLAVOUR} ${layers} ${ARG_LIBRARIES})
endfunction()

# --- tensorflow ---------------------------------------------------------------------------
if(NOT VGPU_STANDALONE_ONLY)
  add_library(vgpu_flavour_tensorflow INTERFACE)
  target_link_libraries(vgpu_flavour_tensorflow INTERFACE vgpu_build_flags tensorflow_framework)
endif()

# --- standalone ---------------------------------------------------------------------------
if(VGPU_BUILD_STANDALONE_SERVER)
  # Abseil: the static archives of the system's Abseil. They are linked as one group (the
  # linker takes only the objects the server uses, in whatever order they need each other),
  # which is simpler and sturdier than mirroring Abseil's own target graph, whose CMake package
  # on Debian names the shared libraries.
  # (VGPU_ABSEIL_ROOT: another prefix, e.g. the GPU machine's .device-kit/abseil.)
  if(VGPU_ABSEIL_ROOT)
    find_path(VGPU_SYSTEM_ABSEIL_INCLUDE_DIR absl/base/config.h
              PATHS "${VGPU_ABSEIL_ROOT}/include" NO_DEFAULT_PATH)
    find_library(VGPU_SYSTEM_ABSEIL_BASE_LIBRARY libabsl_base.a
                 PATHS "${VGPU_ABSEIL_ROOT}/lib" NO_DEFAULT_PATH)
  else()
    find_path(VGPU_SYSTEM_ABSEIL_INCLUDE_DIR absl/base/config.h
              PATHS /usr/include /usr/local/include NO_DEFAULT_PATH)
    find_library(VGPU_SYSTEM_ABSEIL_BASE_LIBRARY libabsl_base.a)
  endif()
  if(NOT VGPU_SYSTEM_ABSEIL_INCLUDE_DIR OR NOT VGPU_SYSTEM_ABSEIL_BASE_LIBRARY)
    message(FATAL_ERROR "The standalone vgpu-server needs the system's static Abseil "
            "(apt-get install libabsl-dev; scripts/setup.sh does), or configure with "
            "-DVGPU_BUILD_STANDALONE_SERVER=OFF")
  endif()
  get_filename_component(_vgpu_abseil_lib_dir "${VGPU_SYSTEM_ABSEIL_BASE_LIBRARY}" DIRECTORY)
  file(GLOB _vgpu_abseil_archives "${_vgpu_abseil_lib_dir}/libabsl_*.a")
  message(STATUS "Standalone server: Abseil ${VGPU_SYSTEM_ABSEIL_INCLUDE_DIR}, "
          "static archives in ${_vgpu_abseil_lib_dir}")

  # Eigen: TensorFlow's include folder also holds its own Abseil, which must not shadow the
  # system's; a folder in the build tree links to just the parts the CPU kernels include.
  # (VGPU_EIGEN_INCLUDE_DIR: such a folder given ready-made, without TensorFlow installed.)
  if(VGPU_EIGEN_INCLUDE_DIR)
    set(_vgpu_eigen_dir "${VGPU_EIGEN_INCLUDE_DIR}")
  elseif(VGPU_STANDALONE_ONLY)
    message(FATAL_ERROR "VGPU_STANDALONE_ONLY needs VGPU_EIGEN_INCLUDE_DIR (Eigen/, unsupported/, "
            "xla/tsl/framework/convolution, tensorflow/core/kernels; scripts/prepare_device_kit.sh)")
  else()
    set(_vgpu_eigen_dir "${CMAKE_BINARY_DIR}/standalone-include")
    file(MAKE_DIRECTORY "${_vgpu_eigen_dir}/tensorflow/core")
    foreach(_vgpu_part Eigen unsupported xla tensorflow/core/kernels)
      file(CREATE_LINK "${VGPU_TF_DIR}/include/${_vgpu_part}" "${_vgpu_eigen_dir}/${_vgpu_part}"
           SYMBOLIC)
    endforeach()
  endif()

  add_library(vgpu_flavour_standalone INTERFACE)
  target_link_libraries(vgpu_flavour_standalone INTERFACE vgpu_build_flags
    -Wl,--start-group ${_vgpu_abseil_archives} -Wl,--end-group)
  target_include_directories(vgpu_flavour_standalone SYSTEM INTERFACE "${_vgpu_eigen_dir}")
  if(VGPU_ABSEIL_ROOT)
    target_include_directories(vgpu_flavour_standalone SYSTEM INTERFACE
                               "${VGPU_SYSTEM_ABSEIL_INCLUDE_DIR}")
  endif()
  # As TensorFlow's target defines them for the plugin's copy of the same kernels.
  target_compile_definitions(vgpu_flavour_standalone INTERFACE
    _GLIBCXX_USE_CXX11_ABI=1 EIGEN_MAX_ALIGN_BYTES=64)
endif()
