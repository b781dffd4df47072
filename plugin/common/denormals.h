// Flushing of denormal (subnormal) floats, as TensorFlow's CPU kernels run them: TensorFlow sets
// flush-to-zero and denormals-are-zero on every thread that runs its kernels, so a denormal
// input reads as zero and a denormal result is written as zero. The CPU executor's kernels do the
// same on their threads, which (1) keeps their results identical to TensorFlow-CPU's (1e-40 * 3
// is 0 there, not 3e-40) whichever thread runs a launch, and (2) keeps them fast: an x86
// multiply of a denormal takes a microcode assist of ~100 cycles, and Adam's moment estimates
// decay into that range (an mlp's training step took 1.5x as long after ~700 steps).
// x86 only (the MXCSR register's FTZ and DAZ bits); elsewhere these do nothing.
#ifndef VGPU_COMMON_DENORMALS_H_
#define VGPU_COMMON_DENORMALS_H_

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
#include <xmmintrin.h>
#define VGPU_HAVE_MXCSR 1
#else
#define VGPU_HAVE_MXCSR 0
#endif

namespace vgpu {

#if VGPU_HAVE_MXCSR
// MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6) bits.
inline constexpr unsigned kFlushDenormalBits = 0x8000u | 0x0040u;
#endif

// Turns denormal flushing on for the calling thread, for good (a thread that runs only kernels:
// a compute pool's, a stream's worker). Threads it creates afterwards inherit the mode.
inline void FlushDenormalsOnThisThread() {
#if VGPU_HAVE_MXCSR
  _mm_setcsr(_mm_getcsr() | kFlushDenormalBits);
#endif
}

// Turns denormal flushing on for the calling thread while it lives, then restores the thread's
// previous mode (a launch run on a thread that is not the executor's, e.g. inline on the
// submitting thread). Not copyable; cheap (two MXCSR accesses).
class ScopedFlushDenormals {
 public:
#if VGPU_HAVE_MXCSR
  ScopedFlushDenormals() : saved_(_mm_getcsr()) {
    if ((saved_ & kFlushDenormalBits) != kFlushDenormalBits) {
      _mm_setcsr(saved_ | kFlushDenormalBits);
    }
  }
  ~ScopedFlushDenormals() {
    if ((saved_ & kFlushDenormalBits) != kFlushDenormalBits) _mm_setcsr(saved_);
  }
#else
  ScopedFlushDenormals() = default;
#endif
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
#if VGPU_HAVE_MXCSR
  const unsigned saved_;
#endif
};

}  // namespace vgpu

#endif  // VGPU_COMMON_DENORMALS_H_
