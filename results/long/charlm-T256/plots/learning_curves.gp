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
set title "validation metric during training\ncharlm, T=256, C=128; mean ± sd over seeds; last point: final evaluation, whole set"
set ylabel "validation perplexity"
set logscale y
set ytics autofreq
set yrange [7.13575:12.5464]
set ytics (8, 9, 10, 11, 12)
plot 'curves_charlm_T256_C128_ffn1.dat' index 0 using 1:3:4 with yerrorlines linewidth 2 pointtype 7 pointsize 1.2 linecolor rgb "#1f77b4" title "softmax" noenhanced, \
     'curves_charlm_T256_C128_ffn1.dat' index 1 using 1:3:4 with yerrorlines linewidth 2 pointtype 5 pointsize 1.2 linecolor rgb "#ff7f0e" title "sigmoid" noenhanced, \
     'curves_charlm_T256_C128_ffn1.dat' index 2 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#e377c2" title "boltzmann-W8" noenhanced, \
     'curves_charlm_T256_C128_ffn1.dat' index 3 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#7f7f7f" title "boltzmann-rel-W4" noenhanced, \
     'curves_charlm_T256_C128_ffn1.dat' index 4 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#17becf" title "boltzmann-rel-W8" noenhanced, \
     'curves_charlm_T256_C128_ffn1.dat' index 5 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#9467bd" title "boltzmann-rel-tap" noenhanced, \
     'curves_charlm_T256_C128_ffn1.dat' index 6 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#8c564b" title "sigmoid-logn" noenhanced, \
     'curves_charlm_T256_C128_ffn1.dat' index 7 using 1:3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#e377c2" title "softmax-nopos" noenhanced
