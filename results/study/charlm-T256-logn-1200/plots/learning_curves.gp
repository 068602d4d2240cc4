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
set title "validation metric during training (thick: mean over seeds; thin: each seed)\ncharlm, T=256, C=128: 1 seed, 1200 steps\nlines: periodic evaluations on the same 128 items\nopen points: final evaluation on all items (bar: the seeds' range)"
set ylabel "validation perplexity (lower is better)"
set logscale y
set ytics autofreq
set yrange [4.86158:8.99087]
set ytics (5, 5.5, 6, 6.5, 7, 7.5, 8, 8.5)
plot 'curves_charlm_T256_C128_ffn1.dat' index 1 using 1:2 with lines linewidth 1 linecolor rgb "#809467bd" notitle, \
     'curves_charlm_T256_C128_ffn1.dat' index 4 using 1:2 with lines linewidth 1 linecolor rgb "#808c564b" notitle, \
     'curves_charlm_T256_C128_ffn1.dat' index 7 using 1:2 with lines linewidth 1 linecolor rgb "#80e377c2" notitle, \
     'curves_charlm_T256_C128_ffn1.dat' index 0 using 1:3 with linespoints linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#9467bd" title "softmax-rope" noenhanced, \
     'curves_charlm_T256_C128_ffn1.dat' index 2 using ($1-14.4):3:5:6 with yerrorbars linewidth 2 pointtype 10 pointsize 2 linecolor rgb "#9467bd" notitle, \
     'curves_charlm_T256_C128_ffn1.dat' index 3 using 1:3 with linespoints linewidth 2 pointtype 15 pointsize 1.2 linecolor rgb "#8c564b" title "sigmoid-logn-rope" noenhanced, \
     'curves_charlm_T256_C128_ffn1.dat' index 5 using ($1+0):3:5:6 with yerrorbars linewidth 2 pointtype 14 pointsize 2 linecolor rgb "#8c564b" notitle, \
     'curves_charlm_T256_C128_ffn1.dat' index 6 using 1:3 with linespoints linewidth 2 pointtype 5 pointsize 1.2 linecolor rgb "#e377c2" title "sigmoid-rope" noenhanced, \
     'curves_charlm_T256_C128_ffn1.dat' index 8 using ($1+14.4):3:5:6 with yerrorbars linewidth 2 pointtype 4 pointsize 2 linecolor rgb "#e377c2" notitle, \
     NaN with points pointtype 6 pointsize 2 linewidth 2 linecolor rgb "black" title "final, all 435 items"
