#include "src/engine/watch_report.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "src/atomic_file.h"
#include "src/engine/serve_commands.h"

namespace fleet {
namespace {

// JSON safe inside <script>: no "</script>" can close it early.
std::string ScriptSafe(const std::string& json) {
  std::string out;
  for (char c : json) {
    if (c == '<')
      out += "\\u003c";
    else if (c == '>')
      out += "\\u003e";
    else if (c == '&')
      out += "\\u0026";
    else
      out += c;
  }
  return out;
}

const char* kPage = R"HTML(<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>fleet watch report</title>
<style>
body{font:14px sans-serif;margin:20px;color:#222}
h2{margin:24px 0 4px;font-size:16px}
svg{border:1px solid #ccc;background:#fafafa;margin:4px 8px 4px 0}
circle.fail{fill:#d00;stroke:#600;cursor:pointer}
circle.ok{stroke:none}
line.drift{stroke:#f80;stroke-dasharray:3,3}
line.floor{stroke-dasharray:8,4;stroke-width:1;opacity:0.8}
#sample{white-space:pre-wrap;background:#fff4f4;border:1px solid #d99;padding:8px;max-width:1100px}
.legend span{margin-right:12px}
</style></head><body>
<h1>fleet watch</h1>
<p id="summary"></p>
<p>Dashed level lines: a check's speed floors (<code>max_ttft</code> on the
first-token chart, <code>min_decode_tps</code> on the tokens/s chart), in
its color.</p>
<div id="charts"></div>
<h2>Selected failure</h2>
<pre id="sample">Click a red point to see its prompt and reply.</pre>
<script id="rounds" type="application/json">@ROUNDS@</script>
<script>
(function(){
var rounds = JSON.parse(document.getElementById('rounds').textContent);
var NS = 'http://www.w3.org/2000/svg';
var colors = ['#1f77b4','#2ca02c','#9467bd','#8c564b','#17becf','#7f7f7f','#bcbd22','#e377c2'];
var serves = {}, failures = 0, drifts = [];
rounds.forEach(function(r){
  var t = Date.parse(r.time);
  if (r.drift && r.drift.changes > 0) drifts.push(t);
  (r.checks || []).forEach(function(c){
    var key = 'deployment.' + c.deployment + '@' + c.node;
    var s = serves[key] = serves[key] || {};
    (s[c.check] = s[c.check] || []).push({t: t, c: c});
    if (c.result !== 'pass') failures++;
  });
});
var t0 = Infinity, t1 = -Infinity;
rounds.forEach(function(r){ var t = Date.parse(r.time); t0 = Math.min(t0, t); t1 = Math.max(t1, t); });
if (t1 <= t0) t1 = t0 + 1000;
document.getElementById('summary').textContent = rounds.length + ' rounds from ' +
  (rounds.length ? rounds[0].time + ' to ' + rounds[rounds.length-1].time : '-') + ', ' +
  failures + ' check results not passing, ' + drifts.length + ' rounds with drift';
function el(name, attrs, parent){
  var e = document.createElementNS(NS, name);
  for (var k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
// series: {name, color, points, field (what it plots), dash (a second line
// of a check: no failure marks), floor (the field holding the check's floor
// on this chart: a dashed level line in its color)}.
function chart(title, series, parent){
  var W = 560, H = 220, L = 50, R = 10, T = 20, B = 30;
  var max = 0;
  var num = function(v){ return typeof v === 'number' && v >= 0; };
  series.forEach(function(s){ s.points.forEach(function(p){
    var v = p.c[s.field], f = s.floor ? p.c[s.floor] : -1;
    if (num(v) && v > max) max = v;
    if (num(f) && f * 1.1 > max) max = f * 1.1;  // a floor below the top edge
  }); });
  if (max <= 0) max = 1;
  var svg = el('svg', {width: W, height: H, 'class': 'chart', 'data-field': series.length ? series[0].field : ''}, parent);
  el('text', {x: L, y: 14, 'font-size': 12}, svg).textContent = title;
  el('line', {x1: L, y1: H-B, x2: W-R, y2: H-B, stroke: '#999'}, svg);
  el('line', {x1: L, y1: T, x2: L, y2: H-B, stroke: '#999'}, svg);
  el('text', {x: 4, y: T+10, 'font-size': 10}, svg).textContent = max.toPrecision(3);
  el('text', {x: 4, y: H-B, 'font-size': 10}, svg).textContent = '0';
  var x = function(t){ return L + (W-L-R) * (t - t0) / (t1 - t0); };
  var hms = function(t){ return new Date(t).toISOString().substr(11, 8) + 'Z'; };
  el('text', {x: L, y: H-B+14, 'font-size': 10}, svg).textContent = hms(t0);
  el('text', {x: W-R, y: H-B+14, 'font-size': 10, 'text-anchor': 'end'}, svg).textContent = hms(t1);
  var y = function(v){ return H - B - (H-T-B) * v / max; };
  drifts.forEach(function(t){ el('line', {'class': 'drift', x1: x(t), y1: T, x2: x(t), y2: H-B}, svg); });
  series.forEach(function(s){
    var color = s.color, d = '';
    if (s.floor) {  // a level from each point that declares it to the next; the last to the edge
      var fl = s.points.filter(function(p){ return num(p.c[s.floor]); });
      fl.forEach(function(p, k){
        var v = p.c[s.floor], x1 = fl.length === 1 ? L : x(p.t), x2 = k + 1 < fl.length ? x(fl[k+1].t) : W-R;
        if (x2 <= x1) x2 = W-R;
        var line = el('line', {'class': 'floor', x1: x1, y1: y(v), x2: x2, y2: y(v), stroke: color}, svg);
        el('title', {}, line).textContent = s.name + ': ' + s.floor + ' ' + v;
      });
    }
    s.points.forEach(function(p){
      var v = p.c[s.field];
      if (num(v)) d += (d ? ' L ' : 'M ') + x(p.t).toFixed(1) + ' ' + y(v).toFixed(1);
    });
    if (d) el('path', {d: d, fill: 'none', stroke: color, 'stroke-width': 1.5,
                       'stroke-dasharray': s.dash ? '5,3' : 'none', 'class': 'series'}, svg);
    s.points.forEach(function(p){
      var v = p.c[s.field], bad = p.c.result !== 'pass' && !s.dash;
      if (!bad && !num(v)) return;
      var cy = bad ? H - B - 6 : y(v);
      if (bad && num(v)) cy = y(v);
      var dot = el('circle', {cx: x(p.t), cy: cy, r: bad ? 5 : 2.5, fill: color, 'class': bad ? 'fail' : 'ok'}, svg);
      el('title', {}, dot).textContent = p.c.time + ' ' + s.name + ': ' + p.c.result + (p.c.detail ? ' - ' + p.c.detail : '');
      if (bad) dot.addEventListener('click', function(){
        document.getElementById('sample').textContent = p.c.time + '  deployment.' + p.c.deployment + '@' + p.c.node +
          '  check ' + p.c.check + ': ' + p.c.result + '\n' + (p.c.detail || '') +
          '\n\nprompt:\n' + (p.c.prompt || '') + '\n\nreply:\n' + (p.c.reply || '');
      });
    });
  });
  return svg;
}
var charts = document.getElementById('charts');
// When each node was on: a band per node, green while the round's probe
// reached it, grey while it was off or asleep, each round's state held to
// the next round; wakes, idle offs and schedule decisions as ticks.
function powerChart(parent){
  var nodes = {};
  rounds.forEach(function(r){
    var t = Date.parse(r.time);
    Object.keys(r.nodes || {}).forEach(function(n){ (nodes[n] = nodes[n] || []).push({t: t, up: !!r.nodes[n].up}); });
  });
  var names = Object.keys(nodes).sort();
  if (!names.length) return;
  var W = 1130, L = 80, R = 10, T = 20, row = 18, H = T + row * names.length + 24;
  var svg = el('svg', {width: W, height: H, 'class': 'power'}, parent);
  el('text', {x: L, y: 14, 'font-size': 12}, svg).textContent = 'nodes on (green) and off or asleep (grey); ticks: wakes, idle offs, schedule decisions';
  var x = function(t){ return L + (W-L-R) * (t - t0) / (t1 - t0); };
  names.forEach(function(n, i){
    var y = T + row * i, on = 0;
    el('text', {x: 4, y: y + 12, 'font-size': 11}, svg).textContent = n;
    nodes[n].forEach(function(p, k){
      var next = k + 1 < nodes[n].length ? nodes[n][k+1].t : t1;
      if (p.up) on += next - p.t;
      var band = el('rect', {x: x(p.t), y: y + 2, width: Math.max(1, x(next) - x(p.t)), height: row - 4,
                             fill: p.up ? '#4c4' : '#ccc', 'class': p.up ? 'on' : 'off'}, svg);
      el('title', {}, band).textContent = n + (p.up ? ' on' : ' off') + ' from ' + new Date(p.t).toISOString();
    });
    var label = el('text', {x: W - R, y: y + 12, 'font-size': 10, 'text-anchor': 'end'}, svg);
    label.textContent = (on / 3600000).toFixed(2) + ' h on';
    rounds.forEach(function(r){
      ['wake', 'idle_off', 'schedule'].forEach(function(kind){
        (r[kind] || []).forEach(function(e){
          var hit = (e.nodes || []).indexOf(n) >= 0 || e.node === n;
          if (!hit || e.event === 'wake_request') return;
          var tx = x(Date.parse(e.time || r.time));
          var tick = el('line', {x1: tx, y1: y, x2: tx, y2: y + row, stroke: '#333', 'class': 'event'}, svg);
          el('title', {}, tick).textContent = e.time + ' ' + kind + ' ' + (e.outcome || '') + ': ' + (e.detail || '');
        });
      });
    });
  });
  var hms = function(t){ return new Date(t).toISOString().substr(11, 8) + 'Z'; };
  el('text', {x: L, y: H - 6, 'font-size': 10}, svg).textContent = hms(t0);
  el('text', {x: W - R, y: H - 6, 'font-size': 10, 'text-anchor': 'end'}, svg).textContent = hms(t1);
}
var ph = document.createElement('h2'); ph.textContent = 'power'; charts.appendChild(ph);
powerChart(charts);
Object.keys(serves).sort().forEach(function(key){
  var h = document.createElement('h2'); h.textContent = key; charts.appendChild(h);
  var legend = document.createElement('div'); legend.className = 'legend'; charts.appendChild(legend);
  var checks = Object.keys(serves[key]).sort().map(function(name, i){
    var sp = document.createElement('span'); sp.style.color = colors[i % colors.length];
    sp.textContent = '\u25cf ' + name; legend.appendChild(sp);
    return {name: name, points: serves[key][name], color: colors[i % colors.length]};
  });
  var as = function(extra){ return checks.map(function(c){ return Object.assign({}, c, extra); }); };
  // Time to first token: a fresh-context check's ttft_s is its fresh
  // prompt's; the same prompt sent again (cached_ttft_s) is its dashed line.
  var ttft = [];
  checks.forEach(function(c){
    ttft.push(Object.assign({}, c, {field: 'ttft_s', floor: 'max_ttft_s'}));
    if (c.points.some(function(p){ return typeof p.c.cached_ttft_s === 'number'; }))
      ttft.push(Object.assign({}, c, {name: c.name + ' cached', field: 'cached_ttft_s', dash: true}));
  });
  chart('latency (s) per check', as({field: 'wall_s'}), charts);
  chart('time to first token (s); fresh-context checks: fresh, and cached dashed', ttft, charts);
  chart('decode tokens/s (streamed checks)', as({field: 'tps', floor: 'min_decode_tps'}), charts);
});
document.body.setAttribute('data-rendered', String(document.querySelectorAll('svg.chart').length));
document.body.setAttribute('data-power-bands', document.querySelectorAll('svg.power rect.on').length + ' on, ' +
  document.querySelectorAll('svg.power rect.off').length + ' off, ' + document.querySelectorAll('svg.power line.event').length + ' events');
})();
</script>
</body></html>
)HTML";

}  // namespace

std::string WatchReportHtml(const std::vector<nlohmann::json>& rounds) {
  nlohmann::json data = nlohmann::json::array();
  for (const nlohmann::json& r : rounds) data.push_back(r);
  std::string page = kPage;
  const std::string marker = "@ROUNDS@";
  page.replace(page.find(marker), marker.size(), ScriptSafe(data.dump()));
  return page;
}

Status WriteWatchReport(const std::vector<nlohmann::json>& rounds, const std::string& path) {
  // 0600 like the state and the log: the report holds every check's prompt
  // and reply.
  Status s = WriteFileAtomic(path, WatchReportHtml(rounds));
  return s.ok() ? s : Status::Error("cannot write " + path + ": " + s.message());
}

Result<std::vector<nlohmann::json>> ReadWatchLog(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Result<std::vector<nlohmann::json>>::Error("cannot read " + path);
  std::vector<nlohmann::json> rounds;
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object()) rounds.push_back(std::move(j));
  }
  return rounds;
}

int CmdReport(const std::string& log_file, const std::string& out_file) {
  Result<std::vector<nlohmann::json>> rounds = ReadWatchLog(log_file);
  Status s = rounds.ok() ? WriteWatchReport(*rounds, out_file) : rounds.status();
  if (!s.ok()) {
    std::cerr << "fleet: " << s.message() << "\n";
    return 1;
  }
  std::cout << "Wrote " << out_file << " (" << rounds->size() << " rounds from " << log_file
            << ")\n";
  return 0;
}

}  // namespace fleet
