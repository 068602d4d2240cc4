# Written by boltzattn. Re-run from this directory: gnuplot learning_curves.gp
set encoding utf8
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 900,650 enhanced font "sans,11"
} else {
    set terminal png size 900,650 enhanced
}
set output '../learning_curves.png'
set xlabel "training step"
set grid
set key outside right top vertical
set bars small
set offsets graph 0.03, graph 0.03, 0, 0
set title "validation metric during training (thick: mean over seeds; thin: each seed)\ncharlm, T=12, C=32: 10 seeds, 20000 steps\nlines: periodic evaluations on the same 512 items\nopen points: final evaluation on all items (bar: the seeds' range)"
set ylabel "validation perplexity (lower is better)"
set logscale y
set ytics autofreq
set yrange [6.75667:10.0992]
set ytics (7, 7.5, 8, 8.5, 9, 9.5, 10)
plot 'curves_charlm_T12_C32_ffn1.dat' index 1 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 2 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 3 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 4 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 5 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 6 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 7 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 8 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 9 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 10 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 13 using 1:2 with lines linewidth 1 linecolor rgb "#80ff7f0e" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 14 using 1:2 with lines linewidth 1 linecolor rgb "#80ff7f0e" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 15 using 1:2 with lines linewidth 1 linecolor rgb "#80ff7f0e" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 16 using 1:2 with lines linewidth 1 linecolor rgb "#80ff7f0e" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 17 using 1:2 with lines linewidth 1 linecolor rgb "#80ff7f0e" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 18 using 1:2 with lines linewidth 1 linecolor rgb "#80ff7f0e" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 19 using 1:2 with lines linewidth 1 linecolor rgb "#80ff7f0e" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 20 using 1:2 with lines linewidth 1 linecolor rgb "#80ff7f0e" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 21 using 1:2 with lines linewidth 1 linecolor rgb "#80ff7f0e" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 22 using 1:2 with lines linewidth 1 linecolor rgb "#80ff7f0e" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 25 using 1:2 with lines linewidth 1 linecolor rgb "#80d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 26 using 1:2 with lines linewidth 1 linecolor rgb "#80d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 27 using 1:2 with lines linewidth 1 linecolor rgb "#80d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 28 using 1:2 with lines linewidth 1 linecolor rgb "#80d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 29 using 1:2 with lines linewidth 1 linecolor rgb "#80d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 30 using 1:2 with lines linewidth 1 linecolor rgb "#80d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 31 using 1:2 with lines linewidth 1 linecolor rgb "#80d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 32 using 1:2 with lines linewidth 1 linecolor rgb "#80d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 33 using 1:2 with lines linewidth 1 linecolor rgb "#80d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 34 using 1:2 with lines linewidth 1 linecolor rgb "#80d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 37 using 1:2 with lines linewidth 1 linecolor rgb "#802ca02c" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 38 using 1:2 with lines linewidth 1 linecolor rgb "#802ca02c" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 39 using 1:2 with lines linewidth 1 linecolor rgb "#802ca02c" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 40 using 1:2 with lines linewidth 1 linecolor rgb "#802ca02c" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 41 using 1:2 with lines linewidth 1 linecolor rgb "#802ca02c" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 42 using 1:2 with lines linewidth 1 linecolor rgb "#802ca02c" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 43 using 1:2 with lines linewidth 1 linecolor rgb "#802ca02c" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 44 using 1:2 with lines linewidth 1 linecolor rgb "#802ca02c" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 45 using 1:2 with lines linewidth 1 linecolor rgb "#802ca02c" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 46 using 1:2 with lines linewidth 1 linecolor rgb "#802ca02c" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 0 using 1:3 with linespoints linewidth 2 pointtype 7 pointsize 1.2 linecolor rgb "#1f77b4" title "softmax" noenhanced, \
     'curves_charlm_T12_C32_ffn1.dat' index 11 using ($1-360):3:5:6 with yerrorbars linewidth 2 pointtype 6 pointsize 2 linecolor rgb "#1f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 12 using 1:3 with linespoints linewidth 2 pointtype 5 pointsize 1.2 linecolor rgb "#ff7f0e" title "sigmoid" noenhanced, \
     'curves_charlm_T12_C32_ffn1.dat' index 23 using ($1-120):3:5:6 with yerrorbars linewidth 2 pointtype 4 pointsize 2 linecolor rgb "#ff7f0e" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 24 using 1:3 with linespoints linewidth 2 pointtype 9 pointsize 1.2 linecolor rgb "#d62728" title "boltzmann" noenhanced, \
     'curves_charlm_T12_C32_ffn1.dat' index 35 using ($1+120):3:5:6 with yerrorbars linewidth 2 pointtype 8 pointsize 2 linecolor rgb "#d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 36 using 1:3 with linespoints linewidth 2 pointtype 13 pointsize 1.2 linecolor rgb "#2ca02c" title "coupling" noenhanced, \
     'curves_charlm_T12_C32_ffn1.dat' index 47 using ($1+360):3:5:6 with yerrorbars linewidth 2 pointtype 12 pointsize 2 linecolor rgb "#2ca02c" notitle, \
     NaN with points pointtype 6 pointsize 2 linewidth 2 linecolor rgb "black" title "final, all 9294 items"
