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
set title "validation metric during training (thick: mean over seeds; thin: each seed)\ncharlm, T=1024, C=128: 3 seeds, 300 steps\nlines: periodic evaluations on the same 32 items\nopen points: final evaluation on all items (bar: the seeds' range)"
set ylabel "validation perplexity (lower is better)"
set logscale y
set ytics autofreq
set yrange [11.774:12.9371]
set ytics (11.8, 12, 12.2, 12.4, 12.6, 12.8)
plot 'curves_charlm_T1024_C128_ffn1.dat' index 1 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T1024_C128_ffn1.dat' index 2 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T1024_C128_ffn1.dat' index 3 using 1:2 with lines linewidth 1 linecolor rgb "#801f77b4" notitle, \
     'curves_charlm_T1024_C128_ffn1.dat' index 6 using 1:2 with lines linewidth 1 linecolor rgb "#808c564b" notitle, \
     'curves_charlm_T1024_C128_ffn1.dat' index 7 using 1:2 with lines linewidth 1 linecolor rgb "#808c564b" notitle, \
     'curves_charlm_T1024_C128_ffn1.dat' index 8 using 1:2 with lines linewidth 1 linecolor rgb "#808c564b" notitle, \
     'curves_charlm_T1024_C128_ffn1.dat' index 11 using 1:2 with lines linewidth 1 linecolor rgb "#80e377c2" notitle, \
     'curves_charlm_T1024_C128_ffn1.dat' index 12 using 1:2 with lines linewidth 1 linecolor rgb "#80e377c2" notitle, \
     'curves_charlm_T1024_C128_ffn1.dat' index 13 using 1:2 with lines linewidth 1 linecolor rgb "#80e377c2" notitle, \
     'curves_charlm_T1024_C128_ffn1.dat' index 0 using 1:3 with linespoints linewidth 2 pointtype 7 pointsize 1.2 linecolor rgb "#1f77b4" title "softmax" noenhanced, \
     'curves_charlm_T1024_C128_ffn1.dat' index 4 using ($1-3.6):3:5:6 with yerrorbars linewidth 2 pointtype 6 pointsize 2 linecolor rgb "#1f77b4" notitle, \
     'curves_charlm_T1024_C128_ffn1.dat' index 5 using 1:3 with linespoints linewidth 2 pointtype 15 pointsize 1.2 linecolor rgb "#8c564b" title "sigmoid-logn" noenhanced, \
     'curves_charlm_T1024_C128_ffn1.dat' index 9 using ($1+0):3:5:6 with yerrorbars linewidth 2 pointtype 14 pointsize 2 linecolor rgb "#8c564b" notitle, \
     'curves_charlm_T1024_C128_ffn1.dat' index 10 using 1:3 with linespoints linewidth 2 pointtype 5 pointsize 1.2 linecolor rgb "#e377c2" title "boltzmann-rel-W4" noenhanced, \
     'curves_charlm_T1024_C128_ffn1.dat' index 14 using ($1+3.6):3:5:6 with yerrorbars linewidth 2 pointtype 4 pointsize 2 linecolor rgb "#e377c2" notitle, \
     NaN with points pointtype 6 pointsize 2 linewidth 2 linecolor rgb "black" title "final, all 108 items"
