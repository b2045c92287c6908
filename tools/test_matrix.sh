#!/usr/bin/env bash
# The CPU matrix (`make test-matrix`): the tests under each ISA cap and core count a learner's
# x86 machine may give.
#
#   ISA   AVX2: the oneDNN kernels and PyTorch's own vectorized kernels an AVX2-only laptop gets,
#         reproduced on a newer CPU with ONEDNN_MAX_CPU_ISA and ATEN_CPU_CAPABILITY;
#         default: all this CPU has.
#   cores one: pinned to a single core with taskset, one pytest worker (a one-core laptop, or a
#         notebook's kernel pinned by its container); all: JOBS workers on every core.
#
# Every cell runs every chapter notebook (--nbval-lax), every solution (--nbval) and the unit
# tests whose results an ISA cap or a core count can change: all but the emulator's own tests,
# the tests of the course's tools and the smoke tests of GPU-only code (markers emulator_only,
# tooling and gpu_path, set by file in tests/matrix_scope.py), which `make test` runs once. The two pinned cells use one core each,
# so they run at the same time on two different cores when the machine has two or more; the
# all-cores cells then run one after the other. Every cell runs, a failing one is named at the
# end, and the script then fails. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine
# sets them: some machines need them.
#
# Environment (the Makefile passes them): PY, JOBS, NBVAL (nbval options), MATRIX_ISAS,
# MATRIX_CORES, MATRIX_UNIT (pytest paths; empty: none), MATRIX_NOTEBOOKS, MATRIX_SOLUTIONS,
# MATRIX_MARK (which unit tests; "" for all), MATRIX_LOGS (a folder for each cell's log;
# default results/test-matrix).
set -u
PY=${PY:-.venv/bin/python}
JOBS=${JOBS:-2}
NBVAL=${NBVAL:-}
MATRIX_ISAS=${MATRIX_ISAS:-AVX2 default}
MATRIX_CORES=${MATRIX_CORES:-one all}
MATRIX_UNIT=${MATRIX_UNIT-tests}
MATRIX_NOTEBOOKS=${MATRIX_NOTEBOOKS-notebooks}
MATRIX_SOLUTIONS=${MATRIX_SOLUTIONS-solutions}
MATRIX_MARK=${MATRIX_MARK-not emulator_only and not tooling and not gpu_path}
LOGS=${MATRIX_LOGS:-results/test-matrix}
mkdir -p "$LOGS"

# run_cell ISA CORES [CPU]: one cell, its output in $LOGS/<isa>-<cores>.log; prints its line of
# the summary ("passed|FAILED <cell> (<seconds> s)") on stdout.
run_cell() {
  local isa=$1 cores=$2 cpu=${3:-0} env_cmd jobs=$JOBS where mark=() ok=1 start log
  if [ "$isa" = default ]; then env_cmd=(env -u ONEDNN_MAX_CPU_ISA -u ATEN_CPU_CAPABILITY)
  else env_cmd=(env ONEDNN_MAX_CPU_ISA="$isa" ATEN_CPU_CAPABILITY="$(echo "$isa" | tr A-Z a-z)"); fi
  if [ "$cores" = one ]; then
    env_cmd+=(taskset -c "$cpu"); jobs=1; where="pinned to one core (taskset -c $cpu)"
  else where="all cores"; fi
  if [ -n "$MATRIX_MARK" ]; then mark=(-m "$MATRIX_MARK"); fi
  local cell="ONEDNN_MAX_CPU_ISA=$isa, $where"
  log="$LOGS/$isa-$cores.log"
  start=$(date +%s)
  {
    echo "=== test-matrix: $cell"
    # The unit tests and the notebooks in one pytest run: one start-up (imports) instead of two.
    if [ -n "$MATRIX_UNIT$MATRIX_NOTEBOOKS" ]; then
      # shellcheck disable=SC2086
      "${env_cmd[@]}" "$PY" -m pytest -q -p no:cacheprovider -n "$jobs" "${mark[@]}" \
        --durations=15 --nbval-lax $NBVAL $MATRIX_UNIT $MATRIX_NOTEBOOKS || ok=0
    fi
    if [ -n "$MATRIX_SOLUTIONS" ]; then
      # shellcheck disable=SC2086
      "${env_cmd[@]}" "$PY" -m pytest -q -p no:cacheprovider -n "$jobs" --nbval $NBVAL $MATRIX_SOLUTIONS || ok=0
    fi
    echo "=== test-matrix: $cell: $([ $ok = 1 ] && echo passed || echo FAILED)"
  } > "$log" 2>&1
  local secs=$(( $(date +%s) - start ))
  if [ $ok = 1 ]; then echo "  passed  $cell ($secs s)"; else echo "  FAILED  $cell ($secs s), log: $log"; fi
}

has_taskset=1
command -v taskset >/dev/null 2>&1 || has_taskset=0
cpus=$("$PY" -c "import os; print(' '.join(map(str, sorted(os.sched_getaffinity(0)))))" 2>/dev/null || echo 0)
read -r -a cpu_list <<< "$cpus"

summary=$(mktemp)
begin=$(date +%s)
pinned=()
for isa in $MATRIX_ISAS; do for cores in $MATRIX_CORES; do
  [ "$cores" = one ] && pinned+=("$isa")
done; done

if [ ${#pinned[@]} -gt 0 ]; then
  if [ $has_taskset = 0 ]; then
    echo "test-matrix: skipping the pinned cells: this system has no taskset (macOS has none)" | tee -a "$summary"
  else
    k=0; waits=()
    for isa in "${pinned[@]}"; do
      cpu=${cpu_list[$(( k % ${#cpu_list[@]} ))]}
      echo "=== test-matrix: ONEDNN_MAX_CPU_ISA=$isa, pinned to core $cpu (log: $LOGS/$isa-one.log)"
      if [ $(( k + 1 )) -lt ${#cpu_list[@]} ] && [ $(( k + 1 )) -lt ${#pinned[@]} ]; then
        run_cell "$isa" one "$cpu" >> "$summary" & waits+=($!)  # a core of its own
      else
        run_cell "$isa" one "$cpu" >> "$summary"
      fi
      k=$(( k + 1 ))
    done
    for w in "${waits[@]}"; do wait "$w"; done
  fi
fi
for isa in $MATRIX_ISAS; do for cores in $MATRIX_CORES; do
  [ "$cores" = all ] || continue
  echo "=== test-matrix: ONEDNN_MAX_CPU_ISA=$isa, all cores (log: $LOGS/$isa-all.log)"
  run_cell "$isa" all >> "$summary"
done; done

echo "=== test-matrix summary ($(( $(date +%s) - begin )) s in all)"
cat "$summary"
if grep -q "FAILED" "$summary"; then
  echo "test-matrix FAILED: see the logs named above" >&2
  for f in "$LOGS"/*.log; do grep -E "^(FAILED|ERROR) " "$f" | head -20 | sed "s|^|  $(basename "$f" .log): |" >&2; done
  rm -f "$summary"; exit 1
fi
rm -f "$summary"
