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
set title "validation metric during training (thick: mean over seeds; thin: each seed)\ncharlm, T=12, C=32: 5 seeds, 80000 steps\nlines: periodic evaluations on the same 512 items\nopen points: final evaluation on all items (bar: the seeds' range)"
set ylabel "validation perplexity (lower is better)"
set logscale y
set ytics autofreq
set yrange [6.64801:8.01244]
set ytics (6.75, 7, 7.25, 7.5, 7.75, 8)
plot 'curves_charlm_T12_C32_ffn1.dat' index 1 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 2 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 3 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 4 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 5 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 8 using 1:2 with lines linewidth 1 linecolor rgb "#80d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 9 using 1:2 with lines linewidth 1 linecolor rgb "#80d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 10 using 1:2 with lines linewidth 1 linecolor rgb "#80d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 11 using 1:2 with lines linewidth 1 linecolor rgb "#80d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 12 using 1:2 with lines linewidth 1 linecolor rgb "#80d62728" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 0 using 1:3 with linespoints linewidth 2 pointtype 7 pointsize 1.2 linecolor rgb "#1f77b4" title "softmax" noenhanced, \
     'curves_charlm_T12_C32_ffn1.dat' index 6 using ($1-480):3:5:6 with yerrorbars linewidth 2 pointtype 6 pointsize 2 linecolor rgb "#1f77b4" notitle, \
     'curves_charlm_T12_C32_ffn1.dat' index 7 using 1:3 with linespoints linewidth 2 pointtype 9 pointsize 1.2 linecolor rgb "#d62728" title "boltzmann" noenhanced, \
     'curves_charlm_T12_C32_ffn1.dat' index 13 using ($1+480):3:5:6 with yerrorbars linewidth 2 pointtype 8 pointsize 2 linecolor rgb "#d62728" notitle, \
     NaN with points pointtype 6 pointsize 2 linewidth 2 linecolor rgb "black" title "final, all 9294 items"
