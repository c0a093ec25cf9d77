#!/bin/sh
# Turns the BENCH lines of a soft-RoCE VM run (BUILD_DIR/ib-bench.txt, from
# tests/ib/run.sh) into the markdown tables of bench/results/*-softroce-vm.md:
# every figure per round, and ferry's ratios against perftest per round, with
# medians. Ratios are taken within a round only: the emulated machine drifts.
# usage: tests/ib/bench_report.sh ib-bench.txt
[ $# = 1 ] && [ -f "$1" ] || { echo "usage: $0 ib-bench.txt" >&2; exit 2; }
awk '
function median(name,   n, i, j, v, t) {
  n = 0
  for (i = 1; i <= rounds; i++) if ((name, i) in val) v[++n] = val[name, i]
  if (n == 0) return ""
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
  return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
function row(label, name, fmt,   i, s) {
  s = "| " label
  for (i = 1; i <= rounds; i++) s = s " | " (((name, i) in val) ? sprintf(fmt, val[name, i]) : "-")
  m = median(name)
  print s " | " (m == "" ? "-" : sprintf(fmt, m)) " |"
}
function ratio(name, a, b,   i) {
  for (i = 1; i <= rounds; i++)
    if ((a, i) in val && (b, i) in val && val[b, i] > 0) val[name, i] = val[a, i] / val[b, i]
}
function header(first,   i, s, d) {
  s = "| " first; d = "|---"
  for (i = 1; i <= rounds; i++) { s = s " | round " i; d = d "|---:" }
  print s " | median |"; print d "|---:|"
}
$1 == "round" { rounds = $2; next }
NF >= 3 { if (!rounds) rounds = 1; val[$1, rounds] = $2; unit[$1] = $3; if (!($1 in seen)) { seen[$1] = 1; order[++names] = $1 } }
END {
  sizes = "65536 1048576 4194304"; ns = split(sizes, sz, " ")
  ratio("r_lat", "ferry_ib_stream_query_latency", "ib_send_lat_rtt")
  ratio("r_lat_med", "ferry_ib_stream_query_latency", "ib_send_lat_rtt_median")
  ratio("r_lat_ev", "ferry_ib_stream_query_latency", "ib_send_lat_event_rtt")
  ratio("r_lat_tcp", "ferry_tcp_stream_query_latency", "ib_send_lat_rtt")
  for (k = 1; k <= ns; k++) {
    ratio("r_h2d_" sz[k], "ferry_ib_h2d_pinned_" sz[k], "ib_write_bw_" sz[k])
    ratio("r_d2h_" sz[k], "ferry_ib_d2h_pinned_" sz[k], "ib_write_bw_" sz[k])
    ratio("r_tcp_h2d_" sz[k], "ferry_tcp_h2d_pinned_" sz[k], "ib_write_bw_" sz[k])
  }
  print "### Ratios (target: latency <= 1.2, bandwidth >= 0.9)"
  print ""
  header("ferry over ib:// against perftest")
  row("round trip: `cudaStreamQuery` / 2 x `ib_send_lat` mean", "r_lat", "%.2f")
  row("round trip: `cudaStreamQuery` / 2 x `ib_send_lat` median", "r_lat_med", "%.2f")
  row("round trip: `cudaStreamQuery` / 2 x `ib_send_lat -e` mean", "r_lat_ev", "%.2f")
  for (k = 1; k <= ns; k++) row("H2D pinned " sz[k] " B / `ib_write_bw` " sz[k] " B", "r_h2d_" sz[k], "%.2f")
  for (k = 1; k <= ns; k++) row("D2H pinned " sz[k] " B / `ib_write_bw` " sz[k] " B", "r_d2h_" sz[k], "%.2f")
  print ""
  print "For reference, ferry over tcp:// (loopback in the same VM) against the same perftest figures:"
  print ""
  header("ferry over tcp:// against perftest")
  row("round trip: `cudaStreamQuery` / 2 x `ib_send_lat` mean", "r_lat_tcp", "%.2f")
  for (k = 1; k <= ns; k++) row("H2D pinned " sz[k] " B / `ib_write_bw` " sz[k] " B", "r_tcp_h2d_" sz[k], "%.2f")
  print ""
  print "### Figures"
  print ""
  header("figure")
  for (k = 1; k <= names; k++) row("`" order[k] "` (" unit[order[k]] ")", order[k], "%.4g")
}' "$1"
