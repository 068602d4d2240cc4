# Written by boltzattn. Re-run from this directory: gnuplot width_T16.gp
set encoding utf8
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1800,690 enhanced font "sans,11"
} else {
    set terminal png size 1800,690 enhanced
}
set output '../width_T16.png'
set xlabel "embedding width C"
set grid
set key outside right top vertical
set bars small
set logscale x 2
set xtics (4, 8, 16, 32, 64)
set xrange [3.20428:79.8932]
set multiplot layout 1,2 title "brackets: held-out accuracy (%) vs width C at T=16\nmean ± sd over seeds (5 seeds, 16000 steps)" font ",13"
set title "with FFN"
set ylabel "held-out accuracy, % (higher is better)"
unset logscale y
set ytics autofreq
set yrange [80.3968:102.214]
plot 'brackets_T16_ffn1_vs_C.dat' index 0 using ($1*0.959264):3:4 with yerrorlines linewidth 2 pointtype 7 pointsize 1.2 linecolor rgb "#1f77b4" title "softmax" noenhanced, \
     'brackets_T16_ffn1_vs_C.dat' index 1 using ($1*0.986233):3:4 with yerrorlines linewidth 2 pointtype 5 pointsize 1.2 linecolor rgb "#ff7f0e" title "sigmoid" noenhanced, \
     'brackets_T16_ffn1_vs_C.dat' index 2 using ($1*1.01396):3:4 with yerrorlines linewidth 2 pointtype 9 pointsize 1.2 linecolor rgb "#d62728" title "boltzmann" noenhanced, \
     'brackets_T16_ffn1_vs_C.dat' index 3 using ($1*1.04247):3:4 with yerrorlines linewidth 2 pointtype 13 pointsize 1.2 linecolor rgb "#2ca02c" title "coupling" noenhanced
set title "without FFN (attention only)"
set ylabel "held-out accuracy, % (higher is better)"
unset logscale y
set ytics autofreq
set yrange [80.3968:102.214]
plot 'brackets_T16_ffn0_vs_C.dat' index 0 using ($1*0.959264):3:4 with yerrorlines linewidth 2 pointtype 7 pointsize 1.2 linecolor rgb "#1f77b4" title "softmax" noenhanced, \
     'brackets_T16_ffn0_vs_C.dat' index 1 using ($1*0.986233):3:4 with yerrorlines linewidth 2 pointtype 5 pointsize 1.2 linecolor rgb "#ff7f0e" title "sigmoid" noenhanced, \
     'brackets_T16_ffn0_vs_C.dat' index 2 using ($1*1.01396):3:4 with yerrorlines linewidth 2 pointtype 9 pointsize 1.2 linecolor rgb "#d62728" title "boltzmann" noenhanced, \
     'brackets_T16_ffn0_vs_C.dat' index 3 using ($1*1.04247):3:4 with yerrorlines linewidth 2 pointtype 13 pointsize 1.2 linecolor rgb "#2ca02c" title "coupling" noenhanced
unset multiplot
