#!/usr/bin/env bash
# Writes the section "Training with sampled statistics" of docs/samplers.md
# from the files of `make reproduce PRESET=samplers` (results.csv,
# summary.md and the runs' metrics logs): nothing in it is typed by hand.
# usage: tools/samplers_report.sh OUT DOC
#   OUT  the samplers grid (default docs/samplers-runs)
#   DOC  the markdown file whose section, from its heading to the end, is
#        replaced (default docs/samplers.md)
set -euo pipefail
OUT=${1:-docs/samplers-runs}
DOC=${2:-docs/samplers.md}
HEAD="## Training with sampled statistics"
[ -f "$DOC" ] || { echo "samplers_report: no $DOC" >&2; exit 2; }
grep -qx "$HEAD" "$DOC" || { echo "samplers_report: $DOC has no '$HEAD' heading" >&2; exit 2; }

# Each sampled boltzmann arm against exact boltzmann on the same seeds, from
# results.csv: the value with the arm's own sampler and with exact inference
# (means over seeds), the paired difference of the former to exact training
# with its 95 % interval, and the training time relative to exact.
versus_exact() {
    awk -F, '
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $c["variant"] != "boltzmann" { next }
        {
            task = $c["task"]; v = $c["value"] + 0; x = $c["exact_value"]
            if (task == "brackets") { v *= 100; if (x != "") x *= 100 }
            key = $c["sampler"] " " $c["shots"]
            if ($c["sampler"] == "exact") { ref[$c["seed"]] = v; reft += $c["wall_s"]; refn++; next }
            if (!(key in seen)) { seen[key] = 1; order[++k] = key }
            n[key]++; sv[key] += v; wall[key] += $c["wall_s"]
            if (x != "") { nx[key]++; sx[key] += x }
            val[key, n[key]] = v; sd_[key, n[key]] = $c["seed"]
        }
        END {
            split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262", tq, " ")
            unit = task == "charlm" ? "%" : "points"
            printf "| sampler | S | runs | with its sampler | with exact inference | vs exact training (%s, 95 %% CI) | verdict | training time (s) | vs exact |\n", unit
            print "|---|---|---|---|---|---|---|---|---|"
            for (i = 1; i <= k; i++) {
                key = order[i]; split(key, p, " ")
                m = 0; np = 0
                for (j = 1; j <= n[key]; j++) {
                    s = sd_[key, j]
                    if (!(s in ref)) continue
                    d = task == "charlm" ? 100 * (val[key, j] / ref[s] - 1) : val[key, j] - ref[s]
                    dd[++np] = d; m += d
                }
                eff = "no exact pair"; verdict = "not measured"
                if (np > 0) {
                    m /= np
                    if (np > 1) {
                        ss = 0; for (j = 1; j <= np; j++) ss += (dd[j] - m) ^ 2
                        h = tq[np - 1] * sqrt(ss / (np - 1)) / sqrt(np)
                        eff = sprintf("%+.2f [%+.2f, %+.2f]", m, m - h, m + h)
                        better = task == "charlm" ? -1 : 1
                        if (m - h > 0 || m + h < 0) verdict = (m * better > 0 ? "better than exact" : "worse than exact")
                        else verdict = "no resolved difference"
                    } else { eff = sprintf("%+.2f (one pair)", m); verdict = "too few seeds" }
                }
                fmt = task == "charlm" ? "%.3f" : "%.2f"
                own = sprintf(fmt, sv[key] / n[key])
                ex = nx[key] ? sprintf(fmt, sx[key] / nx[key]) : "-"
                tr = refn ? sprintf("%.1f x", (wall[key] / n[key]) / (reft / refn)) : "-"
                printf "| %s | %s | %d | %s | %s | %s | %s | %.1f | %s |\n", p[1], p[2], n[key], own, ex, eff, verdict, wall[key] / n[key], tr
            }
        }' "$1"
}

