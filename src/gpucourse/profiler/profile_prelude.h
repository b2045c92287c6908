// Included (-include) before a kernel in the profiler's build: the emulator's prelude, then
// wrappers that tell the profiler's hooks (hooks.cpp) about each atomic operation before it
// runs. On the emulator an atomic is a plain read and write; without this mark the
// profiler could not tell it from ordinary code. The wrapper takes its arguments first,
// so loads inside them (the index of a histogram bin) stay ordinary loads.
#ifndef GPUCOURSE_PROFILE_PRELUDE_H
#define GPUCOURSE_PROFILE_PRELUDE_H
#include "cuda_emu.h"

extern "C" GCEMU_HIDDEN void __gcprof_atomic(const void* address, unsigned size);

#define GCPROF_WRAP_ATOMIC(NAME)                                                        \
  template <class T, class... R>                                                        \
  static inline auto __gcprof_##NAME(T* address, R... rest)                             \
      -> decltype(NAME(address, rest...)) {                                             \
    __gcprof_atomic((const void*)address, (unsigned)sizeof(T));                         \
    return NAME(address, rest...);                                                      \
  }
GCPROF_WRAP_ATOMIC(atomicAdd)
GCPROF_WRAP_ATOMIC(atomicSub)
GCPROF_WRAP_ATOMIC(atomicExch)
GCPROF_WRAP_ATOMIC(atomicMax)
GCPROF_WRAP_ATOMIC(atomicMin)
GCPROF_WRAP_ATOMIC(atomicAnd)
GCPROF_WRAP_ATOMIC(atomicOr)
GCPROF_WRAP_ATOMIC(atomicXor)
GCPROF_WRAP_ATOMIC(atomicInc)
GCPROF_WRAP_ATOMIC(atomicDec)
GCPROF_WRAP_ATOMIC(atomicCAS)
#undef GCPROF_WRAP_ATOMIC

// Defined after the wrappers, so that the wrappers still call the prelude's functions.
#define atomicAdd(...) __gcprof_atomicAdd(__VA_ARGS__)
#define atomicSub(...) __gcprof_atomicSub(__VA_ARGS__)
#define atomicExch(...) __gcprof_atomicExch(__VA_ARGS__)
#define atomicMax(...) __gcprof_atomicMax(__VA_ARGS__)
#define atomicMin(...) __gcprof_atomicMin(__VA_ARGS__)
#define atomicAnd(...) __gcprof_atomicAnd(__VA_ARGS__)
#define atomicOr(...) __gcprof_atomicOr(__VA_ARGS__)
#define atomicXor(...) __gcprof_atomicXor(__VA_ARGS__)
#define atomicInc(...) __gcprof_atomicInc(__VA_ARGS__)
#define atomicDec(...) __gcprof_atomicDec(__VA_ARGS__)
#define atomicCAS(...) __gcprof_atomicCAS(__VA_ARGS__)

#endif  // GPUCOURSE_PROFILE_PRELUDE_H
