#!/usr/bin/env bash
# Writes the results report of a reproduce output directory to stdout,
# generated from its files (results.csv, summary.md, metrics logs, coupling
# tables): no number in it is typed by hand. Works on a partial grid: the
# summaries say which runs are missing.
# usage: tools/report.sh OUT PRESET [LINK_PREFIX] [BIN]
#   LINK_PREFIX is put before image paths (relative to OUT by default), so
#   docs/results.md can link into docs/results-full/.
set -euo pipefail
OUT=${1:?usage: report.sh OUT PRESET [LINK_PREFIX] [BIN]}
preset=${2:?usage: report.sh OUT PRESET [LINK_PREFIX] [BIN]}
prefix=${3:-}
BIN=${4:-build/boltzattn}

# The lines of one "### heading" section of a summary.md (without the heading).
section() {
    awk -v h="## $2" '$0 == h {on = 1; next} on && /^##/ {exit} on {print}' "$1"
}

# Per finished run of a grid, how much the validation metric still moved
# late in training: from the periodic evaluation nearest 70 % of the steps
# (the one before the last when that is the last) to the last periodic one,
# the same items both times, from each run's metrics.jsonl: charlm in % of
# perplexity, brackets in accuracy points. One line per run, sorted:
# "T<T> C<C> ffn<f> VARIANT CHANGE FROM_STEP TO_STEP".
conv_rows() {
    local grid=$1
    for m in "$grid"/runs/*/metrics.jsonl; do
        [ -f "$m" ] || continue
        [ -f "$(dirname "$m")/result.json" ] || continue
        name=$(basename "$(dirname "$m")")
        awk -v name="$name" '
            function num(key,   r) {
                if (match($0, "\"" key "\":[-+0-9.eE]+")) {
                    r = substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
                    return r + 0
                }
                return "x"
            }
            /"event":"config"/ { steps = num("steps") }
            /"event":"eval"/ { n++; st[n] = num("step"); ppl[n] = num("val_ppl"); acc[n] = num("val_acc") }
            END {
                if (n < 2 || steps == "x") exit
                best = 1
                for (i = 1; i <= n; i++)
                    if ((st[i] - 0.7 * steps) ^ 2 < (st[best] - 0.7 * steps) ^ 2) best = i
                if (best == n) best = n - 1
                split(name, p, "-")
                if (p[1] == "charlm") d = 100 * (ppl[n] / ppl[best] - 1)
                else d = 100 * (acc[n] - acc[best])
                printf "%s %s %s %s %.4f %d %d\n", p[2], p[3], p[4], p[5], d, st[best], st[n]
            }' "$m"
    done | sort -k1.2,1n -k2.2b,2n -k3b,3
}

# Per (T, C, ffn) cell of a grid, in order: "T<T> C<C> ffn<f> RUNS MEAN
# LARGEST FROM TO", the mean and the largest (in size) late change over its
# runs.
conv_cells() {
    conv_rows "$1" | awk '
        {
            key = $1 " " $2 " " $3
            if (!(key in seen)) { seen[key] = 1; order[++k] = key }
            n[key]++; s[key] += $5; a = $5 < 0 ? -$5 : $5
            if (a > w[key]) { w[key] = a; wv[key] = $5 }
            from[key] = $6; to[key] = $7
        }
        END {
            for (i = 1; i <= k; i++) {
                key = order[i]
                printf "%s %d %.17g %.17g %d %d\n", key, n[key], s[key] / n[key], wv[key], from[key], to[key]
            }
        }'
}

# The convergence table of a grid: per cell, the mean and the largest change
# over its runs. Small numbers mean the curves are flat at the end.
convergence() {
    conv_cells "$1" | awk -v task="$(basename "$1")" '
        NR == 1 {
            unit = task ~ /^charlm/ ? "% of perplexity" : "accuracy points"
            printf "| T | C | FFN | runs | mean change (%s) | largest change | steps compared |\n", unit
            print "|---|---|---|---|---|---|---|"
        }
        {
            printf "| %s | %s | %s | %d | %+.2f | %+.2f | %d -> %d |\n", substr($1, 2), substr($2, 2), $3 == "ffn1" ? "yes" : "no", $4, $5, $6, $7, $8
        }
        END { if (NR == 0) print "(no finished runs with learning curves)" }'
}

# One row per grid for the overview: the cell whose mean late change is
# largest in size, and a verdict: "flat" when every cell's mean change is
# within +-LIMIT (% of perplexity or accuracy points), else "still
# improving" (perplexity falling, accuracy rising) or "still getting worse".
CONV_LIMIT=0.5
conv_overview_row() {
    conv_cells "$1" | awk -v task="$(basename "$1")" -v lim="$CONV_LIMIT" '
        { runs += $4; if (NR == 1 || $5 * $5 > m * m) { m = $5; T = $1; C = $2; f = $3; from = $7; to = $8 } }
        END {
            if (NR == 0) exit
            lm = task ~ /^charlm/
            if (m <= lim && m >= -lim) v = "flat"
            else if ((lm && m < 0) || (!lm && m > 0)) v = "still improving"
            else v = "still getting worse"
            printf "| %s | %d | %s | T = %s, C = %s, %s FFN | %+.2f | %d -> %d | %s |\n", task, runs,
                lm ? "% of perplexity" : "accuracy points", substr(T, 2), substr(C, 2),
                f == "ffn1" ? "with" : "without", m, from, to, v
        }'
}

# The widest C of a width sweep at which no variant's mean accuracy reaches
# 99 %, per FFN setting (brackets only), from results.csv.
saturation() {
    awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) col[$i] = i; next}
        ("sampler" in col) && $col["sampler"] != "exact" {next}
        {k = $col["C"] "," $col["ffn"] "," $col["variant"]; s[k] += $col["value"]; n[k]++; cs[$col["C"]] = 1; fs[$col["ffn"]] = 1}
        END {
            print "| C | FFN | best variant mean (%) | saturated (>= 99 %) |"
            print "|---|---|---|---|"
            for (c in cs) for (f in fs) {
                best = -1; bv = ""
                for (k in s) { split(k, p, ","); if (p[1] == c && p[2] == f && s[k] / n[k] > best) { best = s[k] / n[k]; bv = p[3] } }
                if (best >= 0) printf("%d|%s|%s|%.2f|%s\n", c, f, bv, 100 * best, (100 * best >= 99 ? "yes" : "no"))
            }
        }' "$1" | {
        read -r h1; read -r h2; echo "$h1"; echo "$h2"
        sort -t'|' -k1,1n -k2,2r | awk -F'|' '{printf "| %s | %s | %s %s | %s |\n", $1, $2 == 1 ? "yes" : "no", $4, "(" $3 ")", $5}'
    }
}

# Every effect of a grid against softmax, with a verdict computed from its
# confidence interval, from effects.csv (written by ablate).
verdicts() {
    awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) col[$i] = i; next}
        $col["variant"] != "softmax" {
            unit = $col["unit"] == "percent" ? " %" : ""
            e = $col["effect"]; lo = $col["ci_lo"]; hi = $col["ci_hi"]
            better = $col["unit"] == "percent" ? -1 : 1  # lower perplexity is better
            if (e == "") { eff = "missing"; v = "not measured" }
            else if (lo == "") { eff = sprintf("%+.2f%s (one pair)", e, unit); v = "too few seeds" }
            else {
                eff = sprintf("%+.2f%s [%+.2f, %+.2f]", e, unit, lo, hi)
                if (lo > 0 || hi < 0) v = ((e * better > 0) ? "better than softmax" : "worse than softmax")
                else v = "no resolved difference"
            }
            if ($col["paper"] != "") {
                split($col["paper"], pp, " "); pv = pp[1] + 0
                if (lo != "") v = v ((pv >= lo && pv <= hi) ? "; the paper'"'"'s value is inside the interval" : "; the paper'"'"'s value is outside the interval")
            }
            label = $col["variant"]
            if (("sampler" in col) && $col["sampler"] != "exact") label = label " (" $col["sampler"] ", S=" $col["shots"] ")"
            printf "| %s | %s | %s | %s | %s | %d/%d | %s | %s | %s |\n", $col["task"], $col["T"], $col["C"], $col["ffn"] == 1 ? "yes" : "no", label, $col["pairs"], $col["seeds"], eff, $col["paper"], v
        }' "$1"
}

# The coupling J by key distance of a couplings/ directory (written by
# `boltzattn couplings`), next to the paper's sign pattern (J > 0 for
# d = 2..4, J < 0 for d >= 6). With several runs (distance_runs.csv) the
# verdict per distance is read off the 95 % interval over runs.
jtable() {
    local c=$1 n cell
    n=$(grep -c . "$c/runs.txt" 2>/dev/null || echo 0)
    cell=$(head -n 1 "$c/runs.txt" 2>/dev/null | xargs -r dirname | xargs -r basename | sed 's/-s[0-9]*$//')
    if [ -f "$c/distance_runs.csv" ]; then
        echo "Coupling J by key distance d = k - j in cell \`$cell\`, over its $n seeds: each run's mean J over its pairs (all layers and heads), then the mean, standard deviation and 95 % interval over the runs. The paper reports J > 0 for d = 2..4 and J < 0 for d >= 6; the verdict is read off the interval."
        echo
        echo '| distance | mean J | sd over seeds | 95 % interval | seeds with J > 0 | paper | verdict |'
        echo '|---|---|---|---|---|---|---|'
        awk -F, 'NR > 1 {
            paper = ($1 >= 2 && $1 <= 4) ? "> 0" : ($1 >= 6 ? "< 0" : "")
            side = $5 > 0 ? 1 : ($6 < 0 ? -1 : 0)
            want = paper == "> 0" ? 1 : (paper == "< 0" ? -1 : 0)
            if (side == 0) v = "sign not resolved"
            else if (want == 0) v = (side > 0 ? "positive" : "negative") " (the paper says nothing)"
            else v = side == want ? "agrees" : "opposite sign"
            printf "| %d | %+.4f | %.4f | [%+.4f, %+.4f] | %d of %d | %s | %s |\n", $1, $3, $4, $5, $6, $7, $2, paper, v
        }' "$c/distance_runs.csv"
    else
        local run
        if [ -f "$c/runs.txt" ]; then
            run=$(basename "$(dirname "$(head -n 1 "$c/runs.txt")")")
        else
            run=$(cat "$c/run.txt" 2>/dev/null || true)  # written by older versions
        fi
        echo "Mean coupling J by key distance d = k - j of run \`$run\` (all its layers and heads; the paper reports J > 0 for d = 2..4 and J < 0 for d >= 6):"
        echo
        echo '| distance | mean J | sd |'
        echo '|---|---|---|'
        awk -F, '$1=="all" {printf "| %s | %+.4f | %.4f |\n", $3, $5, $6}' "$c/distance.csv"
    fi
}

# "RUNS HOURS": the finished runs and their summed training time, a run
# shared between grids (copied by share_runs.sh: same cell, steps and
# result) counted once
total_time() {
    cat "$OUT"/*/results.csv 2>/dev/null |
        awk -F, '$1 == "task" {for (i = 1; i <= NF; i++) col[$i] = i; next}
            {k = $col["task"] FS $col["variant"] FS $col["T"] FS $col["C"] FS $col["ffn"] FS $col["seed"] FS \
                 $col["steps"] FS $col["sampler"] FS $col["shots"] FS $col["value"]
             if (!(k in seen)) { seen[k] = 1; n++; s += $col["wall_s"] }}
            END {printf "%d %.1f", n, s / 3600}'
}

