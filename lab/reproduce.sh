#!/usr/bin/env bash
# Reproduces the paper's comparisons with `boltzattn ablate` and writes the
# summaries, plots and a generated report.
# usage: lab/reproduce.sh quick|full|converged|samplers|long|approx [BIN]
#   DATA=PATH   Tiny Shakespeare (default: data/tinyshakespeare.txt, else
#               ../shared/data/tinyshakespeare.txt)
#   OUT=DIR     results directory (default: out/PRESET; the committed runs
#               of a preset are in results/PRESET)
#   SUMMARY_ONLY=1  train nothing: rewrite summaries, plots and the report
#               from the runs finished so far
#   MPI=N       every grid on N MPI ranks (mpirun -np N; MPIRUN_FLAGS adds
#               flags, e.g. --hostfile F): cells go to ranks as they come
#               free, the results are one process's
# Grids are resumable: rerunning the same preset continues where it stopped.
set -euo pipefail
if [ -n "${MPI:-}" ] && ! [[ $MPI =~ ^[1-9][0-9]*$ ]]; then
    echo "MPI must be a positive rank count, not '$MPI'" >&2; exit 2
fi
preset=${1:?usage: reproduce.sh quick|full|converged|samplers|long|approx [BIN]}
BIN=${2:-build/boltzattn}
OUT=${OUT:-out/$preset}
if [ -z "${DATA:-}" ]; then
    for d in data/tinyshakespeare.txt ../shared/data/tinyshakespeare.txt; do
        [ -f "$d" ] && DATA=$d && break
    done
fi
[ -n "${DATA:-}" ] && [ -f "$DATA" ] || { echo "no Tiny Shakespeare: run 'make data' or set DATA=PATH" >&2; exit 2; }
mkdir -p "$OUT"
start=$(date +%s)
ONLY=()
[ -n "${SUMMARY_ONLY:-}" ] && ONLY=(--summary-only)
# The engine of the grids made before the band engine and `auto` existed:
# auto resolves to fast for them, and naming it keeps their grid.json as
# committed. The long preset's banded arms need auto (the band engine).
ENGINE=(--engine fast)

# replace_couplings NEW OLD: NEW (a finished analysis) becomes OLD unless
# OLD stands on more runs (lines of runs.txt): checkpoints are not
# committed outside the converged preset, so a machine that holds fewer of
# a grid's checkpoints than the one that made the committed analysis would
# otherwise replace it with a thinner one.
replace_couplings() {
    local new=$1 old=$2 nn no
    nn=$(wc -l < "$new/runs.txt" 2>/dev/null || echo 0)
    no=$(wc -l < "$old/runs.txt" 2>/dev/null || echo 0)
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
# ablate ARGS...: `boltzattn ablate`; with SUMMARY_ONLY a grid that was
# never started (no grid.json under its --out) is skipped with a note,
# since ablate refuses to summarise what does not exist.
ablate() {
    if [ -n "${SUMMARY_ONLY:-}" ]; then
        local out="" prev=""
        for a in "$@"; do
            [ "$prev" = --out ] && out=$a
            prev=$a
        done
        if [ ! -f "$out/grid.json" ]; then
            echo "reproduce: $out was never started; nothing to summarise" >&2
            return 0
        fi
    fi
    if [ -n "${MPI:-}" ] && [ -z "${SUMMARY_ONLY:-}" ]; then
        # shellcheck disable=SC2086  # MPIRUN_FLAGS: words on purpose
        mpirun -np "$MPI" ${MPIRUN_FLAGS:-} "$BIN" ablate "$@" "${ENGINE[@]}"
    else
        "$BIN" ablate "$@" "${ENGINE[@]}"
    fi
}

# Settings shared by every variant of a comparison (the same seeds, data
# order and hyperparameters) and a fixed budget of steps; the report
# measures how much the validation curves still move at the end (its
# convergence overview in docs/results.md).
case "$preset" in
quick)
    # 7 minutes on 2 idle cores from a fresh clone, build included: the
    # direction of each effect
    BR=(--steps 2000 --batch 32 --lr 3e-3 --seeds 3)
    LM=(--steps 3000 --batch 32 --lr 3e-3 --seeds 3 --eval-items 256)
    ablate --task brackets --T 8,12,16 --embd 8 --no-ffn-too "${BR[@]}" "${ONLY[@]}" --out "$OUT/brackets"
    ablate --task charlm --T 4,8,12 --embd 32 "${LM[@]}" --data "$DATA" "${ONLY[@]}" --out "$OUT/charlm"
    ;;
