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
set xtics (256, 512, 1024, 2048, 4096)
set xrange [205.074:5113.16]
set title "charlm: validation perplexity at longer contexts (trained at T = 256)\neach run's model at its trained T and at longer T (ablate --extrapolate)\nmean ± sd over 3 runs (1200 steps), 64 windows of each length"
set ylabel "validation perplexity (lower is better)"
set logscale y
set ytics autofreq
set yrange [4.26605:59.8226]
set ytics (5, 7, 10, 15, 20, 30, 40, 50)
plot 'extrapolation.dat' index 0 using ($1*0.972655):3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#9467bd" title "softmax-rope" noenhanced, \
     'extrapolation.dat' index 1 using ($1*1):3:4 with yerrorlines linewidth 2 pointtype 15 pointsize 1.2 linecolor rgb "#8c564b" title "sigmoid-logn-rope" noenhanced, \
     'extrapolation.dat' index 2 using ($1*1.02811):3:4 with yerrorlines linewidth 2 pointtype 5 pointsize 1.2 linecolor rgb "#e377c2" title "sigmoid-rope" noenhanced