echo "# Results: preset \`$preset\`"
echo
echo "Generated by \`tools/report.sh\` from the files under \`$OUT\` on $(date -u +%Y-%m-%d); nothing below is typed by hand."
echo "The grids were run by \`make reproduce PRESET=$preset\` (\`tools/reproduce.sh $preset\`), which resumes an interrupted grid."
echo "Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; boltzattn $("$BIN" version 2>/dev/null | cut -d' ' -f2 || echo '?')."
read -r nruns hours <<<"$(total_time)"
# threads per run, from the runs' own config records
threads=$(for f in "$OUT"/*/runs/*/metrics.jsonl; do head -n 1 "$f"; done 2>/dev/null |
    grep -o '"threads":[0-9]*' | cut -d: -f2 | sort -un | paste -sd/ -) || threads=""
line="Training time of the $nruns distinct finished runs (a run shared between grids counted once), summed: $hours hours"
[ -n "$threads" ] && line="$line, $threads thread(s) per run"
if [ "$preset" = full ]; then
    line="$line; the preset runs its brackets and charlm chains side by side (\`JOBS=2\`, its default on 2 or more cores), two runs at a time, so its wall time is at least half that, $(awk -v h="$hours" 'BEGIN {printf "%.1f", h / 2}') hours"
fi
echo "$line."
echo

