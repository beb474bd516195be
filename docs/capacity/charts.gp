# gnuplot charts.gp (in this folder): the PNGs of capacity.md
set terminal pngcairo size 900,540 noenhanced
set grid
set key top left
set logscale x 2
set output 'ttft.png'
set title 'TTFT against concurrent users'
set xlabel 'concurrent users'
set ylabel 'ms'
unset arrow
set arrow from 12, graph 0 to 12, graph 1 nohead dt 2 lc rgb 'black'
set label 1 'knee' at 12, graph 0.95 offset 0.5,0
plot 'ramp.dat' using 1:2 with linespoints title 'p50', '' using 1:3 with linespoints title 'p95', '' using 1:4 with linespoints title 'p99', 1500 with lines dt 3 lw 2 title 'p95 target'
set output 'itl.png'
set title 'Inter-token latency (per-request mean gap, TPOT) against concurrent users'
set xlabel 'concurrent users'
set ylabel 'ms'
unset arrow
set arrow from 12, graph 0 to 12, graph 1 nohead dt 2 lc rgb 'black'
set label 1 'knee' at 12, graph 0.95 offset 0.5,0
plot 'ramp.dat' using 1:5 with linespoints title 'p50', '' using 1:6 with linespoints title 'p95', '' using 1:7 with linespoints title 'p99', 150 with lines dt 3 lw 2 title 'p95 target'
set output 'throughput.png'
set title 'Throughput against concurrency'
set ylabel 'tokens/s'
set y2label 'tokens/s per user'
set y2tics
plot 'ramp.dat' using 1:8 with linespoints title 'tokens/s', '' using 1:10 with linespoints title 'goodput (within both targets)', '' using 1:9 axes x1y2 with linespoints title 'tokens/s per user (right)'
unset y2tics
unset y2label
unset logscale x
set output 'rates.png'
set title 'p95 latency against the arrival rate'
set xlabel 'requests/s (Poisson)'
set ylabel 'ms'
unset arrow
set arrow from 1.63761, graph 0 to 1.63761, graph 1 nohead dt 2
plot 'rates.dat' using 1:3 with linespoints title 'TTFT p95', '' using 1:6 with linespoints title 'TPOT p95', 1500 with lines dt 3 title 'TTFT target', 150 with lines dt 4 title 'TPOT target'
