# Written by boltzattn. Re-run from this directory: gnuplot J_heatmap_l0_h0.gp
set encoding utf8
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 900,650 enhanced font "sans,11"
} else {
    set terminal png size 900,650 enhanced
}
set output 'J_heatmap_l0_h0.png'
set title "couplings J_{jk}, layer 0, head 0 (charlm, boltzmann, T=12, mean of 10 runs)"
set xlabel "key j"
set ylabel "key k"
set cblabel "J_{jk}"
set size ratio -1
set xrange [-0.5:11.5]
set yrange [-0.5:11.5]
set xtics 1
set ytics 1
set cbrange [-1.52406:1.52406]
set palette defined (-1 "#2166ac", 0 "#f7f7f7", 1 "#b2182b")
# unused cells (k <= j) show the grey background
set object 1 rectangle from graph 0,0 to graph 1,1 behind fillcolor rgb "#d9d9d9" fillstyle solid noborder
# matrix file: row j, column k; drawn with x = j, y = k
plot 'J_l0_h0_matrix.txt' matrix using 2:1:($2 < $1 ? $3 : NaN) with image notitle, \
     'J_l0_h0_matrix.txt' matrix using 2:1:($2 < $1 ? sprintf("%.2f", $3) : "") with labels font ",10" notitle
