# The CPU the project's C++ is compiled for (VGPU_CPU_TARGET), and a configure-time probe that
# proves TensorFlow's Eigen compiles for it with this compiler. docs/building.md explains the
# choices. Defines VGPU_CPU_FLAGS (the compiler options for the target) for CMakeLists.txt.
#
#   portable     (default) what TensorFlow's own wheel requires: x86-64-v2 + AVX. Runs on any
#                x86-64 machine TensorFlow runs on; oneDNN still picks AVX2/AVX-512/AMX code at
#                run time for convolutions and matrix products, and the few hand-vectorised
#                kernels dispatch on CPUID (e.g. F16C casts).
#   native       the build machine (-march=native): fastest Eigen kernels there, nowhere else.
#   x86-64-v2|x86-64-v3|x86-64-v4, or a CPU name (-march=NAME: sapphirerapids, znver4, ...).
#                A name this compiler does not know is spelled as a known ancestor plus its
#                extensions (graniterapids = sapphirerapids + AMX-FP16 + PREFETCHI on GCC 12),
#                each extension the compiler lacks dropped and named.
#
# The probe (cmake/cpu_target_probe.cc) compiles Eigen's tensor module, thread pool and spatial
# convolution headers with the target's flags. If the compiler or Eigen rejects them (GCC 12
# with TensorFlow 2.21's Eigen and AVX512-FP16: every Sapphire Rapids, Granite Rapids and
# Zen 5 machine under -march=native), it finds the ISA extension at fault, drops exactly that
# (-mno-EXT) and says so. The result is cached per target, compiler and Eigen folder.

set(VGPU_CPU_TARGET "portable" CACHE STRING
    "CPU to compile for: portable (x86-64-v2 + AVX, as TensorFlow), native, x86-64-v2, x86-64-v3, x86-64-v4, or an -march name")
set(_VGPU_CPU_PROBE_SOURCE "${CMAKE_CURRENT_LIST_DIR}/cpu_target_probe.cc")

# CPU names that a compiler may not know yet, as a known ancestor and the extensions it adds.
set(_vgpu_cpu_graniterapids sapphirerapids amx-fp16 prefetchi)
set(_vgpu_cpu_graniterapids-d sapphirerapids amx-fp16 amx-complex prefetchi)
set(_vgpu_cpu_emeraldrapids sapphirerapids)
set(_vgpu_cpu_znver4 znver3 avx512f avx512cd avx512bw avx512dq avx512vl avx512ifma avx512vbmi
    avx512vbmi2 avx512vnni avx512bitalg avx512vpopcntdq avx512bf16 gfni vaes vpclmulqdq)
set(_vgpu_cpu_znver5 znver3 avx512f avx512cd avx512bw avx512dq avx512vl avx512ifma avx512vbmi
    avx512vbmi2 avx512vnni avx512bitalg avx512vpopcntdq avx512bf16 avx512vp2intersect gfni vaes
    vpclmulqdq avxvnni movdiri movdir64b prefetchi)

# ISA extensions that may break Eigen's headers, most suspect first (the newest ones). Dropping
# avx512f, avx2 or avx also drops what builds on them.
set(_vgpu_cpu_suspects avx512fp16 avx512bf16 amx-fp16 amx-complex amx-bf16 amx-int8 amx-tile
    avxneconvert avxvnniint8 avxvnniint16 avxifma avxvnni avx512vp2intersect avx512vnni
    avx512bitalg avx512vbmi2 avx512vbmi avx512ifma avx512vpopcntdq avx512bw avx512dq avx512vl
    avx512cd avx512f f16c fma avx2 avx)

# True in `out` when the compiler accepts `flags` (a list) for an empty C++ file.
function(_vgpu_compiler_accepts out flags)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} ${flags} -x c++ -E -
                  INPUT_FILE /dev/null OUTPUT_QUIET ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

# The compiler options for `target` (before the probe), in `out`.
function(_vgpu_cpu_target_flags out target)
  if(target STREQUAL "portable")
    set(${out} -march=x86-64-v2 -mavx -mtune=generic PARENT_SCOPE)
    return()
  endif()
  if(NOT target MATCHES "^[A-Za-z0-9_.-]+$")
    message(FATAL_ERROR "VGPU_CPU_TARGET='${target}' is not a CPU name")
  endif()
  _vgpu_compiler_accepts(accepted "-march=${target}")
  if(accepted)
    set(${out} -march=${target} PARENT_SCOPE)
    return()
  endif()
  if(NOT DEFINED _vgpu_cpu_${target})
    message(FATAL_ERROR "VGPU_CPU_TARGET='${target}': ${CMAKE_CXX_COMPILER_ID} "
            "${CMAKE_CXX_COMPILER_VERSION} has no -march=${target}, and this project does not "
            "know it as an older CPU plus extensions. Use portable, native, x86-64-v2/v3/v4 or a "
            "name the compiler lists (${CMAKE_CXX_COMPILER} -march=help)")
  endif()
  set(parts ${_vgpu_cpu_${target}})
  list(POP_FRONT parts base)
  set(flags -march=${base})
  set(missing "")
  foreach(extension IN LISTS parts)
    _vgpu_compiler_accepts(accepted "${flags};-m${extension}")
    if(accepted)
      list(APPEND flags -m${extension})
    else()
      list(APPEND missing ${extension})
    endif()
  endforeach()
  string(CONCAT note "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} has no "
         "-march=${target}: targeting ${base} plus ${target}'s extensions")
  if(missing)
    string(REPLACE ";" ", " missing "${missing}")
    string(APPEND note " (without ${missing}, which this compiler does not know)")
  endif()
  message(STATUS "CPU target: ${note}")
  set(${out} ${flags} PARENT_SCOPE)
