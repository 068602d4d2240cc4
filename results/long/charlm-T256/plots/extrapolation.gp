# Written by boltzattn. Re-run from this directory: gnuplot extrapolation.gp
set encoding utf8
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 900,650 enhanced font "sans,11"
} else {
    set terminal png size 900,650 enhanced
}
set output '../extrapolation.png'
set xlabel "evaluation length T (tokens of context)"
set grid
set key outside right top vertical
set bars small
set logscale x 2
set xtics (256, 1024)
set xrange [229.126:1144.1]
set title "charlm: validation perplexity at longer contexts (trained at T = 256)\neach run's model at its trained T and at longer T (ablate --extrapolate)\nmean ± sd over 15 runs (600 steps), every validation window; refused: softmax, sigmoid, sigmoid-logn, boltzmann-W8, boltzmann-rel-tap"
set ylabel "validation perplexity (lower is better)"
set logscale y
set ytics autofreq
set yrange [7.31716:12.0527]
set ytics (7.5, 8, 8.5, 9, 9.5, 10, 10.5, 11, 11.5, 12)
plot 'extrapolation.dat' index 0 using ($1*0.946058):3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#9467bd" title "softmax-nopos" noenhanced, \
     'extrapolation.dat' index 1 using ($1*1):3:4 with yerrorlines linewidth 2 pointtype 15 pointsize 1.2 linecolor rgb "#8c564b" title "boltzmann-rel-W4" noenhanced, \
     'extrapolation.dat' index 2 using ($1*1.05702):3:4 with yerrorlines linewidth 2 pointtype 5 pointsize 1.2 linecolor rgb "#e377c2" title "boltzmann-rel-W8" noenhanced
