# Written by boltzattn. Re-run from this directory: gnuplot acc_vs_T.gp
set encoding utf8
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1800,690 enhanced font "sans,11"
} else {
    set terminal png size 1800,690 enhanced
}
set output '../acc_vs_T.png'
set xlabel "block size T (context length)"
set grid
set key outside right top vertical
set bars small
set xtics (16)
set xrange [15:17]
set multiplot layout 1,2 title "brackets: held-out accuracy (%) vs T at C=4\nmean ± sd over seeds (10 seeds, 64000 steps)" font ",13"
set title "with FFN"
set ylabel "held-out accuracy, % (higher is better)"
unset logscale y
set ytics autofreq
set yrange [83.9062:103.64]
plot 'brackets_C4_ffn1_vs_T.dat' index 0 using ($1-0.06):3:4 with yerrorlines linewidth 2 pointtype 7 pointsize 1.2 linecolor rgb "#1f77b4" title "softmax" noenhanced, \
     'brackets_C4_ffn1_vs_T.dat' index 1 using ($1-0.02):3:4 with yerrorlines linewidth 2 pointtype 5 pointsize 1.2 linecolor rgb "#ff7f0e" title "sigmoid" noenhanced, \
     'brackets_C4_ffn1_vs_T.dat' index 2 using ($1+0.02):3:4 with yerrorlines linewidth 2 pointtype 9 pointsize 1.2 linecolor rgb "#d62728" title "boltzmann" noenhanced, \
     'brackets_C4_ffn1_vs_T.dat' index 3 using ($1+0.06):3:4 with yerrorlines linewidth 2 pointtype 13 pointsize 1.2 linecolor rgb "#2ca02c" title "coupling" noenhanced
set title "without FFN (attention only)"
set ylabel "held-out accuracy, % (higher is better)"
unset logscale y
set ytics autofreq
set yrange [83.9062:103.64]
plot 'brackets_C4_ffn0_vs_T.dat' index 0 using ($1-0.06):3:4 with yerrorlines linewidth 2 pointtype 7 pointsize 1.2 linecolor rgb "#1f77b4" title "softmax" noenhanced, \
     'brackets_C4_ffn0_vs_T.dat' index 1 using ($1-0.02):3:4 with yerrorlines linewidth 2 pointtype 5 pointsize 1.2 linecolor rgb "#ff7f0e" title "sigmoid" noenhanced, \
     'brackets_C4_ffn0_vs_T.dat' index 2 using ($1+0.02):3:4 with yerrorlines linewidth 2 pointtype 9 pointsize 1.2 linecolor rgb "#d62728" title "boltzmann" noenhanced, \
     'brackets_C4_ffn0_vs_T.dat' index 3 using ($1+0.06):3:4 with yerrorlines linewidth 2 pointtype 13 pointsize 1.2 linecolor rgb "#2ca02c" title "coupling" noenhanced
unset multiplot
