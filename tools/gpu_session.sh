#!/usr/bin/env bash
# `make gpu-session`: everything the course measures on a GPU machine, in steps that each stop
# well inside 8 minutes, so that a short lease of a GPU still brings back what finished.
#
#   bash tools/gpu_session.sh [STEP ...]      (default: every step, in this order)
#
# Steps: tests (pytest tests/gpu), ch1 ... ch7 (each chapter's gpu_check(); each writes its own
# section of src/gpucourse/data/reference/<gpu>.json with command, date, driver and versions),
# kernels (every kernel version timed; then the Nsight Compute comparison, which skips itself
# without ncu), notebooks (every chapter under nbval-lax and every solution under nbval, on
# the GPU), browser (the notebooks in JupyterLab in a headless browser). Uses the Python it
# finds (PYTHON, default python3) and installs nothing. Each step's log and its wall time go
# to results/gpu-session/ (GPU_SESSION_OUT), with a summary.txt. A failing step is
# recorded and the next one runs; the script fails at the end if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"  # the notebooks' kernels import the package from here
STEP_TIMEOUT_S="${STEP_TIMEOUT_S:-450}"
OUT="${GPU_SESSION_OUT:-results/gpu-session}"
mkdir -p "$OUT"
ALL="tests ch1 ch2 ch3 ch4 ch5 ch6 ch7 kernels notebooks browser"
STEPS="${*:-$ALL}"
failed=""

run_step() {
    local name=$1; shift
    local start=$SECONDS
    echo "== $name: $*"
    timeout --kill-after=20 "$STEP_TIMEOUT_S" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    local line="$name: rc=$rc, $((SECONDS - start)) s"
    [ $rc -eq 124 ] && line="$line (stopped at the ${STEP_TIMEOUT_S} s step limit)"
    echo "$line" | tee -a "$OUT/summary.txt"
    tail -n 5 "$OUT/$name.log"
    [ $rc -eq 0 ] || failed="$failed $name"
}

echo "gpu session $(date -Iseconds): $STEPS" >> "$OUT/summary.txt"
for step in $STEPS; do
    case "$step" in
        tests)     run_step tests "$PY" tools/gpu_check.py --skip-chapters --skip-kernels --out "$OUT" ;;
        ch[1-7])   run_step "$step" "$PY" tools/gpu_check.py --skip-tests --skip-kernels \
                       --chapters "${step#ch}" --budget-s "$STEP_TIMEOUT_S" --out "$OUT" ;;
        kernels)   run_step kernels "$PY" tools/gpu_check.py --skip-tests --skip-chapters --out "$OUT" ;;
        notebooks) run_step notebooks bash -c "'$PY' -m pytest -q -p no:cacheprovider --nbval-lax \
                       --nbval-current-env notebooks && '$PY' -m pytest -q -p no:cacheprovider \
                       --nbval --nbval-current-env solutions" ;;
        browser)   run_step browser "$PY" tools/browser_test.py --out "$OUT/browser" ;;
        *) echo "unknown step $step; the steps are: $ALL" >&2; exit 2 ;;
    esac
done
if [ -n "$failed" ]; then
    echo "failed steps:$failed (logs in $OUT/)" | tee -a "$OUT/summary.txt"
    exit 1
fi
echo "every step passed (logs in $OUT/)"
