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
set xtics (256)
set xrange [255:257]
set title "charlm: validation perplexity vs T at C=128\nwith FFN\nmean ± sd over seeds (1 seed, 1200 steps)"
set ylabel "validation perplexity (lower is better)"
unset logscale y
set ytics autofreq
set yrange [5.01205:5.24227]
plot 'charlm_C128_ffn1_vs_T.dat' index 0 using ($1-0.04):3:4 with yerrorlines linewidth 2 pointtype 11 pointsize 1.2 linecolor rgb "#9467bd" title "softmax-rope" noenhanced, \
     'charlm_C128_ffn1_vs_T.dat' index 1 using ($1+0):3:4 with yerrorlines linewidth 2 pointtype 15 pointsize 1.2 linecolor rgb "#8c564b" title "sigmoid-logn-rope" noenhanced, \
     'charlm_C128_ffn1_vs_T.dat' index 2 using ($1+0.04):3:4 with yerrorlines linewidth 2 pointtype 5 pointsize 1.2 linecolor rgb "#e377c2" title "sigmoid-rope" noenhanced