echo "| grid | runs finished |"
echo "|---|---|"
for d in "$OUT"/*/; do
    [ -f "$d/summary.md" ] || continue
    echo "| $(basename "$d") | $(grep -o -m1 '^[0-9]* of [0-9]* runs finished' "$d/summary.md" | sed 's/ runs finished//') |"
done
echo

echo "## Are the runs converged?"
echo
echo "Per grid, the cell (T, C, FFN) whose validation metric still moved most late in training: the mean change over its runs between the periodic evaluations at the steps shown (the same items both times). 'flat' means every cell of the grid moved by less than $CONV_LIMIT (% of perplexity or accuracy points), half the effect the grids are sized to resolve; otherwise the direction is named. Each grid's section has the table per cell."
echo
rows=$(for d in "$OUT"/*/; do
    if [ -d "${d}runs" ]; then conv_overview_row "${d%/}"; fi
done)
if [ -n "$rows" ]; then
    echo "| grid | runs | unit | cell that moved most | its mean change | steps compared | verdict |"
    echo "|---|---|---|---|---|---|---|"
    echo "$rows"
else
    echo "(no finished runs with periodic evaluations: \`--eval-every\` was not set)"
fi
echo

if [ "$preset" = full ]; then
    echo "## Headline rows"
    echo
    for spec in "charlm-T12|T = 12, C = ${LM_C:-32}, with FFN" "charlm-40k|T = 12, C = ${LM_C:-32}, with FFN" "charlm-80k|T = 12, C = ${LM_C:-32}, with FFN" \
        "brackets|T = 16, C = ${BR_C:-4}, with FFN" "brackets|T = 16, C = ${BR_C:-4}, without FFN" \
        "brackets|T = 20, C = ${BR_C:-4}, with FFN" "brackets|T = 20, C = ${BR_C:-4}, without FFN" \
        "charlm|T = 20, C = ${LM_C:-32}, with FFN" \
        "brackets-T24|T = 24, C = ${BR_C:-4}, with FFN" "brackets-T24|T = 24, C = ${BR_C:-4}, without FFN"; do
        grid=${spec%%|*} head=${spec#*|}
        [ -f "$OUT/$grid/summary.md" ] || continue
        body=$(section "$OUT/$grid/summary.md" "$head")
        [ -n "$body" ] || continue
        echo "### $grid: $head"
        echo "$body"
        echo
    done
    echo "### Against the paper"
    echo
    echo "Every variant against softmax on the same seeds at the headline widths (effect: relative perplexity change, negative is better, for charlm; accuracy points for brackets; 95 % confidence interval over seeds). The verdict is read off the interval: 'better' or 'worse' only when it excludes zero."
    echo
    echo "| task | T | C | FFN | variant | pairs/seeds | effect [95 % CI] | paper | verdict |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for grid in charlm-T12 charlm brackets brackets-T24; do
        [ -f "$OUT/$grid/effects.csv" ] && verdicts "$OUT/$grid/effects.csv"
    done
    echo
    budget=()
    for grid in charlm-T12 charlm-40k charlm-80k; do
        [ -f "$OUT/$grid/effects.csv" ] && budget+=("$grid")
    done
    if [ "${#budget[@]}" -gt 1 ]; then
        echo "### The headline row as the training budget grows"
        echo
        echo "charlm at T = 12 with the same settings and seeds but more steps (the cosine schedule stretched over them). Perplexity still falls with more steps (see the convergence overview); this shows whether the effect moves with it."
        echo
        echo "| steps | task | T | C | FFN | variant | pairs/seeds | effect [95 % CI] | paper | verdict |"
        echo "|---|---|---|---|---|---|---|---|---|---|"
        for grid in "${budget[@]}"; do
            steps=$(awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) col[$i] = i; next} {print $col["steps"]; exit}' "$OUT/$grid/results.csv")
            verdicts "$OUT/$grid/effects.csv" | sed "s/^| /| $steps | /"
        done
        echo
    fi
    if [ -f "$OUT/brackets-width/effects.csv" ] || [ -f "$OUT/charlm-width/effects.csv" ]; then
        echo "### Against the paper across widths (T = 16)"
        echo
        echo "The same comparison at every width of the sweeps, so an effect can be seen to grow, shrink or vanish as the model widens; where a width saturates (next table) no gap can show."
        echo
        echo "| task | T | C | FFN | variant | pairs/seeds | effect [95 % CI] | paper | verdict |"
        echo "|---|---|---|---|---|---|---|---|---|"
        for grid in brackets-width charlm-width; do
            [ -f "$OUT/$grid/effects.csv" ] && verdicts "$OUT/$grid/effects.csv"
        done
        echo
    fi
    if [ -f "$OUT/charlm-T12/couplings/distance.csv" ]; then
        echo "### Couplings against the paper's sign pattern (charlm, T = 12)"
        echo
        jtable "$OUT/charlm-T12/couplings"
        echo
    fi
    if [ -f "$OUT/brackets-width/results.csv" ]; then
        echo "### Where brackets saturate (T = 16, width sweep)"
        echo
        saturation "$OUT/brackets-width/results.csv"
        echo
    fi
fi

for d in "$OUT"/*/; do
    [ -f "$d/summary.md" ] || continue
    name=$(basename "$d")
    echo "## $name"
    echo
    sed -e '1d' -e 's/^## /### /' "$d/summary.md"
    echo
    echo "#### Convergence"
    echo
    echo "Change of the validation metric late in training, between the periodic evaluations (same items) at the steps shown; near zero means the curves are flat:"
    echo
    convergence "${d%/}"
    echo
    for png in "$d"*.png "$d"couplings/*.png; do
        [ -f "$png" ] && echo "![$(basename "$png")]($prefix${png#"$OUT"/})"
    done
    if [ -f "${d}couplings/distance.csv" ]; then
        echo
        jtable "${d}couplings"
    fi
    echo
done
