#!/usr/bin/env bash
# Reproduces the paper's comparisons: runs the plan of a preset, which
# `boltzattn-lab plan PRESET` prints from lab/presets.json (the grids as
# `boltzattn ablate` arguments, their order and chains, what follows
# them), then writes the summaries, plots, couplings and the generated
# report. Nothing about a preset is written here: lab/presets.json is the
# one place its grids, settings and budgets live.
# usage: lab/reproduce.sh PRESET [BIN [LAB]]   (PRESET: quick, full,
#   converged, samplers, long, approx, recipe or study; BIN: boltzattn, default
#   build/boltzattn; LAB: boltzattn-lab, default beside BIN)
#   DATA=PATH   Tiny Shakespeare (default: data/tinyshakespeare.txt, else
#               ../shared/data/tinyshakespeare.txt)
#   OUT=DIR     results directory (default: out/PRESET; the committed runs
#               of a preset are in results/PRESET)
#   SUMMARY_ONLY=1  train nothing: rewrite summaries, plots and the report
#               from the runs finished so far
#   MPI=N       every grid on N MPI ranks (mpirun -np N; MPIRUN_FLAGS adds
#               flags, e.g. --hostfile F): cells go to ranks as they come
#               free, the results are one process's
#   JOBS=1|2    a preset with two chains runs them side by side (2, the
#               default on 2 or more cores) or one after the other
#   THREADS=N   threads per run (default: the cores divided among the chains)
#   NAME=VALUE  any parameter of the preset in lab/presets.json ("params":
#               budgets, widths, arms, e.g. CONV_LM_STEPS, LONG_ARMS, LM_C)
# Grids are resumable: rerunning the same preset continues where it stopped.
set -euo pipefail
if [ -n "${MPI:-}" ] && ! [[ $MPI =~ ^[1-9][0-9]*$ ]]; then
    echo "MPI must be a positive rank count, not '$MPI'" >&2; exit 2
fi
preset=${1:?usage: reproduce.sh PRESET [BIN [LAB]] (a preset of lab/presets.json)}
BIN=${2:-build/boltzattn}
LAB=${3:-$(dirname "$BIN")/boltzattn-lab}
PRESETS=$(cd "$(dirname "$0")" && pwd)/presets.json
OUT=${OUT:-out/$preset}
JOBS=${JOBS:-$(( $(nproc) >= 2 ? 2 : 1 ))}
[[ $JOBS =~ ^[12]$ ]] || { echo "JOBS must be 1 or 2 (chains side by side), not '$JOBS'" >&2; exit 2; }
THREADS=${THREADS:-$(( $(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1 ))}
[[ $THREADS =~ ^[1-9][0-9]*$ ]] || { echo "THREADS must be a positive integer, not '$THREADS'" >&2; exit 2; }
ONLY=()
[ -n "${SUMMARY_ONLY:-}" ] && ONLY=(--summary-only)
# the plan, checked whole before anything runs (a bad parameter: exit 2)
plan=$("$LAB" plan "$preset" --presets "$PRESETS" "${ONLY[@]}")
if [ -z "${DATA:-}" ]; then
    for d in data/tinyshakespeare.txt ../shared/data/tinyshakespeare.txt; do
        [ -f "$d" ] && DATA=$d && break
    done
fi
[ -n "${DATA:-}" ] && [ -f "$DATA" ] || { echo "no Tiny Shakespeare: run 'make data' or set DATA=PATH" >&2; exit 2; }
mkdir -p "$OUT"
start=$(date +%s)

# replace_couplings NEW OLD: NEW (a finished analysis) becomes OLD unless
# OLD stands on more runs (lines of runs.txt): checkpoints are not
# committed outside the converged preset, so a machine that holds fewer of
# a grid's checkpoints than the one that made the committed analysis would
# otherwise replace it with a thinner one.
replace_couplings() {
    local new=$1 old=$2 nn no
    nn=$(wc -l 2>/dev/null <"$new/runs.txt" || echo 0)
    no=$(wc -l 2>/dev/null <"$old/runs.txt" || echo 0)
    if [ "$nn" -lt "$no" ]; then
        echo "reproduce: kept $old ($no runs), not replaced by an analysis of the $nn checkpoints at hand" >&2
        rm -rf "$new"
    else
        rm -rf "$old" && mv "$new" "$old"
    fi
}
# couplings_arms DIR/ ARMS: one couplings analysis per Ising arm of the
# comma-separated ARMS in DIR/couplings/SPEC/ (the report finds an arm's by
# the variant its couplings.json names); an arm without finished runs with
# checkpoints keeps the analysis already there.
# The two chains of a preset may both get here for one grid: flock makes
# the second wait and redo it rather than race on the same directories.
couplings_arms() {
    local d=$1 a
    mkdir -p "${d}couplings"
    (
        flock 9
        for a in ${2//,/ }; do
            case $a in boltzmann*|coupling*) ;; *) continue ;; esac
            if "$BIN" couplings --grid "${d%/}" --arm "$a" --out "${d}couplings/$a.new" >/dev/null 2>&1; then
                replace_couplings "${d}couplings/$a.new" "${d}couplings/$a"
            else
                rm -rf "${d}couplings/$a.new"
            fi
        done
    ) 9>"${d}couplings/.lock"
}
# ablate ARGS...: `boltzattn ablate`, then the grid's summary with the
# paper's numbers (`boltzattn-lab summary`); with SUMMARY_ONLY a grid that
# was never started (no grid.json under its --out) is skipped with a note,
# since ablate refuses to summarise what does not exist.
ablate() {
    local out="" prev=""
    for a in "$@"; do
        [ "$prev" = --out ] && out=$a
        prev=$a
    done
    if [ -n "${SUMMARY_ONLY:-}" ] && [ ! -f "$out/grid.json" ]; then
        echo "reproduce: $out was never started; nothing to summarise" >&2
        return 0
    fi
    if [ -n "${MPI:-}" ] && [ -z "${SUMMARY_ONLY:-}" ]; then
        # shellcheck disable=SC2086  # MPIRUN_FLAGS: words on purpose
        mpirun -np "$MPI" ${MPIRUN_FLAGS:-} "$BIN" ablate "$@" "${ONLY[@]}"
    else
        "$BIN" ablate "$@" "${ONLY[@]}"
    fi
    "$LAB" summary "$out" --presets "$PRESETS"
}

