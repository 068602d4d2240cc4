# Written by boltzattn. Re-run from this directory: gnuplot J_vs_distance.gp
set encoding utf8
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 900,650 enhanced font "sans,11"
} else {
    set terminal png size 900,650 enhanced
}
set output 'J_vs_distance.png'
set datafile separator ","
set title "mean coupling J by key distance (charlm, boltzmann-rel-W8-logn-rope, T=256, 2 layers x 4 heads, 5 runs)"
set xlabel "key distance d = k - j"
set ylabel "coupling J_{jk}"
set xrange [0.5:8.5]
set xtics 1
set grid
set key outside bottom center horizontal
set object 1 rectangle from 1.5, graph 0 to 4.5, graph 1 behind fillcolor rgb "#fbe4e4" fillstyle solid noborder
set label 1 "paper: J > 0" at 3, graph 0.04 center textcolor rgb "#b2182b"
set object 2 rectangle from 5.5, graph 0 to graph 1, graph 1 behind fillcolor rgb "#e3ecf7" fillstyle solid noborder
set label 2 "paper: J < 0" at 7, graph 0.04 center textcolor rgb "#2166ac"
plot 0 with lines dashtype 2 linecolor rgb "black" title "J = 0", \
     'distance_runs.csv' using 1:3:5:6 with yerrorlines linewidth 2 pointtype 7 linecolor rgb "#d62728" title "mean over 5 runs, 95 % interval over runs", \
     'distance.csv' using ((strcol(1) eq "0" && strcol(2) eq "0") ? $3 : NaN):5 with linespoints dashtype 2 linewidth 1.2 pointtype 4 linecolor rgb "#1f77b4" title "layer 0, head 0", \
     'distance.csv' using ((strcol(1) eq "0" && strcol(2) eq "1") ? $3 : NaN):5 with linespoints dashtype 2 linewidth 1.2 pointtype 6 linecolor rgb "#ff7f0e" title "layer 0, head 1", \
     'distance.csv' using ((strcol(1) eq "0" && strcol(2) eq "2") ? $3 : NaN):5 with linespoints dashtype 2 linewidth 1.2 pointtype 8 linecolor rgb "#2ca02c" title "layer 0, head 2", \
     'distance.csv' using ((strcol(1) eq "0" && strcol(2) eq "3") ? $3 : NaN):5 with linespoints dashtype 2 linewidth 1.2 pointtype 10 linecolor rgb "#9467bd" title "layer 0, head 3", \
     'distance.csv' using ((strcol(1) eq "1" && strcol(2) eq "0") ? $3 : NaN):5 with linespoints dashtype 2 linewidth 1.2 pointtype 12 linecolor rgb "#8c564b" title "layer 1, head 0", \
     'distance.csv' using ((strcol(1) eq "1" && strcol(2) eq "1") ? $3 : NaN):5 with linespoints dashtype 2 linewidth 1.2 pointtype 14 linecolor rgb "#e377c2" title "layer 1, head 1", \
     'distance.csv' using ((strcol(1) eq "1" && strcol(2) eq "2") ? $3 : NaN):5 with linespoints dashtype 2 linewidth 1.2 pointtype 4 linecolor rgb "#7f7f7f" title "layer 1, head 2", \
     'distance.csv' using ((strcol(1) eq "1" && strcol(2) eq "3") ? $3 : NaN):5 with linespoints dashtype 2 linewidth 1.2 pointtype 6 linecolor rgb "#17becf" title "layer 1, head 3"
