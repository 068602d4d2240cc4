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
set title "validation metric during training (mean ± sd over seeds)\ncharlm, T=8, C=32: 3 seeds, 1000 steps\nlines: periodic evaluations on the same 256 items; open points: final evaluation, all items"
set ylabel "validation perplexity (lower is better)"
set logscale y
set ytics autofreq
set yrange [8.87253:26.9984]
set ytics (10, 12.5, 15, 17.5, 20, 22.5, 25)
plot 'curves_charlm_T8_C32_ffn1.dat' index 0 using 1:3:4 with yerrorlines linewidth 2 pointtype 7 pointsize 1.2 linecolor rgb "#1f77b4" title "softmax" noenhanced, \
     'curves_charlm_T8_C32_ffn1.dat' index 1 using ($1-78):3:4 with yerrorbars linewidth 2 pointtype 6 pointsize 2 linecolor rgb "#1f77b4" notitle, \
     'curves_charlm_T8_C32_ffn1.dat' index 2 using 1:3:4 with yerrorlines linewidth 2 pointtype 9 pointsize 1.2 linecolor rgb "#d62728" title "boltzmann" noenhanced, \
     'curves_charlm_T8_C32_ffn1.dat' index 3 using ($1-66):3:4 with yerrorbars linewidth 2 pointtype 8 pointsize 2 linecolor rgb "#d62728" notitle, \
     'curves_charlm_T8_C32_ffn1.dat' index 4 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#e377c2" title "boltzmann-direct-S1024" noenhanced, \
     'curves_charlm_T8_C32_ffn1.dat' index 5 using ($1-54):3:4 with yerrorbars linewidth 2 pointtype 10 pointsize 2 linecolor rgb "#e377c2" notitle, \
     'curves_charlm_T8_C32_ffn1.dat' index 6 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#7f7f7f" title "boltzmann-direct-S256" noenhanced, \
     'curves_charlm_T8_C32_ffn1.dat' index 7 using ($1-42):3:4 with yerrorbars linewidth 2 pointtype 10 pointsize 2 linecolor rgb "#7f7f7f" notitle, \
     'curves_charlm_T8_C32_ffn1.dat' index 8 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#17becf" title "boltzmann-direct-S64" noenhanced, \
     'curves_charlm_T8_C32_ffn1.dat' index 9 using ($1-30):3:4 with yerrorbars linewidth 2 pointtype 10 pointsize 2 linecolor rgb "#17becf" notitle, \
     'curves_charlm_T8_C32_ffn1.dat' index 10 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#9467bd" title "boltzmann-dqa-S1024" noenhanced, \
     'curves_charlm_T8_C32_ffn1.dat' index 11 using ($1-18):3:4 with yerrorbars linewidth 2 pointtype 10 pointsize 2 linecolor rgb "#9467bd" notitle, \
     'curves_charlm_T8_C32_ffn1.dat' index 12 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#8c564b" title "boltzmann-dqa-S256" noenhanced, \
     'curves_charlm_T8_C32_ffn1.dat' index 13 using ($1-6):3:4 with yerrorbars linewidth 2 pointtype 10 pointsize 2 linecolor rgb "#8c564b" notitle, \
     'curves_charlm_T8_C32_ffn1.dat' index 14 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#e377c2" title "boltzmann-dqa-S64" noenhanced, \
     'curves_charlm_T8_C32_ffn1.dat' index 15 using ($1+6):3:4 with yerrorbars linewidth 2 pointtype 10 pointsize 2 linecolor rgb "#e377c2" notitle, \
     'curves_charlm_T8_C32_ffn1.dat' index 16 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#7f7f7f" title "boltzmann-gibbs-S1024" noenhanced, \
     'curves_charlm_T8_C32_ffn1.dat' index 17 using ($1+18):3:4 with yerrorbars linewidth 2 pointtype 10 pointsize 2 linecolor rgb "#7f7f7f" notitle, \
     'curves_charlm_T8_C32_ffn1.dat' index 18 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#17becf" title "boltzmann-gibbs-S256" noenhanced, \
     'curves_charlm_T8_C32_ffn1.dat' index 19 using ($1+30):3:4 with yerrorbars linewidth 2 pointtype 10 pointsize 2 linecolor rgb "#17becf" notitle, \
     'curves_charlm_T8_C32_ffn1.dat' index 20 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#9467bd" title "boltzmann-gibbs-S64" noenhanced, \
     'curves_charlm_T8_C32_ffn1.dat' index 21 using ($1+42):3:4 with yerrorbars linewidth 2 pointtype 10 pointsize 2 linecolor rgb "#9467bd" notitle, \
     'curves_charlm_T8_C32_ffn1.dat' index 22 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#8c564b" title "boltzmann-sa-S1024" noenhanced, \
     'curves_charlm_T8_C32_ffn1.dat' index 23 using ($1+54):3:4 with yerrorbars linewidth 2 pointtype 10 pointsize 2 linecolor rgb "#8c564b" notitle, \
     'curves_charlm_T8_C32_ffn1.dat' index 24 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#e377c2" title "boltzmann-sa-S256" noenhanced, \
     'curves_charlm_T8_C32_ffn1.dat' index 25 using ($1+66):3:4 with yerrorbars linewidth 2 pointtype 10 pointsize 2 linecolor rgb "#e377c2" notitle, \
     'curves_charlm_T8_C32_ffn1.dat' index 26 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#7f7f7f" title "boltzmann-sa-S64" noenhanced, \
     'curves_charlm_T8_C32_ffn1.dat' index 27 using ($1+78):3:4 with yerrorbars linewidth 2 pointtype 10 pointsize 2 linecolor rgb "#7f7f7f" notitle, \
     NaN with points pointtype 6 pointsize 2 linewidth 2 linecolor rgb "black" title "final, all 13942 items"
