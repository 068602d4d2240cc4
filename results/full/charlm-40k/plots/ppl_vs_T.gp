# Written by boltzattn. Re-run from this directory: gnuplot ppl_vs_T.gp
set encoding utf8
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 900,650 enhanced font "sans,11"
} else {
    set terminal png size 900,650 enhanced
}
set output '../ppl_vs_T.png'
set xlabel "block size T (context length)"
set grid
set key outside right top vertical
set bars small
set xtics (12)
set xrange [11:13]
set title "charlm: validation perplexity vs T at C=32\nwith FFN\nmean ± sd over seeds (5 seeds, 40000 steps)"
set ylabel "validation perplexity (lower is better)"
unset logscale y
set ytics autofreq
set yrange [6.97055:7.11608]
plot 'charlm_C32_ffn1_vs_T.dat' index 0 using ($1-0.02):3:4 with yerrorlines linewidth 2 pointtype 7 pointsize 1.2 linecolor rgb "#1f77b4" title "softmax" noenhanced, \
     'charlm_C32_ffn1_vs_T.dat' index 1 using ($1+0.02):3:4 with yerrorlines linewidth 2 pointtype 9 pointsize 1.2 linecolor rgb "#d62728" title "boltzmann" noenhanced