endfunction()

# Compiles the probe with `flags`; `ok` and the compiler's complaint in `log`.
function(_vgpu_cpu_probe ok log flags eigen_dir)
  execute_process(
    COMMAND ${CMAKE_CXX_COMPILER} -std=c++17 -O2 ${flags} -DEIGEN_MAX_ALIGN_BYTES=64
            -D_GLIBCXX_USE_CXX11_ABI=1 -DEIGEN_USE_AVX512_GEMM_KERNELS=0 -isystem ${eigen_dir}
            -c ${_VGPU_CPU_PROBE_SOURCE}
            -o ${CMAKE_BINARY_DIR}/CMakeFiles/vgpu_cpu_target_probe.o
    RESULT_VARIABLE rc OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(rc EQUAL 0)
    set(${ok} TRUE PARENT_SCOPE)
  else()
    set(${ok} FALSE PARENT_SCOPE)
  endif()
  set(${log} "${output}" PARENT_SCOPE)
endfunction()

# The suspects `flags` turn on, in `out` (from the compiler's predefined macros).
function(_vgpu_cpu_enabled_suspects out flags)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} ${flags} -dM -x c++ -E -
                  INPUT_FILE /dev/null OUTPUT_VARIABLE macros ERROR_QUIET)
  set(enabled "")
  foreach(extension IN LISTS _vgpu_cpu_suspects)
    string(TOUPPER "${extension}" macro)
    string(REPLACE "-" "_" macro "${macro}")
    if(macros MATCHES "#define __${macro}__ 1")
      list(APPEND enabled ${extension})
    endif()
  endforeach()
  set(${out} ${enabled} PARENT_SCOPE)
endfunction()

# vgpu_select_cpu_flags(<eigen include dir>): sets VGPU_CPU_FLAGS in the caller's scope.
function(vgpu_select_cpu_flags eigen_dir)
  set(key "${VGPU_CPU_TARGET}|${CMAKE_CXX_COMPILER}|${CMAKE_CXX_COMPILER_VERSION}|${eigen_dir}")
  if(DEFINED CACHE{VGPU_CPU_FLAGS_KEY} AND VGPU_CPU_FLAGS_KEY STREQUAL key)
    string(REPLACE ";" " " flags_text "${VGPU_CPU_FLAGS_CACHED}")
    message(STATUS "CPU target: ${VGPU_CPU_TARGET} (${flags_text}), as probed before")
    set(VGPU_CPU_FLAGS ${VGPU_CPU_FLAGS_CACHED} PARENT_SCOPE)
    return()
  endif()
  _vgpu_cpu_target_flags(flags "${VGPU_CPU_TARGET}")
  _vgpu_cpu_probe(ok log "${flags}" "${eigen_dir}")
  if(NOT ok)
    set(first_log "${log}")
    _vgpu_cpu_enabled_suspects(suspects "${flags}")
    # One extension at a time: the one whose removal alone makes Eigen compile.
    set(dropped "")
    foreach(extension IN LISTS suspects)
      _vgpu_cpu_probe(ok log "${flags};-mno-${extension}" "${eigen_dir}")
      if(ok)
        set(dropped ${extension})
        break()
      endif()
    endforeach()
    # Else several: drop them in order until it compiles.
    if(NOT ok)
      set(trial ${flags})
      foreach(extension IN LISTS suspects)
        list(APPEND trial -mno-${extension})
        list(APPEND dropped ${extension})
        _vgpu_cpu_probe(ok log "${trial}" "${eigen_dir}")
        if(ok)
          break()
        endif()
      endforeach()
    endif()
    if(NOT ok)
      message(FATAL_ERROR "CPU target ${VGPU_CPU_TARGET} (${flags}): TensorFlow's Eigen "
              "(${eigen_dir}) does not compile with ${CMAKE_CXX_COMPILER_ID} "
              "${CMAKE_CXX_COMPILER_VERSION}, even without its newer ISA extensions. "
              "Try -DVGPU_CPU_TARGET=portable. The compiler said:\n${first_log}")
    endif()
    # The first error line names what failed, for the configure output.
    string(REGEX MATCH "[^\n]*error[^\n]*" first_error "${first_log}")
    foreach(extension IN LISTS dropped)
      list(APPEND flags -mno-${extension})
    endforeach()
    string(REPLACE ";" ", " dropped_text "${dropped}")
    message(WARNING "CPU target ${VGPU_CPU_TARGET}: TensorFlow's Eigen does not compile with "
            "${dropped_text} under ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}; "
            "building without ${dropped_text} (everything else the target offers is kept). "
            "First error: ${first_error}")
  endif()
  string(REPLACE ";" " " flags_text "${flags}")
  message(STATUS "CPU target: ${VGPU_CPU_TARGET} (${flags_text})")
  set(VGPU_CPU_FLAGS_CACHED "${flags}" CACHE INTERNAL "VGPU_CPU_FLAGS for VGPU_CPU_FLAGS_KEY")
  set(VGPU_CPU_FLAGS_KEY "${key}" CACHE INTERNAL "what VGPU_CPU_FLAGS_CACHED was probed for")
  set(VGPU_CPU_FLAGS ${flags} PARENT_SCOPE)
endfunction()
