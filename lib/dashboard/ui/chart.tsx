// Completed and failed jobs per minute over the last hour, drawn by uPlot (about 50 kB
// minified: canvas, no DOM per point). The plot is created once and fed new data on every
// refresh, so the page does not flicker or jump.

import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface Throughput {
  minutes: string[];
  completed: number[];
  failed: number[];
}

const HEIGHT = 200;

function toData(t: Throughput): uPlot.AlignedData {
  return [t.minutes.map((m) => Date.parse(m) / 1000), t.completed, t.failed];
}

export function ThroughputChart(props: { data: Throughput }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    // Side by side in each minute's slot: completed left of the tick, failed right of it.
    const left = uPlot.paths.bars?.({ size: [0.42, 10], align: -1 });
    const right = uPlot.paths.bars?.({ size: [0.42, 10], align: 1 });
    const opts: uPlot.Options = {
      width: Math.max(el.clientWidth, 300),
      height: HEIGHT,
      legend: { show: true, live: true },
      cursor: { drag: { x: false, y: false }, points: { show: false } },
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(4, Math.ceil(max * 1.15))] } },
      axes: [
        { stroke: '#5b6472', grid: { stroke: '#eceef2', width: 1 }, ticks: { stroke: '#dfe3e8', width: 1 } },
        { stroke: '#5b6472', grid: { stroke: '#eceef2', width: 1 }, ticks: { show: false }, size: 44 },
      ],
      series: [
        {},
        {
          label: 'completed / min',
          stroke: '#1f9d55',
          fill: 'rgba(31,157,85,0.55)',
          width: 1,
          paths: left,
          points: { show: false },
        },
        {
          label: 'failed / min',
          stroke: '#d64545',
          fill: 'rgba(214,69,69,0.8)',
          width: 1,
          paths: right,
          points: { show: false },
        },
      ],
    };
    const u = new uPlot(opts, toData(props.data), el);
    plot.current = u;
    const ro = new ResizeObserver(() => u.setSize({ width: Math.max(el.clientWidth, 300), height: HEIGHT }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
    // created once; data updates go through setData below
  }, []);

  useEffect(() => {
    plot.current?.setData(toData(props.data));
  }, [props.data]);

  return <div class="chart" ref={box} data-testid="throughput-chart" />;
}
