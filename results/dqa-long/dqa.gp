# Written by boltzattn. Re-run from this directory: gnuplot dqa.gp
set encoding utf8
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1300,560 enhanced font "sans,11"
} else {
    set terminal png size 1300,560 enhanced
}
set output 'dqa.png'
set multiplot layout 1,2 title "simulated DQA vs the exact β = 1 distribution (random instances, n = 8, 5 instances, Γ = 1, order 2; mean ± sd over instances)"
set grid
set key bottom left box opaque
set xlabel "anneal time τ"
set logscale x 2
set ylabel "total variation distance to the β = 1 target"
set yrange [0:1]
plot 'dqa.dat' index 0 using 1:2:3 with yerrorlines linewidth 2 dashtype 1 pointtype 7 linecolor rgb "#1f77b4" title "M = 400, λ = 0.5", \
     'dqa.dat' index 1 using 1:2:3 with yerrorlines linewidth 2 dashtype 1 pointtype 7 linecolor rgb "#d62728" title "M = 400, λ = 1", \
     'dqa.dat' index 2 using 1:2:3 with yerrorlines linewidth 2 dashtype 1 pointtype 7 linecolor rgb "#2ca02c" title "M = 400, λ = 2"
set ylabel "effective inverse temperature β_{eff}"
set autoscale y
set key top left box opaque
set logscale y 10
plot 1 with lines dashtype 2 linecolor rgb "black" title "target β = 1", \
     'dqa.dat' index 0 using 1:4:5 with yerrorlines linewidth 2 dashtype 1 pointtype 7 linecolor rgb "#1f77b4" title "M = 400, λ = 0.5", \
     'dqa.dat' index 1 using 1:4:5 with yerrorlines linewidth 2 dashtype 1 pointtype 7 linecolor rgb "#d62728" title "M = 400, λ = 1", \
     'dqa.dat' index 2 using 1:4:5 with yerrorlines linewidth 2 dashtype 1 pointtype 7 linecolor rgb "#2ca02c" title "M = 400, λ = 2"
unset multiplot