# fill WORDS...: ARGS = the words with @OUT, @DATA and @THREADS filled in.
fill() {
    ARGS=()
    local w
    for w in "$@"; do
        w=${w//@OUT/"$OUT"}
        w=${w//@DATA/"$DATA"}
        w=${w//@THREADS/"$THREADS"}
        ARGS+=("$w")
    done
}

# step ACTION GRID WORDS...: one line of the plan (lab/plan.c lists the
# actions). What needs checkpoints (couplings, extrapolation, engine
# evaluations, probes) is skipped by a summary.
step() {
    local action=$1 name=$2 ck
    shift 2
    fill "$@"
    case $action in
    ablate) ablate "${ARGS[@]}" ;;
    couplings)
        # J by distance of each Ising arm as soon as the grid is done:
        # checkpoints are not committed, so an analysis left for the end
        # is lost with the machine if the preset is interrupted
        [ -n "${SUMMARY_ONLY:-}" ] || couplings_arms "$OUT/$name/" "${ARGS[0]}" ;;
    extrapolate)
        # entries already there are kept; one process at a time per grid
        [ -z "${SUMMARY_ONLY:-}" ] && [ -f "$OUT/$name/grid.json" ] || return 0
        "$BIN" ablate --out "$OUT/$name" "${ARGS[@]}" ;;
    if-unsettled)
        # the next rung of a ladder (twice the steps): trained once a claim
        # read at the rung below, ARGS[0], has not settled there; a rung
        # already started goes on, and a summary reads what there is
        if [ -f "$OUT/$name/grid.json" ] || [ -n "${SUMMARY_ONLY:-}" ]; then
            ablate "${ARGS[@]:1}"
        elif [ -f "$OUT/${ARGS[0]}/grid.json" ]; then
            ck=$("$LAB" settled "$OUT/${ARGS[0]}" --preset "$preset" --presets "$PRESETS")
            echo "reproduce: $name: $ck" >&2
            case $ck in unsettled:*) ablate "${ARGS[@]:1}" ;; esac
        else
            echo "reproduce: $name waits for ${ARGS[0]}, not started" >&2
        fi ;;
    more-seeds)
        # the claims the grid answers, read on its first N seeds: where one
        # is unresolved the grid trains on with its more-seeds options (the
        # same decision on every rerun, those seeds' records being fixed);
        # a summary reads the seeds grid.json names
        [ -z "${SUMMARY_ONLY:-}" ] && [ -f "$OUT/$name/grid.json" ] || return 0
        ck=$("$LAB" more-seeds "$OUT/$name" --preset "$preset" --base-seeds "${ARGS[0]}" \
            --presets "$PRESETS")
        echo "reproduce: $name: $ck" >&2
        case $ck in extend:*) ablate "${ARGS[@]:1}" ;; esac ;;
    cost)
        # the arms' step costs, timed side by side once every grid named is
        # there; a file already there is kept (both chains may get here:
        # flock, and the check inside it)
        [ -z "${SUMMARY_ONLY:-}" ] || return 0
        local a
        for a in "${ARGS[@]}"; do
            case $a in --*) break ;; esac
            [ -f "$a/grid.json" ] || return 0
        done
        (
            flock 9
            [ -f "${ARGS[0]}/cost.json" ] || "$LAB" cost "${ARGS[@]}"
        ) 9>"${ARGS[0]}/.cost.lock" ;;
    eval-engines)
        [ -z "${SUMMARY_ONLY:-}" ] && [ -f "$OUT/$name/grid.json" ] || return 0
        "$LAB" eval-engines "${ARGS[@]}" ;;
    approx-ckpt)
        # each checkpoint probed instance by instance against exact
        # inference (a rerun recomputes its record, seconds)
        [ -z "${SUMMARY_ONLY:-}" ] && [ -f "$OUT/$name/grid.json" ] || return 0
        for ck in "$OUT/$name"/runs/*/model.safetensors; do
            [ -f "$ck" ] || continue
            "$LAB" approx --ckpt "$ck" "${ARGS[@]}"
        done ;;
    *) echo "reproduce: unknown step '$action' in the plan" >&2; exit 2 ;;
    esac
}

# run_stage STAGE: the plan's lines of that stage, in order (fd 3, so the
# commands keep the terminal's stdin).
run_stage() {
    local line w
    while IFS= read -r line <&3; do
        read -r -a w <<<"$line"
        [ "${w[0]}" = "$1" ] || continue
        step "${w[@]:1}"
    done 3<<<"$plan"
}

# Settings shared by every variant of a comparison (the same seeds, data
# order and hyperparameters) and a fixed budget of steps; the report
# measures how much the validation curves still move at the end (its
# convergence overview in docs/results.md). A preset with two chains runs
# them side by side (JOBS=2): ablate locks each cell it trains, so two
# processes share a grid's cells, each taking the next one free.
if [ "$JOBS" -ge 2 ] && [ -z "${SUMMARY_ONLY:-}" ] && grep -q '^chain0 ' <<<"$plan"; then
    run_stage chain0 &
    cpid=$!
    run_stage chain1
    wait "$cpid"
else
    run_stage order
fi
# what follows the chains (what the other chain was still training when
# this one got there)
run_stage after

# The figures, the couplings and the report of every grid, from the run
# records (nothing typed by hand). A width sweep's learning curves and
# couplings are those of the headline width, not the widest (where every
# variant saturates): the plan's "end" lines say which.
declare -A PREFER=() CURVES=()
CARMS="" REPORT=""
while IFS= read -r line; do
    read -r -a w <<<"$line"
    [ "${w[0]}" = end ] || continue
    case ${w[1]} in
    prefer-C) PREFER[${w[2]}]=${w[3]} ;;
    curves-C) CURVES[${w[2]}]=${w[3]} ;;
    couplings-arms) CARMS=${w[2]} ;;
    report) REPORT=1 ;;
    esac
done <<<"$plan"
for d in "$OUT"/*/; do
    [ -f "${d}grid.json" ] || continue
    base=$(basename "$d")
    wide=()
    for p in "${!PREFER[@]}"; do
        case $base in "$p"*) wide=(--prefer-C "${PREFER[$p]}") ;; esac
    done
    curves=()
    [ -n "${CURVES[$base]:-}" ] && curves=(--curves-C "${CURVES[$base]}")
    "$BIN" plot "${d%/}" "${curves[@]}" || echo "plots skipped for ${d%/}"
    # J of the grid's boltzmann cell with the largest T over its finished
    # seeds; checkpoints are not committed (but the converged preset's), so
    # a clone keeps the committed analysis (couplings says there is nothing
    # to read and it stays, or finds fewer runs than it stands on).
    if [ -n "$CARMS" ]; then
        # one analysis per Ising arm, in couplings/SPEC/ (the report finds
        # an arm's by the variant its couplings.json names)
        couplings_arms "$d" "$CARMS"
    elif "$BIN" couplings --grid "${d%/}" "${wide[@]}" --out "${d}couplings.new" >/dev/null 2>&1; then
        replace_couplings "${d}couplings.new" "${d}couplings"
    else
        rm -rf "${d}couplings.new"
    fi
done
end=$(date +%s)
echo "this invocation: $(( (end - start) / 60 )) minutes" >&2
# a preset without a report (approx: docs/approximate.md is its document)
[ -n "$REPORT" ] || exit 0
# the report replaces report.md only once it is complete
"$LAB" report "$OUT" --preset "$preset" --presets "$PRESETS" >"$OUT/report.md.tmp"
mv "$OUT/report.md.tmp" "$OUT/report.md"
echo "report: $OUT/report.md"
