// Included (-include) before a kernel in the profiler's build: the emulator's prelude and
// its atomic marks (atomic_marks.h), which tell the profiler's hooks (hooks.cpp) about each
// atomic operation before it runs.
#ifndef GPUCOURSE_PROFILE_PRELUDE_H
#define GPUCOURSE_PROFILE_PRELUDE_H
#define GCEMU_ATOMIC_MARK __gcprof_atomic
#include "atomic_marks.h"
#endif  // GPUCOURSE_PROFILE_PRELUDE_H