full)
    # Hours (many, on 2 cores): the width sweep at T = 16, then T at the
    # headline widths. Brackets curves are nearly flat by the end; charlm
    # perplexity still falls, so the headline row is rerun at 2x and 4x the
    # steps (docs/results.md shows both). The charlm headline row runs first
    # so an interrupted grid has it; every grid resumes where it stopped.
    BR=(--steps 16000 --batch 32 --lr 3e-3 --seeds 5 --eval-every 2000 --eval-items 2000 --log-every 200)
    LM=(--steps 20000 --batch 32 --lr 3e-3 --seeds 5 --eval-every 2000 --eval-items 512 --log-every 200)
    LM_C=${LM_C:-32}  # charlm headline width (the paper-sized model)
    BR_C=${BR_C:-4}   # brackets headline width: C = 8 saturated (99.9 %) in converged probes
    # Two chains, brackets and charlm, run side by side (JOBS=2, the default
    # with 2 or more cores), each run on THREADS threads (default: the cores
    # divided among the chains). results/full was made this way on 2
    # cores: one thread per run. A run is bit-identical for the same seed,
    # build and thread count. JOBS=1 runs the chains one after the other.
    JOBS=${JOBS:-$(( $(nproc) >= 2 ? 2 : 1 ))}
    [[ $JOBS =~ ^[12]$ ]] || { echo "JOBS must be 1 or 2 (chains side by side), not '$JOBS'" >&2; exit 2; }
    THREADS=${THREADS:-$(( $(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1 ))}
    [[ $THREADS =~ ^[1-9][0-9]*$ ]] || { echo "THREADS must be a positive integer, not '$THREADS'" >&2; exit 2; }
    TH=(--threads "$THREADS")
    charlm_chain() {
        # The paper's headline (charlm T = 12) with 10 seeds, so the
        # interval of a 1 % effect excludes zero; the T sweep reuses its
        # first 5.
        ablate --task charlm --T 12 --embd "$LM_C" "${LM[@]}" --seeds 10 --data "$DATA" "${TH[@]}" "${ONLY[@]}" --out "$OUT/charlm-T12"
        # Convergence check of the headline row: the same runs with twice
        # the steps (5 seeds, softmax and boltzmann).
        ablate --task charlm --attn softmax,boltzmann --T 12 --embd "$LM_C" --steps 40000 --batch 32 \
            --lr 3e-3 --seeds 5 --eval-every 4000 --eval-items 512 --log-every 400 --data "$DATA" \
            "${TH[@]}" "${ONLY[@]}" --out "$OUT/charlm-40k"
        # and with four times the steps (5 seeds): is the effect stable as
        # the budget grows, while perplexity still falls?
        ablate --task charlm --attn softmax,boltzmann --T 12 --embd "$LM_C" --steps 80000 --batch 32 \
            --lr 3e-3 --seeds 5 --eval-every 8000 --eval-items 512 --log-every 800 --data "$DATA" \
            "${TH[@]}" "${ONLY[@]}" --out "$OUT/charlm-80k"
        # and sixteen times (10 seeds, as the headline): the rung above the
        # converged preset's 160,000 steps, so the report's budget ladder
        # shows what one more doubling still buys and the headline effect
        # is read at it with the headline's seeds (about 75 minutes on 2
        # cores)
        ablate --task charlm --attn softmax,boltzmann --T 12 --embd "$LM_C" --steps 320000 --batch 32 \
            --lr 3e-3 --seeds 10 --eval-every 32000 --eval-items 512 --log-every 3200 --data "$DATA" \
            "${TH[@]}" "${ONLY[@]}" --out "$OUT/charlm-320k"
        ablate --task charlm --T 16 --embd 8,16,32,64 "${LM[@]}" --data "$DATA" "${TH[@]}" "${ONLY[@]}" --out "$OUT/charlm-width"
        # Cells shared with the width sweep or the headline (the same
        # config and settings, as their run records say) are copied, not
        # rerun.
        ablate --task charlm --T 4,8,12,16,20 --embd "$LM_C" "${LM[@]}" --data "$DATA" "${TH[@]}" "${ONLY[@]}" \
            --share-from "$OUT/charlm-width" --share-from "$OUT/charlm-T12" --out "$OUT/charlm"
        # then help with the last brackets grid: ablate locks each cell it
        # trains, so two processes on one grid share its cells
        brackets_t24
    }
    brackets_t24() {
        # T = 24 costs about 0.6 s per boltzmann step on one thread: a
        # shorter, documented budget (2,000 steps), not a converged run.
        ablate --task brackets --T 24 --embd "$BR_C" --no-ffn-too --steps 2000 --batch 32 --lr 3e-3 \
            --seeds 5 --eval-every 500 --eval-items 2000 --log-every 50 "${TH[@]}" "${ONLY[@]}" --out "$OUT/brackets-T24"
    }
    brackets_chain() {
        ablate --task brackets --T 16 --embd 4,8,16,32,64 --no-ffn-too "${BR[@]}" "${TH[@]}" "${ONLY[@]}" --out "$OUT/brackets-width"
        ablate --task brackets --T 8,12,16,20 --embd "$BR_C" --no-ffn-too "${BR[@]}" "${TH[@]}" "${ONLY[@]}" \
            --share-from "$OUT/brackets-width" --out "$OUT/brackets"
        brackets_t24
    }
    if [ "$JOBS" -ge 2 ]; then
        brackets_chain &
        bpid=$!
        charlm_chain
        wait "$bpid"
    else
        charlm_chain
        brackets_chain
    fi
    ;;
converged)
    # The headline cells trained until their curves are flat by the
    # report's own criterion (every cell's validation metric moves less
    # than 0.5 from the evaluation nearest 70 % of the steps to the last):
    # charlm T = 12 (C = 32, four variants, 10 seeds), brackets T = 16
    # (C = 4, with and without FFN, 5 seeds) and T = 20 (C = 4, 5 seeds),
    # the full preset's settings but for the budget: 8x its steps for
    # charlm (where 80,000 steps still moved 3 %), 4x for brackets.
    # CONV_LM_STEPS / CONV_BR_STEPS change the budgets (a grid's settings
    # are fixed once started: a larger budget needs another OUT). Hours per
    # grid on 2 cores; resumable like every grid, finished runs committed
    # as they finish (results/converged).
    JOBS=${JOBS:-$(( $(nproc) >= 2 ? 2 : 1 ))}
    [[ $JOBS =~ ^[12]$ ]] || { echo "JOBS must be 1 or 2 (chains side by side), not '$JOBS'" >&2; exit 2; }
    THREADS=${THREADS:-$(( $(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1 ))}
    [[ $THREADS =~ ^[1-9][0-9]*$ ]] || { echo "THREADS must be a positive integer, not '$THREADS'" >&2; exit 2; }
    TH=(--threads "$THREADS")
    LMS=${CONV_LM_STEPS:-160000}
    BRS=${CONV_BR_STEPS:-64000}
    LMSEEDS=${CONV_LM_SEEDS:-10}   # seeds: fewer only for tests (tests/report.sh)
    BRSEEDS=${CONV_BR_SEEDS:-5}
    [[ $LMS =~ ^[1-9][0-9]+$ && $BRS =~ ^[1-9][0-9]+$ ]] ||
        { echo "CONV_LM_STEPS and CONV_BR_STEPS must be integers of at least 10" >&2; exit 2; }
    [[ $LMSEEDS =~ ^[1-9][0-9]*$ && $BRSEEDS =~ ^[1-9][0-9]*$ ]] ||
        { echo "CONV_LM_SEEDS and CONV_BR_SEEDS must be positive integers" >&2; exit 2; }
    CLM=(--steps "$LMS" --batch 32 --lr 3e-3 --eval-every $(( LMS / 10 )) --eval-items 512
         --log-every $(( LMS >= 100 ? LMS / 100 : 1 )))
    CBR=(--steps "$BRS" --batch 32 --lr 3e-3 --eval-every $(( BRS / 10 )) --eval-items 2000
         --log-every $(( BRS >= 100 ? BRS / 100 : 1 )))
    conv_charlm() {
        ablate --task charlm --T 12 --embd 32 --seeds "$LMSEEDS" "${CLM[@]}" --data "$DATA" "${TH[@]}" \
            "${ONLY[@]}" --out "$OUT/charlm-T12"
    }
    conv_brackets() {
        ablate --task brackets --T 16 --embd 4 --no-ffn-too --seeds "$BRSEEDS" "${CBR[@]}" "${TH[@]}" \
            "${ONLY[@]}" --out "$OUT/brackets-T16"
        ablate --task brackets --T 20 --embd 4 --seeds "$BRSEEDS" "${CBR[@]}" "${TH[@]}" "${ONLY[@]}" \
            --out "$OUT/brackets-T20"
    }
    # Both chains walk every grid, in opposite orders: ablate locks each
    # cell it trains and skips those another process holds, so the chain
    # that finishes its first grids (brackets, an estimated 3.5 core-hours
    # against charlm's 4 - 6, from the full preset's step times halved by
    # issue 19's speed-up) joins the other's instead of leaving a core idle.
    if [ "$JOBS" -ge 2 ]; then
        { conv_brackets && conv_charlm; } &
        bpid=$!
        conv_charlm
        conv_brackets
        wait "$bpid"
    else
        conv_charlm
        conv_brackets
    fi
    ;;
samplers)
    # Sampled attention (spec section 7) against exact boltzmann and softmax
    # at T = 8: every sampler at 64, 256 and 1024 shots, 3 seeds, the same
    # steps for all (docs/samplers.md). SA runs 5 sweeps per shot to keep
    # its cost near the others'. The two tasks run side by side.
    SM=(--attn softmax,boltzmann --T 8 --seeds 3 --steps 1000 --batch 32 --lr 3e-3
        --sampler exact,direct,dqa,gibbs,sa --shots 64,256,1024 --sa-sweeps 5 --log-every 50
        --threads 1)
    ablate --task brackets --embd 16 "${SM[@]}" "${ONLY[@]}" --out "$OUT/brackets" &
    bpid=$!
    ablate --task charlm --embd 32 --eval-items 256 "${SM[@]}" --data "$DATA" "${ONLY[@]}" \
        --out "$OUT/charlm"
    wait "$bpid"
    ;;