# Sample quality along training from the "quality" records of each sampled
# run (the first evaluation and the end), averaged over seeds.
quality() {
    for m in "$1"/runs/*-boltzmann-s*-*-S*/metrics.jsonl; do
        [ -f "$m" ] || continue
        arm=$(basename "$(dirname "$m")" | sed 's/.*-s[0-9]*-\([a-z]*\)-S\([0-9]*\)$/\1 \2/')
        awk -v arm="$arm" '
            function num(key,   r) {
                if (match($0, "\"" key "\":[-+0-9.eE]+")) return substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3) + 0
                return "x"
            }
            /"event":"quality"/ {
                q++
                if (q == 1) { t1 = num("tv"); b1 = num("beta_eff") }
                tl = num("tv"); bl = num("beta_eff"); el = num("tv_eff"); fl = num("tv_shot_floor"); sl = num("step")
            }
            END { if (q) print arm, t1, tl, b1, bl, el, fl, sl }' "$m"
    done | sort -k1,1 -k2,2n | awk '
        {
            key = $1 " " $2
            if (!(key in n)) order[++k] = key
            # beta_eff and tv_eff are "x" where no temperature could be fitted
            n[key]++; t1[key] += $3; tl[key] += $4
            if ($5 != "x") { nb1[key]++; b1[key] += $5 }
            if ($6 != "x") { nbl[key]++; bl[key] += $6; el[key] += $7 }
            if ($8 != "x") { fn[key]++; fl[key] += $8 }
            last[key] = $9
        }
        END {
            if (!k) { print "(no sampled runs with quality records yet)"; exit }
            print "| sampler | S | runs | TV to β = 1, first evaluation | TV at the end | β_eff first | β_eff at the end | TV to Boltzmann(β_eff) at the end | shot-noise floor of TV at the end |"
            print "|---|---|---|---|---|---|---|---|---|"
            for (i = 1; i <= k; i++) {
                key = order[i]; split(key, p, " ")
                printf "| %s | %s | %d | %.3f | %.3f | %s | %s | %s | %s |\n", p[1], p[2], n[key], t1[key] / n[key], tl[key] / n[key], nb1[key] ? sprintf("%.3g", b1[key] / nb1[key]) : "no fit", nbl[key] ? sprintf("%.3g", bl[key] / nbl[key]) : "no fit", nbl[key] ? sprintf("%.3f", el[key] / nbl[key]) : "no fit", fn[key] ? sprintf("%.3f", fl[key] / fn[key]) : "none (exact output distribution)"
            }
        }'
}

# The settings, read back from the config record of one sampled run of each
# kind (so they cannot drift from what ran).
settings() {
    for kind in dqa gibbs sa; do
        m=$(ls "$1"/runs/*-"$kind"-S*/metrics.jsonl 2>/dev/null | head -n 1)
        [ -n "$m" ] || continue
        head -n 1 "$m" | grep -o '"sampler":{[^}]*}' | sed "s/^/- $kind: \`/; s/\$/\`/"
    done
    m=$(ls "$1"/runs/*/metrics.jsonl 2>/dev/null | head -n 1)
    [ -n "$m" ] && head -n 1 "$m" | grep -o '"train":{[^}]*}' | sed 's/^/- training: `/; s/$/`/'
}

section() {
    echo "$HEAD"
    echo
    echo "Generated by \`tools/samplers_report.sh $OUT $DOC\` on $(date -u +%Y-%m-%d) from the files of"
    echo "\`make reproduce PRESET=samplers OUT=$OUT\` (\`tools/reproduce.sh samplers\`): brackets and charlm at T = 8, softmax, exact boltzmann, and boltzmann trained and evaluated with each sampler at 64, 256 and 1024 shots per query, the same seeds, data order and steps for all; one thread per run on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores. Nothing below is typed by hand."
    echo
    echo "The gradient of a sampled run is the estimator of docs/design.md (\"Sampled attention\") with \`beta_assumed\` = 1: it treats the shots as if they came from the β = 1 distribution, whatever the sampler's real temperature. Sample quality is measured at every evaluation on the Ising systems the model meets (the last query of the first evaluation items, layer 0, head 0; \`quality\` records of metrics.jsonl, docs/design.md)."
    echo
    echo "Settings of the runs (from their config records):"
    echo
    for task in brackets charlm; do
        [ -d "$OUT/$task/runs" ] || continue
        echo "$task:"
        echo
        settings "$OUT/$task"
        echo
    done
    for task in brackets charlm; do
        [ -f "$OUT/$task/summary.md" ] || continue
        echo "### $task"
        echo
        sed -e '1,2d' -e 's/^## /#### /' "$OUT/$task/summary.md"
        echo
        echo "#### Against exact training"
        echo
        echo "Each sampled arm against exact boltzmann on the same seeds (relative perplexity change for charlm, negative is better; accuracy points for brackets), with the value of the same weights under exact inference and the mean training time of a run (its steps and periodic evaluations, one thread), also relative to the exact run (exact boltzmann took $(awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) c[$i] = i; next} $c["variant"] == "boltzmann" && $c["sampler"] == "exact" {s += $c["wall_s"]; n++} END {printf "%.1f", n ? s / n : 0}' "$OUT/$task/results.csv") s):"
        echo
        versus_exact "$OUT/$task/results.csv"
        echo
        echo "#### Sample quality along training"
        echo
        echo "Measured on the model's own systems at its first evaluation and at the end, each with 16,384 shots of the arm's sampler whatever the arm's S (DQA: its exact output distribution); the floor is the direct sampler's TV on the same systems, i.e. pure shot noise. Means over seeds:"
        echo
        quality "$OUT/$task"
        echo
        for png in "$OUT/$task"/*.png; do
            [ -f "$png" ] && echo "![$(basename "$png")]($(realpath --relative-to="$(dirname "$DOC")" "$png"))"
        done
        echo
    done
}

tmp="$DOC.tmp"
{
    sed "/^$HEAD\$/,\$d" "$DOC"
    section
} >"$tmp"
mv "$tmp" "$DOC"
echo "wrote $DOC"
