# Written by boltzattn. Re-run from this directory: gnuplot acc_vs_T.gp
set encoding utf8
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 900,650 enhanced font "sans,11"
} else {
    set terminal png size 900,650 enhanced
}
set output '../acc_vs_T.png'
set xlabel "block size T (context length)"
set grid
set key outside right top vertical
set bars small
set xtics (8)
set xrange [7:9]
set title "brackets: held-out accuracy (%) vs T at C=16\nwith FFN\nmean ± sd over seeds (3 seeds, 1000 steps)"
set ylabel "held-out accuracy, % (higher is better)"
unset logscale y
set ytics autofreq
set yrange [79.6004:104.547]
plot 'brackets_C16_ffn1_vs_T.dat' index 0 using ($1-0.26):3:4 with yerrorlines linewidth 2 pointtype 7 pointsize 1.2 linecolor rgb "#1f77b4" title "softmax" noenhanced, \
     'brackets_C16_ffn1_vs_T.dat' index 1 using ($1-0.22):3:4 with yerrorlines linewidth 2 pointtype 9 pointsize 1.2 linecolor rgb "#d62728" title "boltzmann" noenhanced, \
     'brackets_C16_ffn1_vs_T.dat' index 2 using ($1-0.18):3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#e377c2" title "boltzmann-direct-S1024" noenhanced, \
     'brackets_C16_ffn1_vs_T.dat' index 3 using ($1-0.14):3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#7f7f7f" title "boltzmann-direct-S256" noenhanced, \
     'brackets_C16_ffn1_vs_T.dat' index 4 using ($1-0.1):3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#17becf" title "boltzmann-direct-S64" noenhanced, \
     'brackets_C16_ffn1_vs_T.dat' index 5 using ($1-0.06):3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#9467bd" title "boltzmann-dqa-S1024" noenhanced, \
     'brackets_C16_ffn1_vs_T.dat' index 6 using ($1-0.02):3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#8c564b" title "boltzmann-dqa-S256" noenhanced, \
     'brackets_C16_ffn1_vs_T.dat' index 7 using ($1+0.02):3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#e377c2" title "boltzmann-dqa-S64" noenhanced, \
     'brackets_C16_ffn1_vs_T.dat' index 8 using ($1+0.06):3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#7f7f7f" title "boltzmann-gibbs-S1024" noenhanced, \
     'brackets_C16_ffn1_vs_T.dat' index 9 using ($1+0.1):3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#17becf" title "boltzmann-gibbs-S256" noenhanced, \
     'brackets_C16_ffn1_vs_T.dat' index 10 using ($1+0.14):3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#9467bd" title "boltzmann-gibbs-S64" noenhanced, \
     'brackets_C16_ffn1_vs_T.dat' index 11 using ($1+0.18):3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#8c564b" title "boltzmann-sa-S1024" noenhanced, \
     'brackets_C16_ffn1_vs_T.dat' index 12 using ($1+0.22):3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#e377c2" title "boltzmann-sa-S256" noenhanced, \
     'brackets_C16_ffn1_vs_T.dat' index 13 using ($1+0.26):3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#7f7f7f" title "boltzmann-sa-S64" noenhanced
