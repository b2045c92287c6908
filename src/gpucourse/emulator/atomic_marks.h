// Included (-include) before a kernel in an instrumented build (the profiler, the race
// detector): the emulator's prelude, then wrappers that call GCEMU_ATOMIC_MARK(address,
// size), a function of the tool's hooks, before each atomic operation runs. On the
// emulator an atomic is a plain read and write; without this mark a tool could not tell it
// from ordinary code. The wrapper takes its arguments first, so loads inside them (the
// index of a histogram bin) stay ordinary loads.
#ifndef GPUCOURSE_ATOMIC_MARKS_H
#define GPUCOURSE_ATOMIC_MARKS_H
#include "cuda_emu.h"

#ifndef GCEMU_ATOMIC_MARK
#error "define GCEMU_ATOMIC_MARK as the name of the function that marks an atomic"
#endif
extern "C" GCEMU_HIDDEN void GCEMU_ATOMIC_MARK(const void* address, unsigned size);
// A tool that needs to tell atomicCAS apart (the race detector: a plain read before a CAS
// loop is no race) names its own mark for it.
#ifdef GCEMU_ATOMIC_CAS_MARK
extern "C" GCEMU_HIDDEN void GCEMU_ATOMIC_CAS_MARK(const void* address, unsigned size);
#else
#define GCEMU_ATOMIC_CAS_MARK GCEMU_ATOMIC_MARK
#endif

#define GCEMU_MARK_ATOMIC_WITH(NAME, MARK)                                              \
  template <class T, class... R>                                                        \
  __attribute__((always_inline)) /* the mark's caller is the kernel's line, at -O0 too */ \
  static inline auto __gcemu_marked_##NAME(T* address, R... rest)                       \
      -> decltype(NAME(address, rest...)) {                                             \
    MARK((const void*)address, (unsigned)sizeof(T));                                    \
    return NAME(address, rest...);                                                      \
  }
#define GCEMU_MARK_ATOMIC(NAME) GCEMU_MARK_ATOMIC_WITH(NAME, GCEMU_ATOMIC_MARK)
GCEMU_MARK_ATOMIC(atomicAdd)
GCEMU_MARK_ATOMIC(atomicSub)
GCEMU_MARK_ATOMIC(atomicExch)
GCEMU_MARK_ATOMIC(atomicMax)
GCEMU_MARK_ATOMIC(atomicMin)
GCEMU_MARK_ATOMIC(atomicAnd)
GCEMU_MARK_ATOMIC(atomicOr)
GCEMU_MARK_ATOMIC(atomicXor)
GCEMU_MARK_ATOMIC(atomicInc)
GCEMU_MARK_ATOMIC(atomicDec)
GCEMU_MARK_ATOMIC_WITH(atomicCAS, GCEMU_ATOMIC_CAS_MARK)
#undef GCEMU_MARK_ATOMIC
#undef GCEMU_MARK_ATOMIC_WITH

// Defined after the wrappers, so that the wrappers still call the prelude's functions.
#define atomicAdd(...) __gcemu_marked_atomicAdd(__VA_ARGS__)
#define atomicSub(...) __gcemu_marked_atomicSub(__VA_ARGS__)
#define atomicExch(...) __gcemu_marked_atomicExch(__VA_ARGS__)
#define atomicMax(...) __gcemu_marked_atomicMax(__VA_ARGS__)
#define atomicMin(...) __gcemu_marked_atomicMin(__VA_ARGS__)
#define atomicAnd(...) __gcemu_marked_atomicAnd(__VA_ARGS__)
#define atomicOr(...) __gcemu_marked_atomicOr(__VA_ARGS__)
#define atomicXor(...) __gcemu_marked_atomicXor(__VA_ARGS__)
#define atomicInc(...) __gcemu_marked_atomicInc(__VA_ARGS__)
#define atomicDec(...) __gcemu_marked_atomicDec(__VA_ARGS__)
#define atomicCAS(...) __gcemu_marked_atomicCAS(__VA_ARGS__)

#endif  // GPUCOURSE_ATOMIC_MARKS_H
