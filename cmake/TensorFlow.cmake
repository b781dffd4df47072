# Locates the installed TensorFlow wheel (headers, Eigen, Abseil, libtensorflow_framework.so.2)
# without importing TensorFlow, and defines the imported target `tensorflow_framework`.
execute_process(
  COMMAND "${Python_EXECUTABLE}" "${CMAKE_CURRENT_SOURCE_DIR}/cmake/find_tensorflow.py"
  OUTPUT_VARIABLE _tf_out
  RESULT_VARIABLE _tf_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _tf_rc EQUAL 0 OR _tf_out STREQUAL "")
  message(FATAL_ERROR "TensorFlow is not installed for ${Python_EXECUTABLE}; pip install 'tensorflow-cpu==2.21.*' first")
endif()
string(REPLACE "\n" ";" _tf_lines "${_tf_out}")
list(GET _tf_lines 0 VGPU_TF_DIR)
list(GET _tf_lines 1 VGPU_TF_VERSION)
if(NOT VGPU_TF_VERSION MATCHES "^2\\.21\\.")
  message(FATAL_ERROR "tensorflow-vgpu builds against TensorFlow 2.21.*, found '${VGPU_TF_VERSION}'")
endif()
message(STATUS "TensorFlow ${VGPU_TF_VERSION} at ${VGPU_TF_DIR}")

file(STRINGS "${CMAKE_CURRENT_SOURCE_DIR}/python/vgpu/_version.py" _ver_line REGEX "^__version__")
string(REGEX REPLACE ".*\"(.*)\".*" "\\1" VGPU_VERSION "${_ver_line}")

add_library(tensorflow_framework SHARED IMPORTED GLOBAL)
set_target_properties(tensorflow_framework PROPERTIES
  IMPORTED_LOCATION "${VGPU_TF_DIR}/libtensorflow_framework.so.2"
  INTERFACE_INCLUDE_DIRECTORIES "${VGPU_TF_DIR}/include"
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1;EIGEN_MAX_ALIGN_BYTES=64")
set(VGPU_TF_LIB_DIR "${VGPU_TF_DIR}")
