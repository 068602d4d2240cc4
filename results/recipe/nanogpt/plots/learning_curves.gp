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
set title "validation metric during training (mean ± sd over seeds)\ncharlm, T=64, C=128: 3 seeds, 2000 steps\nlines: periodic evaluations on the same 512 items; open points: final evaluation, all items"
set ylabel "validation perplexity (lower is better)"
set logscale y
set ytics autofreq
set yrange [6.33643:10.0267]
set ytics (6.5, 7, 7.5, 8, 8.5, 9, 9.5, 10)
plot 'curves_charlm_T64_C128_ffn1.dat' index 0 using 1:3:4 with yerrorlines linewidth 2 pointtype 7 pointsize 1.2 linecolor rgb "#1f77b4" title "softmax" noenhanced, \
     'curves_charlm_T64_C128_ffn1.dat' index 1 using ($1+0):3:4 with yerrorbars linewidth 2 pointtype 6 pointsize 2 linecolor rgb "#1f77b4" notitle, \
     NaN with points pointtype 6 pointsize 2 linewidth 2 linecolor rgb "black" title "final, all 1742 items"
