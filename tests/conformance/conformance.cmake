# The executor conformance suite's sources (tests/conformance/): the kernel tests and the
# harness that runs each launch through an executor. Included by every test binary that runs
# the suite: vgpu_core_tests (tests/cpp) and vgpu_cuda_tests (tests/cuda). The sources use no
# TensorFlow and no executor's internals, so either flavour of the layers compiles them.
set(VGPU_CONFORMANCE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/executor_kernel_harness.cc
  ${CMAKE_CURRENT_LIST_DIR}/executor_conformance.cc
  ${CMAKE_CURRENT_LIST_DIR}/pooling_kernels_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/sparse_kernels_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/convolution_kernels_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/rnn_kernels_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/elem_kernels_test.cc)