long)
    # Long contexts (issue 15): charlm at T = 64, 256 and 1024 with softmax,
    # sigmoid, sigmoid with the log-n field bias, and Boltzmann attention
    # with relative couplings of range 4 and 8 and absolute couplings of
    # range 8 (exact at any T with the band engine: --engine auto), then
    # the relative models of T = 256 evaluated at T = 1024 (length
    # extrapolation). The cheapest, most informative grids go first, so an
    # interrupted preset has whole comparisons: T = 64, T = 256 (the
    # headline, more seeds), its extrapolation, T = 1024. Every step
    # resumes: finished runs and extrapolation entries are kept.
    # ---- the budget, from the cost model of docs/performance.md ("Long
    # ---- contexts"); each may also be given in the environment, but a
    # ---- summary (SUMMARY_ONLY, make results-doc) rewrites grid.json from
    # ---- these defaults, so change them here.
    # Seconds per step on one core of the development VM (B = 16; C = 128,
    # 2 layers, 4 heads, FFN), measured: T = 64: softmax 0.074, band W = 4
    # 0.10, W = 8 0.20; T = 256: 0.47, 0.87, 2.6. The model t(T) = a T +
    # b T^2 + c_W T^2 fits them (the band adds c_4 = 6.1e-6, c_8 = 3.2e-5 s
    # per T^2 at B = 16); at T = 1024 it predicts 4.7 s (softmax), 11 s
    # (W = 4) and 39 s (W = 8) per step. Hence: T = 64 every arm, 2000 steps
    # of 32 (4 M tokens, ~2.7 h of one core for 7 arms x 3 seeds); T = 256
    # (the headline, 5 seeds) 600 steps of 16 (2.5 M tokens, ~6.7 h of one
    # core); T = 1024 only the arms that fit, softmax, sigmoid with the
    # log-n bias and relative W = 4, 300 steps of 4 (1.2 M tokens, ~1.3 h)
    # (W = 8 there would cost ~10 s a step); with evaluations about 11.5
    # core-hours, under 6 hours on two cores. softmax without position
    # embeddings separates the relative arms' lack of them from their
    # couplings.
    LONG_ARMS=${LONG_ARMS:-softmax,softmax+pos-emb=none,sigmoid,sigmoid+log-n,boltzmann+relative+band4,boltzmann+relative+band8,boltzmann+band8}
    # Full-range relative couplings (one J per distance up to T - 1, no
    # band) need an approximate engine: T256_EXTRA_ARMS=boltzmann+relative+engine=tap
    # adds an arm trained with tap (issue 16: the engine that trained
    # closest to exact at T = 12 and 20 among those that scale to full
    # range) beside the exact banded arms. Not by default: measured on one
    # core (busy VM), steps take 5 - 10 s at first, but once the learning
    # rate peaks (step 30 - 40) the learned long antiferromagnetic tail
    # raises the rows' sweeps from 4 to about 20 and 1 - 2 % of them need
    # the sequential fallback (all converge since commit 66673b2): 15 - 27 s
    # a step, about 3 hours a run of 600 steps. With THREADS=2 (the GEMM
    # path splits the batch, same results) steps 95 - 110 took 8 s against
    # 16 s on one thread. The five committed runs took 1.6 - 2.7 hours each
    # (5 789 - 9 768 s, THREADS=2 on the 2-core VM).
    # A summary (SUMMARY_ONLY, make results-doc) keeps the committed arm:
    # results/long/charlm-T256 holds its runs.
    if [ -n "${SUMMARY_ONLY:-}" ]; then
        T256_EXTRA_ARMS=${T256_EXTRA_ARMS-boltzmann+relative+engine=tap}
    else
        T256_EXTRA_ARMS=${T256_EXTRA_ARMS-}
    fi
    T256_ARMS=$LONG_ARMS${T256_EXTRA_ARMS:+,$T256_EXTRA_ARMS}
    LONG_C=${LONG_C:-128}; LONG_LAYERS=${LONG_LAYERS:-2}; LONG_HEADS=${LONG_HEADS:-4}  # FFN on
    LONG_LR=${LONG_LR:-3e-3}
    T64_STEPS=${T64_STEPS:-2000}; T64_BATCH=${T64_BATCH:-32}; T64_SEEDS=${T64_SEEDS:-3}
    T64_EVAL_EVERY=${T64_EVAL_EVERY:-200}; T64_EVAL_ITEMS=${T64_EVAL_ITEMS:-256}; T64_LOG_EVERY=${T64_LOG_EVERY:-20}
    T256_STEPS=${T256_STEPS:-600}; T256_BATCH=${T256_BATCH:-16}; T256_SEEDS=${T256_SEEDS:-5}  # the headline
    T256_EVAL_EVERY=${T256_EVAL_EVERY:-100}; T256_EVAL_ITEMS=${T256_EVAL_ITEMS:-128}; T256_LOG_EVERY=${T256_LOG_EVERY:-10}
    T1024_STEPS=${T1024_STEPS:-300}; T1024_BATCH=${T1024_BATCH:-4}; T1024_SEEDS=${T1024_SEEDS:-3}
    T1024_EVAL_EVERY=${T1024_EVAL_EVERY:-50}; T1024_EVAL_ITEMS=${T1024_EVAL_ITEMS:-32}; T1024_LOG_EVERY=${T1024_LOG_EVERY:-5}
    T1024_ARMS=${T1024_ARMS:-softmax,sigmoid+log-n,boltzmann+relative+band4}   # the arms trained at T = 1024
    EXTRAP_T=${EXTRAP_T:-1024}             # the T = 256 models evaluated at this T
    EXTRAP_ITEMS=${EXTRAP_ITEMS:-0}        # validation windows per evaluation (0: all)
    EXTRAP_BATCH=${EXTRAP_BATCH:-8}
    # ----
    ENGINE=()  # auto: the band engine for banded arms, fast for the others
    JOBS=${JOBS:-$(( $(nproc) >= 2 ? 2 : 1 ))}
    [[ $JOBS =~ ^[12]$ ]] || { echo "JOBS must be 1 or 2 (chains side by side), not '$JOBS'" >&2; exit 2; }
    THREADS=${THREADS:-$(( $(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1 ))}
    [[ $THREADS =~ ^[1-9][0-9]*$ ]] || { echo "THREADS must be a positive integer, not '$THREADS'" >&2; exit 2; }
    TH=(--threads "$THREADS")
    # long_grid T STEPS BATCH SEEDS EVAL_EVERY EVAL_ITEMS LOG_EVERY ARMS
    long_grid() {
        ablate --task charlm --arm "$8" --T "$1" --embd "$LONG_C" --layers "$LONG_LAYERS" \
            --heads "$LONG_HEADS" --steps "$2" --batch "$3" --seeds "$4" --lr "$LONG_LR" \
            --eval-every "$5" --eval-items "$6" --log-every "$7" --data "$DATA" "${TH[@]}" \
            "${ONLY[@]}" --out "$OUT/charlm-T$1"
    }
    # the relative models of T = 256 at EXTRAP_T (one process at a time per
    # grid: the other chain skips it; entries already there are kept)
    extrapolate() {
        [ -n "${SUMMARY_ONLY:-}" ] && return 0
        [ -f "$OUT/charlm-T256/grid.json" ] || return 0
        "$BIN" ablate --out "$OUT/charlm-T256" --extrapolate "$EXTRAP_T" \
            --extrapolate-items "$EXTRAP_ITEMS" --batch "$EXTRAP_BATCH" --data "$DATA" "${TH[@]}"
    }
    # J by distance of each Ising arm of grid $1, from the checkpoints of
    # its finished seeds, as soon as the grid is done: checkpoints are not
    # committed, so an analysis left for the end of the preset is lost with
    # the machine if the preset is interrupted (the end of the script
    # repeats it over every grid).
    long_couplings() {
        [ -n "${SUMMARY_ONLY:-}" ] && return 0
        couplings_arms "$1" "$T256_ARMS"   # a superset of every long grid's arms
    }
    # Both chains walk the same grids: ablate locks each cell it trains, so
    # two processes share a grid's cells, each taking the next one free.
    long_chain() {
        long_grid 64 "$T64_STEPS" "$T64_BATCH" "$T64_SEEDS" "$T64_EVAL_EVERY" "$T64_EVAL_ITEMS" "$T64_LOG_EVERY" "$LONG_ARMS"
        long_couplings "$OUT/charlm-T64/"
        long_grid 256 "$T256_STEPS" "$T256_BATCH" "$T256_SEEDS" "$T256_EVAL_EVERY" "$T256_EVAL_ITEMS" "$T256_LOG_EVERY" "$T256_ARMS"
        long_couplings "$OUT/charlm-T256/"
        extrapolate
        long_grid 1024 "$T1024_STEPS" "$T1024_BATCH" "$T1024_SEEDS" "$T1024_EVAL_EVERY" "$T1024_EVAL_ITEMS" "$T1024_LOG_EVERY" "$T1024_ARMS"
        long_couplings "$OUT/charlm-T1024/"
    }
    if [ "$JOBS" -ge 2 ]; then
        long_chain &
        lpid=$!
        long_chain
        wait "$lpid"
    else
        long_chain
    fi
    # what the other chain was still training when this one extrapolated
    extrapolate
    ;;
approx)
    # The approximate engines (issue 16) trained as the full preset trains
    # the charlm headline (C = 32, 1 layer, 1 head, FFN, 20000 steps of 32,
    # lr 3e-3): boltzmann at T = 12 and 20 on each of mf, tap, bp and hybrid
    # (window 8), 3 seeds, paired by seed with the exact runs of
    # results/full (same seeds, data order and settings). Then the exact
    # runs again (engine fast): their checkpoints are what `boltzattn
    # approx --ckpt` and `eval --engine` measure the engines on (checkpoints
    # are not committed), and their perplexities must equal results/full's.
    # Cost on one core of the development VM: exact T = 12 about 90 s a
    # run, T = 20 about 23 minutes; the approximate engines take minutes a
    # run at T = 12 (their sweeps), more at T = 20.
    AX=(--steps 20000 --batch 32 --lr 3e-3 --seeds 3 --eval-every 2000 --eval-items 512 --log-every 200)
    APPROX_ENGINES=${APPROX_ENGINES:-mf,tap,bp,hybrid}
    ENGINE=()  # each grid names its engine
    JOBS=${JOBS:-$(( $(nproc) >= 2 ? 2 : 1 ))}
    [[ $JOBS =~ ^[12]$ ]] || { echo "JOBS must be 1 or 2 (chains side by side), not '$JOBS'" >&2; exit 2; }
    THREADS=${THREADS:-$(( $(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1 ))}
    [[ $THREADS =~ ^[1-9][0-9]*$ ]] || { echo "THREADS must be a positive integer, not '$THREADS'" >&2; exit 2; }
    TH=(--threads "$THREADS")
    approx_grid() { # T ENGINE
        ablate --task charlm --attn boltzmann --T "$1" --embd 32 "${AX[@]}" --engine "$2" \
            --data "$DATA" "${TH[@]}" "${ONLY[@]}" --out "$OUT/charlm-T$1-$2"
    }
    # both chains walk the same grids; ablate locks the cell it trains
    # Cheapest first, so an interrupted preset has whole comparisons. Steps
    # per second at T = 20 on one core (measured, busy machine): exact 14.6,
    # mf 18, tap 15, hybrid 3.1, bp 7.1 (1.2 before its messages were
    # vectorised): bp at T = 20 takes about 50 minutes a run, last.
    approx_chain() {
        approx_grid 12 fast
        for e in ${APPROX_ENGINES//,/ }; do approx_grid 12 "$e"; done
        for e in mf tap; do
            case ",$APPROX_ENGINES," in *",$e,"*) approx_grid 20 "$e" ;; esac
        done
        approx_grid 20 fast
        for e in hybrid bp; do
            case ",$APPROX_ENGINES," in *",$e,"*) approx_grid 20 "$e" ;; esac
        done
    }
    # What the document measures on exact-trained checkpoints (checkpoints
    # are not committed, so this is where they come from): brackets at
    # T = 16 (the full preset's headline width and settings, 3 seeds), then
    # every exact grid's runs evaluated with each approximate engine
    # (GRID/engines.json) and probed instance by instance against exact
    # inference (`approx --ckpt`, into accuracy.json). A rerun keeps the
    # engine evaluations already made and recomputes a checkpoint's probe
    # (seconds), replacing its record.
    approx_measure() {
        ablate --task brackets --attn boltzmann --T 16 --embd "${BR_C:-4}" --steps 16000 --batch 32 \
            --lr 3e-3 --seeds 3 --eval-every 2000 --eval-items 2000 --log-every 200 --engine fast \
            "${TH[@]}" "${ONLY[@]}" --out "$OUT/brackets-T16-fast"
        [ -n "${SUMMARY_ONLY:-}" ] && return 0
        local g d ck
        for g in charlm-T12-fast charlm-T20-fast brackets-T16-fast; do
            [ -f "$OUT/$g/grid.json" ] || continue
            d=()
            case $g in charlm*) d=(--data "$DATA") ;; esac
            "$BIN" ablate --out "$OUT/$g" --eval-engines "$APPROX_ENGINES" "${d[@]}" "${TH[@]}"
            for ck in "$OUT/$g"/runs/*/model.safetensors; do
                [ -f "$ck" ] || continue
                "$BIN" approx --ckpt "$ck" --instances 100 "${d[@]}" "${TH[@]}" --out "$OUT"
            done
        done
    }
    if [ "$JOBS" -ge 2 ]; then
        approx_chain &
        apid=$!
        approx_chain
        wait "$apid"
    else
        approx_chain
    fi
    approx_measure
    ;;
*)
    echo "unknown preset '$preset' (quick|full|converged|samplers|long|approx)" >&2
    exit 2
    ;;
esac

# The figures, the couplings and the report of every grid, from the run
# records (nothing typed by hand). A width sweep's learning curves and
# couplings are those of the headline width, not the widest (where every
# variant saturates).
for d in "$OUT"/*/; do
    [ -f "${d}grid.json" ] || continue
    wide=()
    case $(basename "$d") in
    brackets*) wide=(--prefer-C "${BR_C:-4}") ;;
    charlm*) wide=(--prefer-C "${LM_C:-32}") ;;
    esac
    curves=()
    case $(basename "$d") in
    brackets-width) curves=(--curves-C "${BR_C:-4}") ;;
    charlm-width) curves=(--curves-C "${LM_C:-32}") ;;
    esac
    "$BIN" plot "${d%/}" "${curves[@]}" || echo "plots skipped for ${d%/}"
    # J of the grid's boltzmann cell with the largest T over its finished
    # seeds; checkpoints are not committed (but the converged preset's), so
    # a clone keeps the committed analysis (couplings says there is nothing
    # to read and it stays, or finds fewer runs than it stands on).
    if [ "$preset" = long ]; then
        # one analysis per Ising arm, in couplings/SPEC/ (the report finds
        # an arm's by the variant its couplings.json names)
        couplings_arms "$d" "${T256_ARMS:-$LONG_ARMS}"
    elif "$BIN" couplings --grid "${d%/}" "${wide[@]}" --out "${d}couplings.new" >/dev/null 2>&1; then
        replace_couplings "${d}couplings.new" "${d}couplings"
    else
        rm -rf "${d}couplings.new"
    fi
done
end=$(date +%s)
echo "this invocation: $(( (end - start) / 60 )) minutes" >&2
# the approx preset's comparison is docs/approximate.md's, not a report's
[ "$preset" = approx ] && exit 0
# the report replaces report.md only once it is complete
"$BIN" report "$OUT" --preset "$preset" >"$OUT/report.md.tmp"
mv "$OUT/report.md.tmp" "$OUT/report.md"
echo "report: $OUT/report.md"
